"""Tamper fuzz, fast sample (issue 12): random tamperings of a real store, per class, on SQLite
and PostgreSQL. The full run (10,000 per store) is benchmarks/tamper_fuzz.py.

Every class that needs no key must be caught by a keyless `audit verify`; every class (including
consistent rewrites, rollbacks and whole-session deletion) must be caught with the trusted public
key and a checkpoint; an untouched store must pass, and verify must never raise.
"""

from __future__ import annotations

import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import tamper_fuzz  # noqa: E402


@pytest.mark.parametrize("kind,trials", [("sqlite", 300), ("postgres", 120)])
def test_every_tampering_is_detected(kind, trials, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'store.db'}" if kind == "sqlite" else request.getfixturevalue("pg_schema_url")
    result = tamper_fuzz.run(url, trials, seed=len(kind), workdir=tmp_path)
    assert result["crash_count"] == 0, result["crashes"]
    assert result["false_alarms"] == 0
    assert result["undetected_count"] == 0, result["undetected"]
    classes = result["classes"]
    assert all(c["tried"] > 0 for c in classes.values()), {k: c["tried"] for k, c in classes.items()}
    for name in tamper_fuzz.KEYLESS:
        assert classes[name]["detected_without_key"] == classes[name]["tried"], name
    # The classes that need a key are the ones a keyless verify cannot promise to catch.
    assert classes["session_delete"]["detected_without_key"] == 0
    assert classes["rollback_signed_head"]["detected_without_key"] == 0
