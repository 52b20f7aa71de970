"""The forgetting test (issue 11): delete K random present fields N times; every required and
critical field must be asked for in 100% of runs, on every bundled action."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from context_editor import ContextEditor
from context_editor.forgetting import forgetting_test, report
from context_editor.resources import domains_dir

from long_conversation import long_travel_conversation


@pytest.mark.parametrize("domain", ["travel", "ecommerce", "finance"])
def test_every_must_ask_field_is_asked_for_in_every_run(domain):
    editor = ContextEditor(domain, "memory://")
    samples = sorted((domains_dir() / "samples").glob(f"{domain}_*.jsonl"))
    if domain == "travel":
        editor.ingest("s", long_travel_conversation(30))
    for path in samples:
        editor.ingest("s", [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()])
    for action, spec in editor.domain.actions.items():
        results = forgetting_test(editor, "s", action, k=3, runs=40, seed=1)
        for r in results:
            if r.must_ask:
                assert r.rate == 1.0, (action, r)
            if r.field in spec.required or editor.domain.fields[r.field].critical:
                assert r.must_ask
        assert report(results)["passed"]


def test_the_command_reports_and_exits_0(tmp_path):
    db = str(tmp_path / "s.db")
    editor = ContextEditor("travel", db)
    editor.ingest("trip", long_travel_conversation(12))
    editor.store.close()
    out = subprocess.run([sys.executable, "-m", "context_editor", "forgetting-test", "--session", "trip", "--store", db,
                          "--action", "book_flight", "--runs", "20", "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)["book_flight"]
    must = {f["field"] for f in result["fields"] if f["must_ask"]}
    assert {"destination", "departure_date", "budget_max", "flight_exclusions"} <= must
    assert all(f["rate"] == 1.0 for f in result["fields"] if f["must_ask"]) and result["passed"]
