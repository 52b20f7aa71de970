"""The machine's triggers and the life of an alert: `when_complete`, silent guards, one alert per
code and field, resolution, and alerts as a budget tier that gives way and is named."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from context_editor import ContextEditor

DOMAIN = """\
domain: shop
version: 1
languages: [en]
fields:
  quantity:
    type: int
    constraints: {le: 100, error_code: TOO_MANY}
    extract: [{pattern: '(?P<value>\\d+) pieces', parse: int}]
  payment:
    type: enum
    values: {card: [credit card], cash: []}
  address:
    type: text
    extract: [{pattern: 'ship to (?P<value>[A-Z][a-z]+)'}]
  note:
    type: text
    extract: [{pattern: 'note: (?P<value>.+)'}]
machine:
  states: [browsing, ordering, ready]
  transitions:
    - {trigger: order, source: browsing, dest: ordering, when: {quantity: '*'}, conditions: [payment], on_fail: NEED_PAYMENT}
    - {trigger: quiet, source: browsing, dest: ready, when: {note: '*'}, conditions: [address], on_fail: null}
    - {trigger: complete, source: ordering, dest: ready, when_complete: [quantity, payment, address]}
actions:
  checkout:
    fields: [quantity, payment, address]
    required: [quantity]
    recent_rounds: 2
    budget_tokens: 300
"""


def editor(tmp_path: Path, domain: str = DOMAIN) -> ContextEditor:
    path = tmp_path / "shop.yaml"
    path.write_text(domain, "utf-8")
    return ContextEditor(path, "memory://")


def chat(texts: list[str]) -> list[dict]:
    out = []
    for i, text in enumerate(texts):
        out.append({"role": "user", "content": text, "timestamp": f"2024-05-01T10:{i // 60:02d}:{i % 60:02d}"})
        out.append({"role": "assistant", "content": "Noted.", "timestamp": f"2024-05-01T10:{i // 60:02d}:{i % 60:02d}"})
    return out


def test_a_guard_failing_for_200_rounds_stays_one_alert_and_fits_the_budget(tmp_path):
    ed = editor(tmp_path)
    state = ed.ingest("s", chat([f"make it {n % 90 + 1} pieces" for n in range(200)]))
    assert state.round == 200 and state.phase == "browsing"
    failed = [e for e in ed.store.edits("s") if e.op == "alert" and e.reason == "NEED_PAYMENT"]
    assert len(failed) >= 199  # every change of quantity tried the transition and failed
    assert [(a.code, a.field) for a in state.alerts] == [("NEED_PAYMENT", "payment")]
    ctx = ed.render("s", "checkout")
    assert ctx.tokens <= ctx.budget == 300
    assert [a.get("code") for a in ET.fromstring(ctx.xml).find("alerts")] == ["NEED_PAYMENT"]


def test_repeated_validation_failures_are_one_alert(tmp_path):
    ed = editor(tmp_path)
    state = ed.ingest("s", chat([f"make it {n} pieces" for n in range(150, 190)]))
    assert [(a.code, a.field, a.round) for a in state.alerts] == [("TOO_MANY", "quantity", 40)]


def test_a_guard_that_holds_later_resolves_its_alert_and_when_complete_fires(tmp_path):
    ed = editor(tmp_path)
    ed.ingest("s", chat(["make it 3 pieces"]))
    assert [a.code for a in ed.state("s").alerts] == ["NEED_PAYMENT"]
    state = ed.ingest("s", chat(["by credit card"]))
    assert state.alerts == []  # an alert about a field leaves once the field has a value
    state = ed.ingest("s", chat(["make it 4 pieces"]))
    assert state.phase == "ordering"
    state = ed.ingest("s", chat(["ship to Lisbon"]))  # completes [quantity, payment, address]
    assert state.phase == "ready"


def test_an_expression_guard_that_holds_resolves_its_alert(tmp_path):
    ed = editor(tmp_path, DOMAIN.replace("conditions: [payment], on_fail: NEED_PAYMENT",
                                         "conditions: ['quantity >= 10'], on_fail: SMALL_ORDER"))
    ed.ingest("s", chat(["make it 3 pieces", "make it 4 pieces"]))
    assert [(a.code, a.field) for a in ed.state("s").alerts] == [("SMALL_ORDER", None)]
    state = ed.ingest("s", chat(["make it 12 pieces"]))
    assert state.phase == "ordering" and state.alerts == []
    assert [e.reason for e in ed.store.edits("s") if e.op == "resolve"] == ["SMALL_ORDER"]
    assert "SMALL_ORDER" not in ed.render("s", "checkout").xml


def test_on_fail_null_keeps_a_guard_silent(tmp_path):
    ed = editor(tmp_path)
    state = ed.ingest("s", chat(["note: leave it at the door"]))
    assert state.phase == "browsing" and state.alerts == []
    assert not [e for e in ed.store.edits("s") if e.op == "alert"]


def test_alerts_give_way_under_budget_and_are_named(tmp_path):
    path = tmp_path / "many.yaml"
    fields = "".join(f"  f{i}:\n    type: int\n    constraints: {{le: 1, error_code: F{i}_IS_OVER_THE_LIMIT_OF_ONE}}\n"
                     f"    extract: [{{pattern: 'f{i}=(?P<value>\\d+)', parse: int}}]\n" for i in range(8))
    path.write_text(f"domain: many\nversion: 1\nlanguages: [en]\nfields:\n{fields}actions:\n"
                    f"  act:\n    fields: [{', '.join(f'f{i}' for i in range(8))}]\n    budget_tokens: 2000\n", "utf-8")
    ed = ContextEditor(path, "memory://")
    ed.ingest("s", chat([" ".join(f"f{i}={i + 5}" for i in range(8))]))
    full = ed.render("s", "act")
    assert len(ET.fromstring(full.xml).find("alerts")) == 8
    budget, kept = full.tokens, 8
    while kept == 8:  # tighten until the alerts tier gives way (the recent turn goes first)
        budget -= 10
        tight = ed.render("s", "act", budget=budget)
        root = ET.fromstring(tight.xml)
        kept = len(root.find("alerts"))
    assert 0 < kept < 8 and tight.tokens <= tight.budget
    assert [a.get("code") for a in root.find("alerts")] == [f"F{i}_IS_OVER_THE_LIMIT_OF_ONE" for i in range(8 - kept, 8)]
    assert f"{8 - kept} alert" in root.find("truncated_context").get("dropped")
