"""The seed's headphone conversation, end to end (issue 2's golden test)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from context_editor import ContextEditor


def test_headphone_conversation_final_state(editor, headphones):
    state = editor.ingest("s", headphones)
    doc = state.to_json()
    fields = doc["fields"]
    assert {k: v["value"] for k, v in fields.items()} == {
        "product": "蓝牙耳机",
        "budget_max": {"amount": 2000, "currency": "CNY"},
        "color": "black",
        "invoice_type": "electronic",
        "user_intent": "order",
        "resolution_status": "pending",
    }
    assert doc["phase"] == "ordering"
    assert doc["round"] == 6
    assert doc["alerts"] == []


def test_provenance_points_at_rounds_and_spans(editor, headphones):
    state = editor.ingest("s", headphones).to_json()["fields"]
    expected = {  # field: (round, message index, role, matched text)
        "product": (2, 2, "user", "蓝牙耳机"),
        "budget_max": (3, 4, "user", "2000"),
        "color": (4, 6, "user", "黑色"),
        "invoice_type": (5, 9, "assistant", "电子发票"),
        "user_intent": (6, 10, "user", "帮我下单"),
    }
    for name, (rnd, index, role, text) in expected.items():
        p = state[name]["provenance"]
        assert (p["round"], p["message_index"], p["role"], p["text"]) == (rnd, index, role, text), name
        start, end = p["span"]
        assert headphones[index]["content"][start:end] == text, name
    assert state["budget_max"]["provenance"]["extractor"] == "rule:money.budget.zh"
    assert state["resolution_status"]["provenance"] is None  # set by the machine, not by text
    assert state["resolution_status"]["history"][-1]["source"] == "machine"


def test_assistant_quoted_price_is_not_the_budget(editor, headphones):
    # "现价1999元" is said by the assistant; the budget is the user's 2000.
    state = editor.ingest("s", headphones)
    assert state.get("budget_max") == {"amount": 2000, "currency": "CNY"}
    assert [h.value for h in state.fields["budget_max"].history] == [{"amount": 2000, "currency": "CNY"}]


def test_order_context_has_exactly_the_declared_fields(editor, headphones):
    editor.ingest("s", headphones)
    ctx = editor.render("s", "place_order")
    root = ET.fromstring(ctx.xml)
    assert root.tag == "context" and root.get("action") == "place_order"
    declared = set(editor.domain.actions["place_order"].fields)
    rendered = {f.get("name") for f in root.find("state")}
    assert rendered <= declared
    assert rendered == {"product", "color", "budget_max", "invoice_type"}  # the declared ones that have values
    assert "user_intent" not in rendered and "resolution_status" not in rendered
    values = {f.get("name"): f.text for f in root.find("state")}
    assert values["budget_max"] == "2000 CNY" and values["color"] == "black"
    assert root.find("state/field[@name='budget_max']").get("round") == "3"
    assert int(root.get("tokens")) == ctx.tokens <= ctx.budget


def test_forgetting_test_asks_for_what_is_missing(editor):
    editor.ingest("s", [{"role": "user", "content": "那帮我下单吧", "timestamp": "2024-05-01T10:00:00+08:00"}])
    ctx = editor.render("s", "place_order")
    root = ET.fromstring(ctx.xml)
    missing = {f.get("name"): f.text for f in root.find("missing")}
    # Required fields and the critical budget are asked for, in the conversation's language.
    assert missing == {"product": "您想买什么商品？", "color": "您想要什么颜色？", "budget_max": "您的预算是多少？"}
    # Ordering without a product is refused by the machine's guard and raised as an alert.
    assert [a.get("code") for a in root.find("alerts")] == ["MISSING_PRODUCT_CONTEXT"]
    assert editor.state("s").phase == "browsing"


def test_as_of_round_reads_history(editor, headphones):
    editor.ingest("s", headphones)
    early = editor.state("s", as_of_round=3)
    assert early.get("budget_max") == {"amount": 2000, "currency": "CNY"}
    assert early.get("color") is None and early.phase == "browsing"


def test_why_as_of_round_reads_history_as_it_stood():
    editor = ContextEditor("ecommerce", "memory://")
    for text in ["要黑色", "改成红色", "还是黑色吧"]:
        editor.add("s", {"role": "user", "content": text, "timestamp": "2024-05-01T10:00:00"})
    then = editor.why("s", "color", as_of_round=2)
    assert then["value"] == "red" and [h["value"] for h in then["history"]] == ["black", "red"]
    assert editor.why("s", "color")["value"] == "black"


def test_correction_and_reversion_are_recorded():
    editor = ContextEditor("ecommerce", "memory://")
    ts = "2024-05-01T10:00:00+08:00"
    for text in ["我想买耳机，要黑色", "改成红色", "还是黑色吧"]:
        editor.add("s", {"role": "user", "content": text, "timestamp": ts})
    history = editor.why("s", "color")["history"]
    assert [(h["value"], h["source"]) for h in history] == [("black", "initial"), ("red", "correction"), ("black", "reversion")]


def test_negated_mention_does_not_set_a_value():
    editor = ContextEditor("ecommerce", "memory://")
    state = editor.ingest("s", [{"role": "user", "content": "我想买耳机，不要红色的", "timestamp": "2024-05-01T10:00:00"}])
    assert state.get("color") is None


def test_budget_over_limit_is_rejected_with_its_code():
    editor = ContextEditor("ecommerce", "memory://")
    ts = "2024-05-01T10:00:00"
    editor.add("s", {"role": "user", "content": "预算2000以内", "timestamp": ts})
    editor.add("s", {"role": "user", "content": "预算5000000元", "timestamp": ts})
    state = editor.state("s")
    assert state.get("budget_max") == {"amount": 2000, "currency": "CNY"}  # the accepted value stays
    last = state.fields["budget_max"].history[-1]
    assert (last.status, last.reason) == ("rejected", "VALIDATION_ERROR_BUDGET_EXCEEDS_LIMIT")
    assert [a.code for a in state.alerts] == ["VALIDATION_ERROR_BUDGET_EXCEEDS_LIMIT"]


def test_tool_json_sets_order_id_and_confirms_the_order(headphones):
    editor = ContextEditor("ecommerce", "memory://")
    editor.ingest("s", headphones)
    tool = {"role": "tool", "name": "create_order", "tool_call_id": "c1", "content": '{"orderId": "ORDER-2024-001", "status": "created"}'}
    state = editor.ingest("s", [tool])
    assert state.get("order_id") == "ORDER-2024-001"
    assert state.fields["order_id"].provenance.extractor == "tool:json"
    assert state.phase == "ordered"


def test_state_is_identical_on_memory_and_sqlite(tmp_path, headphones):
    a = ContextEditor("ecommerce", "memory://").ingest("s", headphones).to_json()
    b = ContextEditor("ecommerce", f"sqlite:///{tmp_path / 'x.db'}").ingest("s", headphones).to_json()
    assert a == b


def test_reopened_sqlite_store_continues_the_session(tmp_path, headphones):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    ContextEditor("ecommerce", url).ingest("s", headphones[:6])
    editor = ContextEditor("ecommerce", url)
    state = editor.ingest("s", headphones[6:])
    assert state.to_json() == ContextEditor("ecommerce", "memory://").ingest("s", headphones).to_json()
