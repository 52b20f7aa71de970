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


# Turns that fill what the bundled samples leave empty, so every must-ask field is deleted for real.
EXTRA = {"ecommerce": [{"role": "user", "content": "我要投诉，订单号ORDER-2024-0815的耳机坏了"}]}


def bundled_domains() -> list[str]:
    return sorted(p.stem for p in domains_dir().glob("*.yaml"))


@pytest.mark.parametrize("domain", bundled_domains())
def test_every_must_ask_field_is_asked_for_in_every_run(domain):
    """K=3 random present fields deleted in each of 40 runs, on every action of every bundled
    domain: every required and critical field is deleted at least once and asked for every time."""
    editor = ContextEditor(domain, "memory://")
    samples = sorted((domains_dir() / "samples").glob(f"{domain}_*.jsonl"))
    if domain == "travel":
        editor.ingest("s", long_travel_conversation(30))
    for path in samples:
        editor.ingest("s", [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()])
    editor.ingest("s", EXTRA.get(domain, []))
    for action, spec in editor.domain.actions.items():
        results = forgetting_test(editor, "s", action, k=3, runs=40, seed=1)
        shown = [*spec.fields, *(n for n, f in editor.domain.fields.items() if f.shared)]
        must = {n for n in shown if n in spec.required or editor.domain.fields[n].critical}
        assert {r.field for r in results if r.must_ask} == must
        for r in results:
            if r.must_ask:
                assert r.present and r.deleted > 0 and r.rate == 1.0, (action, r)
        assert report(results)["passed"]


def test_a_must_ask_field_the_session_never_had_is_checked_in_every_run():
    editor = ContextEditor("ecommerce", "memory://")
    editor.ingest("s", [{"role": "user", "content": "想买蓝牙耳机，预算2000以内"}])
    [order] = [r for r in forgetting_test(editor, "s", "handle_complaint", k=1, runs=10) if r.field == "order_id"]
    assert (order.must_ask, order.present, order.deleted, order.asked) == (True, False, 10, 10)


def test_a_context_that_does_not_ask_fails_the_test(monkeypatch):
    """The check reads the XML: a renderer whose <missing> lost a question is caught."""
    editor = ContextEditor("ecommerce", "memory://")
    editor.ingest("s", [{"role": "user", "content": "想买蓝牙耳机，预算2000以内，要黑色的"}])
    monkeypatch.setattr(editor.renderer, "_ask", lambda name, language: "" if name == "product" else "?")
    result = report(forgetting_test(editor, "s", "place_order", k=2, runs=20))
    assert not result["passed"]
    assert [f["rate"] < 1 for f in result["fields"] if f["field"] == "product"] == [True]


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
