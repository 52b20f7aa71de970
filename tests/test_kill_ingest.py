"""kill -9 during ingest, fast sample (issue 12); the full run (1,000+ kills per store) is
benchmarks/kill_ingest.py. After every kill: nothing acknowledged is lost, the stored session is a
verifiable prefix (no partial message, no half-created schema), and re-running the ingest gives
the state of an uninterrupted run with an identical replay."""

from __future__ import annotations

import sys
import uuid

import psycopg
import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import kill_ingest  # noqa: E402


@pytest.mark.parametrize("kind,kills", [("sqlite", 10), ("postgres", 5)])
def test_kill_during_ingest_loses_nothing_and_resumes(kind, kills, tmp_path, request):
    if kind == "sqlite":
        make_url = lambda name: f"sqlite:///{tmp_path / f'{name}.db'}"  # noqa: E731
    else:
        base = request.getfixturevalue("pg_url")

        def make_url(name: str) -> str:
            schema = f"kill_{uuid.uuid4().hex}"
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {schema}")
            return f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3D{schema}"
    result = kill_ingest.run(make_url, kills, seed=len(kind))
    assert result["failure_count"] == 0, result["failures"]
    assert result["kill_points"].get("mid-session", 0) > 0  # the sample really kills inside sessions
