"""Compaction classes that act (issue 11): `trace` fields are rendered as one distilled line
(a Summarizer's line checked by rules, else the extractive line), `relation` fields seed the
entity graph with weight that propagates along links, and a render whose compaction ratio
leaves the configured band carries COMPACTION_RATIO_OUT_OF_BAND."""

from __future__ import annotations

import json
import logging
import xml.etree.ElementTree as ET

import pytest

from context_editor import ContextEditor
from context_editor.errors import Errors
from context_editor.inject.compact import entity_graph
from context_editor.llm import ChatClient, ChatSummarizer
from context_editor.pipeline import COMPACTION_RATIO_OUT_OF_BAND
from test_llm import ChatServer

NOTE = ("已核实订单ORDER-2024-001的耳机左耳无声，可能是出厂缺陷。仓库确认有库存，将于3个工作日内寄出换新件，"
        "运单号SF1234567890，旧件需在7天内寄回。客户同意换货，不需要退款。")


@pytest.fixture
def server():
    s = ChatServer()
    yield s
    s.close()


def complaint(editor: ContextEditor, note: str = NOTE) -> None:
    editor.add("s", {"role": "user", "content": "我要投诉订单ORDER-2024-001，耳机坏了", "timestamp": "2024-05-01T10:00:00+08:00"})
    editor.add("s", {"role": "tool", "name": "ticket", "timestamp": "2024-05-01T10:01:00+08:00",
                     "content": json.dumps({"order_id": "ORDER-2024-001", "resolution_note": note}, ensure_ascii=False)})


def shown(xml: str, name: str) -> str | None:
    node = ET.fromstring(xml).find(f"state/field[@name='{name}']")
    return None if node is None else node.text


def test_a_trace_field_is_shown_as_the_summarizers_line_when_the_rules_accept_it(server, tmp_path):
    db = str(tmp_path / "s.db")
    server.script = [lambda p: (200, "ORDER-2024-001换新，3日内寄，运单SF1234567890，7天内寄回")]
    live = ContextEditor("ecommerce", db, summarizer=ChatSummarizer(ChatClient(server.url, "scripted"), max_chars=45))
    complaint(live)
    assert live.state("s").get("resolution_note") == NOTE  # the state keeps the whole text
    xml = live.render("s", "handle_complaint").xml
    assert shown(xml, "resolution_note") == "ORDER-2024-001换新，3日内寄，运单SF1234567890，7天内寄回"
    assert len(server.prompts) == 1 and NOTE in server.prompts[0]
    [record] = [e for e in live.store.edits("s") if e.op == "llm"]
    assert record.after["kind"] == "distil" and record.reason == "LLM_DISTIL"
    server.close()  # the recorded answer renders the same context without the endpoint
    again = ContextEditor("ecommerce", db, summarizer=ChatSummarizer(ChatClient(server.url, "scripted", retries=1),
                                                                      max_chars=45))
    assert again.render("s", "handle_complaint").xml == xml


@pytest.mark.parametrize("answer, why", [
    ("订单可能是出厂缺陷，换新", "hedging"),
    ("已换新，运单SF1234567890", "drops the numbers 3 and 7 and the order id"),
])
def test_a_refused_line_gives_the_extractive_line(server, answer, why):
    server.script = [lambda p: (200, answer)]
    editor = ContextEditor("ecommerce", "memory://", summarizer=ChatSummarizer(ChatClient(server.url, "scripted")))
    complaint(editor)
    text = shown(editor.render("s", "handle_complaint").xml, "resolution_note")
    # the sentence keeping the most numbers and IDs, copied as written, and not the hedging one
    assert text == "仓库确认有库存，将于3个工作日内寄出换新件，运单号SF1234567890，旧件需在7天内寄回。", why


def test_without_a_summarizer_a_trace_is_its_extractive_line_and_a_short_one_is_kept_whole():
    editor = ContextEditor("ecommerce", "memory://")
    complaint(editor)
    assert shown(editor.render("s", "handle_complaint").xml, "resolution_note").startswith("仓库确认有库存")
    short = ContextEditor("ecommerce", "memory://")
    complaint(short, "已换新，运单SF1234567890")
    assert shown(short.render("s", "handle_complaint").xml, "resolution_note") == "已换新，运单SF1234567890"
    entities = [e.get("name") for e in ET.fromstring(editor.render("s", "handle_complaint").xml).iter("entity")]
    assert NOTE not in entities  # a trace's whole text is not an entity


def test_relation_values_propagate_weight_along_links():
    """Two identical neighbourhoods; only one holds a relation value. Without it they weigh the
    same; with it, each node of its neighbourhood weighs more, less the further it is."""
    texts = ["CA1234 and H-77", "Q-88 and H-99", "H-77 ok", "H-99 ok", "V-5 for H-77", "V-6 for H-99"]
    plain = {e.name: e.weight for e in entity_graph(texts, [])}
    assert (plain["CA1234"], plain["H-77"], plain["V-5"]) == (plain["Q-88"], plain["H-99"], plain["V-6"])
    related = {e.name: e for e in entity_graph(texts, [], relations=["CA1234"])}
    for near, far in (("CA1234", "Q-88"), ("H-77", "H-99"), ("V-5", "V-6")):
        assert related[near].weight > related[far].weight and related[far].relation == 0
        assert related[near].weight - related[near].relation == plain[near]
    assert related["CA1234"].relation > related["H-77"].relation > related["V-5"].relation > 0


def test_a_booked_flight_brings_what_it_was_mentioned_with_into_the_entities():
    editor = ContextEditor("travel", "memory://")
    turns = [("user", "下个月去三亚，5月10日出发"),
             ("tool", json.dumps({"booked_flight": "CA1234", "hotel": "HT-8812", "gate": "G12"})),
             ("user", "订单YT-5566和YT-5567都取消吧"), ("user", "YT-5566退款，YT-5567也退款")]
    for i, (role, text) in enumerate(turns):
        editor.add("s", {"role": role, "content": text, "name": "booking" if role == "tool" else None,
                         "timestamp": f"2024-04-01T10:{i:02d}:00+08:00"})
    assert editor.state("s").get("booked_flights") == ["CA1234"]
    entities = [(e.get("name")) for e in ET.fromstring(editor.render("s", "plan_trip", budget=2000).xml).iter("entity")]
    assert entities[:2] == ["CA1234", "HT-8812"] or entities[:2] == ["CA1234", "G12"], entities


def long_chat(editor: ContextEditor, rounds: int = 30) -> None:
    for i in range(rounds):
        editor.add("s", {"role": "user", "content": f"今天天气不错，我们聊聊第{i}个话题，随便说说最近看的电影和书。",
                         "timestamp": f"2024-05-01T10:{i:02d}:00+08:00"})
        editor.add("s", {"role": "assistant", "content": "好的，我很乐意听您分享，您最近看了哪些电影呢？还有什么书推荐吗？",
                         "timestamp": f"2024-05-01T10:{i:02d}:30+08:00"})


def test_a_ratio_outside_the_band_is_an_alert_for_the_caller(caplog):
    inside = ContextEditor("ecommerce", "memory://")
    long_chat(inside)
    ctx = inside.render("s", "recommend_product")
    assert ctx.source_tokens >= 400 and ctx.compaction_ratio < 1.0 and ctx.alerts == []
    strict = ContextEditor("ecommerce", "memory://", compaction_band=(0.5, 1.0))
    long_chat(strict)
    ctx = strict.render("s", "recommend_product")
    [alert] = ctx.alerts
    assert alert["code"] == COMPACTION_RATIO_OUT_OF_BAND and alert["catalog"] == Errors.COMPACTION_RATIO_OUT_OF_BAND.code
    assert f"{ctx.compaction_ratio:.2f} times the {ctx.source_tokens} tokens" in alert["message"] and "0.5-1.0" in alert["message"]
    assert "COMPACTION_RATIO_OUT_OF_BAND" not in ctx.xml  # for the operator, not the model
    assert strict.usage("s")["out_of_band"] == 1
    # Every render carries the alert and is counted; the log says it once per session and action.
    assert [r for r in caplog.records if COMPACTION_RATIO_OUT_OF_BAND in r.getMessage()]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="context_editor.pipeline"):
        strict.add("s", {"role": "user", "content": "还有别的推荐吗？", "timestamp": "2024-05-01T11:00:00+08:00"})
        assert strict.render("s", "recommend_product").alerts[0]["code"] == COMPACTION_RATIO_OUT_OF_BAND
    assert strict.usage("s")["out_of_band"] == 2
    assert not [r for r in caplog.records if COMPACTION_RATIO_OUT_OF_BAND in r.getMessage()]
    with caplog.at_level(logging.WARNING, logger="context_editor.pipeline"):
        strict._check_ratio("s", ctx)  # this session and action: said already
        strict._check_ratio("s3", ctx)  # another session: said once
    assert len([r for r in caplog.records if COMPACTION_RATIO_OUT_OF_BAND in r.getMessage()]) == 1
    short = ContextEditor("ecommerce", "memory://", compaction_band=(0.5, 1.0))
    long_chat(short, 2)  # too little history for a ratio to mean compaction
    assert short.render("s", "recommend_product").alerts == []
    off = ContextEditor("ecommerce", "memory://", compaction_band=None)
    long_chat(off)
    assert off.render("s", "recommend_product").alerts == []
