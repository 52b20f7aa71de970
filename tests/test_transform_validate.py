"""Transform and Validate (issue 4): conflict policies, TTL expiry, machine effects, plugin rules."""

from __future__ import annotations

import subprocess
import sys

import pytest

from context_editor import ContextEditor, audit, load_domain
from context_editor.errors import DomainError
from context_editor.store import SQLiteStore

DOMAIN = """\
domain: policy
version: 1
fields:
  first_color:
    type: enum
    values: {black: [黑色], red: [红色], white: [白色]}
    policy: first
  latest_color:
    type: enum
    values: {black: [黑色], red: [红色], white: [白色]}
  product_id: {type: text, extract: [ids.product], policy: highest_confidence}
  order_id: {type: text, extract: [ids.order], ttl: {days: 7}}
  note_intent:
    type: enum
    values: {quiet: [安静点, be quiet]}
    ttl: turn
    class: transient
  quantity: {type: int, constraints: {gt: 0, le: 99}}
  status:
    type: enum
    values: {open: [], resolved: []}
    sources: [tool]
  payment:
    type: enum
    values: {alipay: [支付宝]}
  intent:
    type: enum
    values: {cancel: [取消订单]}
machine:
  initial: active
  states: [active, cancelled]
  transitions:
    - {trigger: cancel, source: "*", dest: cancelled, when: {intent: cancel}, set: {status: resolved}, clear: [payment]}
actions:
  view: {fields: [first_color, latest_color, product_id, order_id, note_intent, quantity, status, payment]}
"""


@pytest.fixture
def editor(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(DOMAIN, encoding="utf-8")
    return ContextEditor(load_domain(path), f"sqlite:///{tmp_path / 'p.db'}")


def say(editor, text, ts="2024-05-01T10:00:00+08:00", role="user"):
    editor.add("s", {"role": role, "content": text, "timestamp": ts})
    return editor.state("s")


def test_first_is_locked_and_latest_moves(editor):
    say(editor, "黑色")
    state = say(editor, "红色")
    assert state.get("first_color") == "black" and state.get("latest_color") == "red"
    last = state.fields["first_color"].history[-1]
    assert (last.status, last.reason, last.value) == ("rejected", "POLICY_FIRST_LOCKED", "red")


def test_turn_ttl_expires_at_the_next_user_round_as_an_edit(editor):
    assert say(editor, "安静点").get("note_intent") == "quiet"
    state = say(editor, "好的")
    assert state.get("note_intent") is None
    assert [h.status for h in state.fields["note_intent"].history] == ["accepted", "expired"]
    assert state.fields["note_intent"].history[-1].source == "expiry"


def test_days_ttl_is_measured_on_message_timestamps(editor):
    say(editor, "订单ORDER-2024-001", ts="2024-05-01T10:00:00+08:00")
    assert say(editor, "在吗", ts="2024-05-07T10:00:00+08:00").get("order_id") == "ORDER-2024-001"
    state = say(editor, "在吗", ts="2024-05-08T10:00:01+08:00")
    assert state.get("order_id") is None and state.fields["order_id"].history[-1].status == "expired"
    assert audit.replay(SQLiteStore(editor.store.path), "s").identical


def test_naive_and_aware_timestamps_mix_without_error(editor):
    say(editor, "订单ORDER-2024-001", ts="2024-05-01T10:00:00")
    state = say(editor, "在吗", ts="2024-05-09T10:00:00+08:00")
    assert state.get("order_id") is None and state.fields["order_id"].history[-1].status == "expired"


def test_machine_effects_set_and_clear_with_source_machine(editor):
    say(editor, "用支付宝")
    state = say(editor, "取消订单")
    assert state.phase == "cancelled" and state.get("status") == "resolved" and state.get("payment") is None
    assert state.fields["payment"].history[-1].status == "cleared"
    assert state.fields["payment"].history[-1].source == "machine"


def test_role_policy_tool_only_field_ignores_user_text(editor):
    say(editor, "status resolved")
    assert editor.state("s").get("status") is None


PLUGIN_DOMAIN = DOMAIN + """\
plugins: [stock.py]
rules:
  - id: stock
    plugin: stock.check_stock
    fields: [quantity]
    code: OUT_OF_STOCK
"""
STOCK = "def check_stock(values, today):\n    return True if values['quantity'] <= 5 else f\"only 5 left, asked {values['quantity']}\"\n"


def plugin_domain(tmp_path):
    (tmp_path / "stock.py").write_text(STOCK, encoding="utf-8")
    path = tmp_path / "policy.yaml"
    # quantity comes from tool results here, so no rule pack is needed
    path.write_text(PLUGIN_DOMAIN.replace("quantity: {type: int, constraints: {gt: 0, le: 99}}",
                                          "quantity: {type: int, constraints: {gt: 0, le: 99}, sources: [tool]}"), "utf-8")
    return path


def test_plugins_are_refused_unless_enabled(tmp_path):
    path = plugin_domain(tmp_path)
    with pytest.raises(DomainError, match="allow-plugins"):
        load_domain(path)
    out = subprocess.run([sys.executable, "-m", "context_editor", "run", str(path), "-", "--json"],
                         input="[]", capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--allow-plugins" in out.stderr


def test_plugin_rule_rejects_with_its_message_and_replays(tmp_path):
    path = plugin_domain(tmp_path)
    editor = ContextEditor(path, f"sqlite:///{tmp_path / 'q.db'}", allow_plugins=True)
    editor.add("s", {"role": "tool", "content": '{"quantity": 3}', "timestamp": "2024-05-01T10:00:00"})
    editor.add("s", {"role": "tool", "content": '{"quantity": 9}', "timestamp": "2024-05-01T10:00:01"})
    state = editor.state("s")
    assert state.get("quantity") == 3
    assert state.fields["quantity"].history[-1].reason == "OUT_OF_STOCK"
    assert [(a.code, a.message) for a in state.alerts] == [("OUT_OF_STOCK", "only 5 left, asked 9")]
    # Replay uses the plugin code stored with the session, and still needs the explicit opt-in.
    store = SQLiteStore(tmp_path / "q.db")
    with pytest.raises(DomainError):
        audit.replay(store, "s")
    assert audit.replay(store, "s", allow_plugins=True).identical


def test_lint_checks_plugin_references_without_running_them(tmp_path):
    from context_editor.domain import lint_domain

    path = plugin_domain(tmp_path)
    (tmp_path / "stock.py").write_text("raise SystemExit('lint must not import plugins')\n", "utf-8")
    text = path.read_text("utf-8").replace("plugin: stock.check_stock", "plugin: stok.check_stock")
    path.write_text(text, "utf-8")
    problems = lint_domain(path)[1]
    assert [p.message for p in problems] == ["rule 'stock' uses plugin module 'stok.py', which is not listed under `plugins`"]
