"""Inject (issue 5): action views, exact budgets, working memory, tool results, compaction, echo guard."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_editor import ContextEditor, load_domain
from context_editor.errors import BudgetError
from context_editor.inject.tokens import count_tokens
from context_editor.inject.compact import shown_lines

TS = "2024-05-01T10:{:02d}:00+08:00"


def say(editor, session, *turns):
    for i, (role, text) in enumerate(turns):
        editor.add(session, {"role": role, "content": text, "timestamp": TS.format(i % 60)})


def parse(ctx):
    root = ET.fromstring(ctx.xml)
    assert int(root.get("tokens")) == ctx.tokens == count_tokens(ctx.xml)
    return root


def test_budget_sweep_is_exact_down_to_the_required_part(headphones):
    editor = ContextEditor("ecommerce", "memory://")
    editor.ingest("s", headphones)
    full = editor.render("s", "place_order", budget=5000)
    floor = None
    for budget in range(full.tokens + 5, 0, -7):
        try:
            ctx = editor.render("s", "place_order", budget=budget)
        except BudgetError as exc:
            floor = budget
            assert "product, color, budget_max" in str(exc) and "raise --budget" in str(exc)
            break
        root = parse(ctx)
        assert ctx.tokens <= budget
        values = {f.get("name"): f.text for f in root.find("state")}
        assert values["product"] == "蓝牙耳机" and values["color"] == "black" and values["budget_max"] == "2000 CNY"
        if ctx.dropped:
            assert root.find("truncated_context").get("dropped") == ", ".join(ctx.dropped)
    assert floor is not None and floor < full.tokens


def test_nothing_is_cut_mid_value(headphones):
    editor = ContextEditor("ecommerce", "memory://")
    editor.ingest("s", headphones)
    texts = {m["content"] for m in headphones}
    for budget in (200, 260, 320, 400):
        root = parse(editor.render("s", "place_order", budget=budget))
        for turn in root.iter("turn"):
            assert turn.text in texts  # whole messages or nothing
        assert "..." not in ET.tostring(root, encoding="unicode")


def test_forgetting_three_critical_fields_asks_for_exactly_those(headphones):
    editor = ContextEditor("ecommerce", "memory://")
    state = editor.ingest("s", headphones)
    renderer = editor.renderer
    messages = editor.store.messages("s")
    forgotten = ["product", "color", "budget_max"]  # the critical and required facts of place_order
    pruned = replace(state, fields={k: v for k, v in state.fields.items() if k not in forgotten})
    root = ET.fromstring(renderer.render(pruned, "place_order", messages).xml)
    asked = {f.get("name") for f in root.find("missing")}
    assert asked == set(forgotten)
    assert {f.get("name") for f in root.find("state")} == {"invoice_type"}


SCOPED = """\
domain: shop
version: 1
fields:
  order_id: {type: text, extract: [ids.order]}
  preferred_payment:
    type: enum
    values: {alipay: [支付宝], credit_card: [信用卡, credit card]}
    scopes: [order]
actions:
  place_order: {fields: [order_id, preferred_payment], scope: order, recent_rounds: 5}
  handle_complaint: {fields: [order_id], scope: complaint, recent_rounds: 5}
"""


def test_out_of_scope_fields_never_leak(tmp_path):
    path = tmp_path / "shop.yaml"
    path.write_text(SCOPED, encoding="utf-8")
    editor = ContextEditor(load_domain(path), "memory://")
    say(editor, "s", ("user", "我用支付宝付的，订单ORDER-2024-001有问题"))
    order = editor.render("s", "place_order").xml
    complaint = editor.render("s", "handle_complaint").xml
    assert "支付宝" in order and "alipay" in order
    assert "支付宝" not in complaint and "alipay" not in complaint
    assert "[preferred_payment hidden]" in complaint and "ORDER-2024-001" in complaint


def test_out_of_scope_text_does_not_leak_through_history_or_digest(tmp_path):
    path = tmp_path / "shop.yaml"
    path.write_text(SCOPED.replace("recent_rounds: 5}", "recent_rounds: 1}"), encoding="utf-8")
    editor = ContextEditor(load_domain(path), "memory://")
    say(editor, "s", ("user", "订单ORDER-2024-001用支付宝付了2000元。"), *[("user", f"订单ORDER-2024-001还没到{i}") for i in range(6)])
    xml = editor.render("s", "handle_complaint", budget=3000).xml
    assert "支付宝" not in xml and "alipay" not in xml
    assert "ORDER-2024-001" in xml


def test_scoped_field_in_the_wrong_action_is_a_lint_error(tmp_path):
    from context_editor.domain import lint_domain

    path = tmp_path / "shop.yaml"
    path.write_text(SCOPED.replace("fields: [order_id], scope: complaint", "fields: [order_id, preferred_payment], scope: complaint"),
                    encoding="utf-8")
    problems = lint_domain(path)[1]
    assert len(problems) == 1 and "visible only to scopes" in problems[0].message and problems[0].line == 11


def test_older_history_is_ranked_by_relevance_not_recency():
    editor = ContextEditor("ecommerce", "memory://")
    chatter = [("user", f"嗯嗯好的{i}") for i in range(8)]
    say(editor, "s", ("user", "我想买蓝牙耳机"), ("user", "预算2000以内"), *chatter, ("user", "要黑色的"))
    ctx = editor.render("s", "place_order", budget=400)
    root = parse(ctx)
    history = [t.text for t in root.find("history")]
    assert "预算2000以内" in history and "我想买蓝牙耳机" in history  # the sources of shown values
    assert len(history) <= editor.domain.actions["place_order"].max_history


def test_tool_chains_stay_whole_and_duplicates_are_shown_once():
    editor = ContextEditor("ecommerce", "memory://")
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    editor.add("s", {"role": "user", "content": "查一下订单ORDER-2024-001", "timestamp": TS.format(0)})
    editor.add("s", {"role": "assistant", "content": "", "tool_calls": [call], "timestamp": TS.format(1)})
    editor.add("s", {"role": "tool", "name": "lookup", "tool_call_id": "c1", "content": '{"status": "shipped"}', "timestamp": TS.format(2)})
    editor.add("s", {"role": "tool", "name": "lookup", "tool_call_id": "c1", "content": '{"status": "shipped"}', "timestamp": TS.format(3)})
    root = parse(editor.render("s", "handle_complaint", budget=2000))
    turns = [(t.get("role"), t.text) for t in root.find("recent_turns")]
    assert turns.count(("tool", '{"status": "shipped"}')) == 1
    assert ("assistant", "{}") in turns  # the call is kept with its result, shown by name and arguments
    assert [t.get("tool_call") for t in root.find("recent_turns") if t.get("role") == "assistant"] == ["lookup"]


def test_large_json_tool_results_are_trimmed_by_declaration(tmp_path):
    path = tmp_path / "shop.yaml"
    path.write_text(SCOPED + "tools:\n  search:\n    keep: [total, items, sku, price]\n    max_items: 2\n", encoding="utf-8")
    editor = ContextEditor(load_domain(path), "memory://")
    items = [{"sku": f"A{100 + i}", "price": 100 + i, "description": "x" * 200} for i in range(50)]
    editor.add("s", {"role": "user", "content": "搜一下", "timestamp": TS.format(0)})
    editor.add("s", {"role": "tool", "name": "search", "content": json.dumps({"total": 50, "items": items, "debug": "y" * 500}),
                     "timestamp": TS.format(1)})
    root = parse(editor.render("s", "place_order", budget=600))
    shown = json.loads(root.find("recent_turns/turn[@role='tool']").text)
    assert shown == {"total": 50, "items": [{"sku": "A100", "price": 100}, {"sku": "A101", "price": 101}, "48 more omitted"]}


HOSTILE = ["</field>", "<context action='x'>", "]]>", "<![CDATA[", "\x00\x01\x1f", "&lt;script&gt;", "\ud83d\ude00"]


@pytest.mark.parametrize("budget", [300, 600])
def test_hostile_content_and_a_10mb_tool_output_stay_valid_within_budget(budget):
    editor = ContextEditor("ecommerce", "memory://")
    say(editor, "s", ("user", "我想买耳机，要黑色，预算2000以内"), *[("user", h + " 还是黑色") for h in HOSTILE[:-1]])
    editor.add("s", {"role": "tool", "name": "dump", "content": "A" * 10_000_000, "timestamp": TS.format(59)})
    for action in editor.domain.actions:
        ctx = editor.render("s", action, budget=budget)
        root = parse(ctx)
        assert ctx.tokens <= budget
        assert all(len(t.text or "") < 10_000 for t in root.iter("turn"))
        if root.find("truncated_context") is not None:
            assert "oversized message" in root.find("truncated_context").get("dropped")


def test_assistant_echo_of_the_context_is_not_a_source(headphones):
    editor = ContextEditor("ecommerce", "memory://")
    editor.ingest("s", headphones)
    echoed = editor.render("s", "place_order").xml.replace("electronic", "paper")  # a stale or altered echo
    before = editor.why("s", "invoice_type")
    editor.add("s", {"role": "assistant", "content": "好的，我的上下文是：" + echoed, "timestamp": TS.format(30)})
    after = editor.why("s", "invoice_type")
    assert after == before  # value, provenance and history unchanged
    state = editor.state("s")
    assert [a.code for a in state.alerts] == ["CONTEXT_LOOP_DETECTED"]
    root = parse(editor.render("s", "place_order"))
    assert [a.get("code") for a in root.find("alerts")] == ["CONTEXT_LOOP_DETECTED"]


def test_digest_is_extractive_and_points_to_sources():
    editor = ContextEditor("ecommerce", "memory://")
    say(editor, "s", ("user", "我想买蓝牙耳机"),
        ("assistant", "这款耳机降噪效果好，因为麦克风阵列实时生成反向声波。实测地铁降噪深度达35dB。"),
        *[("user", f"嗯{i}") for i in range(6)], ("user", "要黑色的"))
    root = parse(editor.render("s", "recommend_product", budget=2000))
    lines = {line["text"]: line["src"] for line in shown_lines(root.find("summary"))}
    assert "实测地铁降噪深度达35dB。" in lines and lines["实测地铁降噪深度达35dB。"] == "m1"
    raw = editor.store.messages("s")[1].content
    assert all(text in raw or text in {m.content for m in editor.store.messages("s")} for text in lines)


def test_transient_fields_show_only_in_their_round():
    editor = ContextEditor("ecommerce", "memory://")
    say(editor, "s", ("user", "我要投诉，订单ORDER-2024-001"))
    assert '<field name="user_intent"' in editor.render("s", "handle_complaint").xml
    say(editor, "s", ("user", "耳机坏了"))
    editor.add("s", {"role": "user", "content": "在吗", "timestamp": TS.format(5)})
    assert '<field name="user_intent"' not in editor.render("s", "handle_complaint").xml


def test_template_that_drops_a_critical_field_falls_back_to_default(tmp_path, headphones, monkeypatch):
    from context_editor.inject import render as render_module

    tdir = tmp_path / "templates"
    tdir.mkdir()
    (tdir / "default.xml.j2").write_text((render_module.TEMPLATES_DIR / "default.xml.j2").read_text("utf-8"), "utf-8")
    (tdir / "place_order.xml.j2").write_text('<context action="{{ action }}" tokens="{{ tokens }}"/>', "utf-8")
    monkeypatch.setattr(render_module, "TEMPLATES_DIR", tdir)
    editor = ContextEditor("ecommerce", "memory://")
    editor.renderer = render_module.Renderer(editor.domain, templates_dir=tdir)
    editor.ingest("s", headphones)
    root = parse(editor.render("s", "place_order"))
    assert [a.get("code") for a in root.find("alerts")] == ["CRITICAL_COMPRESSION_FAILURE"]
    assert root.find("state/field[@name='budget_max']").text == "2000 CNY"


CARD = """\
domain: pay
version: 1
fields:
  order_id: {type: text, extract: [ids.order], sources: [user, tool]}
  card_number:
    type: text
    sources: [user, tool]
    scopes: [payment]
actions:
  pay: {fields: [order_id, card_number], scope: payment, recent_rounds: 5}
  track: {fields: [order_id], scope: tracking, recent_rounds: 5}
tools:
  lookup: {keep: [order_id, card_number, status]}
"""


@pytest.mark.parametrize("tool", ["payment", "lookup"])  # untrimmed and trimmed tool JSON
def test_a_scoped_value_inside_tool_json_never_leaks(tmp_path, tool):
    path = tmp_path / "pay.yaml"
    path.write_text(CARD, encoding="utf-8")
    editor = ContextEditor(load_domain(path), "memory://")
    say(editor, "s", ("user", "订单ORDER-2024-001付款"),
        ("tool", '{"order_id": "ORDER-2024-001", "payment": {"card_number": "1234567812345678", "status": "ok"}}'),
        ("tool", '{"receipt": {"pan": "1234567812345678"}, "status": "paid"}'))
    msgs = [m if m.role == "user" else replace(m, name=tool) for m in editor.store.messages("s")]
    assert editor.state("s").get("card_number") == "1234567812345678"
    track = editor.renderer.render(editor.state("s"), "track", msgs).xml
    assert "1234567812345678" not in track and "5678" not in track and "ORDER-2024-001" in track
    if tool == "payment":  # untrimmed: the key stays, its value is masked
        assert '[card_number hidden]' in track
    assert "1234567812345678" in editor.renderer.render(editor.state("s"), "pay", msgs).xml


def test_tool_keep_trims_only_objects_it_names_and_quotes_stay_plain(tmp_path):
    """`keep: [orders, total]` keeps each order whole (it used to empty them), and a tool's JSON
    is not doubled by &#34; (text nodes escape only <, > and &)."""
    path = tmp_path / "shop.yaml"
    path.write_text(SCOPED + "tools:\n  orders:\n    keep: [orders, total]\n    max_items: 2\n", encoding="utf-8")
    editor = ContextEditor(load_domain(path), "memory://")
    orders = [{"id": f"ORDER-{i}", "status": "shipped", "note": 'say "hi" <b>'} for i in range(3)]
    editor.add("s", {"role": "user", "content": "我的订单呢", "timestamp": TS.format(0)})
    editor.add("s", {"role": "tool", "name": "orders", "timestamp": TS.format(1),
                     "content": json.dumps({"total": 3, "orders": orders, "debug": "y" * 50})})
    ctx = editor.render("s", "place_order", budget=800)
    shown = json.loads(parse(ctx).find("recent_turns/turn[@role='tool']").text)
    assert shown == {"total": 3, "orders": [orders[0], orders[1], "1 more omitted"]}
    assert "&#34;" not in ctx.xml and '\\"hi\\" &lt;b&gt;' in ctx.xml


def test_a_tool_result_in_history_and_recent_turns_is_shown_once():
    editor = ContextEditor("ecommerce", "memory://")
    result = '{"order": "ORDER-2024-001", "status": "shipped"}'
    say(editor, "s", ("user", "查一下订单ORDER-2024-001"))
    editor.add("s", {"role": "tool", "name": "lookup", "content": result, "timestamp": TS.format(1)})
    say(editor, "s", *[("user", f"订单ORDER-2024-001到哪了{i}") for i in range(4)])
    editor.add("s", {"role": "tool", "name": "lookup", "content": result, "timestamp": TS.format(9)})
    xml = editor.render("s", "handle_complaint", budget=3000).xml
    assert xml.count("&#34;shipped&#34;") + xml.count('"shipped"') == 1


def test_the_guard_reads_field_elements_not_substrings(tmp_path, monkeypatch):
    """A template that drops `flight_exclusions: layover` while a recent turn says "no layovers":
    the word is still in the XML, the field element is not, so the default template takes over."""
    from context_editor.inject import render as render_module

    default = (render_module.TEMPLATES_DIR / "default.xml.j2").read_text("utf-8")
    dropping = default.replace("{%- for f in fields %}", '{%- for f in fields if f.name != "flight_exclusions" %}')
    assert dropping != default
    tdir = tmp_path / "templates"
    tdir.mkdir()
    (tdir / "default.xml.j2").write_text(default, "utf-8")
    (tdir / "book_flight.xml.j2").write_text(dropping, "utf-8")
    monkeypatch.setattr(render_module, "TEMPLATES_DIR", tdir)
    editor = ContextEditor("travel", "memory://")
    editor.renderer = render_module.Renderer(editor.domain, templates_dir=tdir)
    say(editor, "s", ("user", "Fly me to Tokyo on 2024-06-10, no layovers please"))
    assert editor.state("s").get("flight_exclusions") == ["layover"]
    dropped = render_module.Renderer(editor.domain, templates_dir=tdir).env.get_template("book_flight.xml.j2")
    assert "layover" in dropped.render(**{"action": "book_flight", "domain": "travel", "round": 1, "tokens": 0,
                                          "budget": 600, "phase": None, "fields": [], "missing": [], "alerts": [],
                                          "system": None, "goal": None, "subtask": None, "summary": [], "lost": "",
                                          "dropped": "", "entities": [], "digest": [], "history": [],
                                          "turns": [{"round": 1, "role": "user", "name": None,
                                                     "content": "no layovers please"}]})
    root = parse(editor.render("s", "book_flight"))
    assert [a.get("code") for a in root.find("alerts")] == ["CRITICAL_COMPRESSION_FAILURE"]
    assert root.find("state/field[@name='flight_exclusions']").text == "layover"


def test_lost_fields_needs_the_element_with_its_value():
    from context_editor.inject.render import lost_fields

    xml = ('<context><state><field name="budget_max">2000 CNY</field></state>'
           '<missing><field name="color">Which colour?</field></missing>'
           '<recent_turns><turn>no layovers, red is fine</turn></recent_turns></context>')
    assert lost_fields(xml, {"budget_max": "2000 CNY"}) == []
    assert lost_fields(xml, {"budget_max": "3000 CNY", "flight_exclusions": "layover", "color": "red"}) == [
        "budget_max", "flight_exclusions", "color"]
    assert lost_fields("<context><state>", {"budget_max": "2000 CNY"}) == ["budget_max"]


VALUE_TEXT = st.lists(st.one_of(st.characters(blacklist_categories=()), st.sampled_from(
    ["<", ">", "&", "]]>", '"', "'", "\r", "\n", "\x85", "\u2028", "\x0b", "\x00", "\ud800", " ", "\t", "&amp;"])),
    max_size=12).map("".join)


def _captured(domain: str, action: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, Any], Any]:
    """A real render's template and context (a render right after a new message, unmarked), and
    the template's own render function."""
    from jinja2 import Template

    editor = ContextEditor(domain, "memory://")
    said = {"ecommerce": ["我想买蓝牙耳机，预算2000，要黑色", "好的"], "travel": ["I want to fly to Sanya on 2024-05-10, budget 5000 CNY", "ok"]}
    for i, text in enumerate(said[domain]):
        editor.add("s", {"role": "user" if i % 2 == 0 else "assistant", "content": text, "timestamp": "2024-05-01T10:00:00+08:00"})
    seen = []
    real = Template.render
    with monkeypatch.context() as m:
        m.setattr(Template, "render", lambda self, *a, **k: seen.append((self, k)) or real(self, *a, **k))
        editor.render("s", action)
        editor.add("s", {"role": "user", "content": said[domain][0], "timestamp": "2024-05-01T10:01:00+08:00"})
        editor.render("s", action)  # it fitted last time: rendered once, unmarked
    template, ctx = seen[-1]
    assert "\x00" not in real(template, **ctx) and ctx["fields"]
    return template, {**ctx, "spec": editor.domain.actions[action]}, real


@pytest.mark.parametrize("domain,action", [("ecommerce", "place_order"), ("travel", "book_flight")])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(VALUE_TEXT, min_size=1, max_size=6))
def test_a_pinned_template_shows_every_protected_field_whatever_its_text(domain, action, texts, monkeypatch):
    """The guard skips parsing the output of a pinned template (`_shows_fields`) only where parsing
    would find every protected field: the same render's context with any field texts, parsed."""
    from context_editor.inject import render as R

    template, ctx, real = _captured(domain, action, monkeypatch)
    spec = ctx.pop("spec")
    assert R._pinned(template)
    plan = SimpleNamespace(spec=spec, sections={}, template=template)
    fields = [{**f, "text": texts[i % len(texts)]} for i, f in enumerate(ctx["fields"])]
    xml = real(template, **{**ctx, "fields": fields, "tokens": 123})
    expected = {f["name"]: f["text"] for f in fields}
    if R._shows_fields(plan, expected):
        assert R.lost_fields(xml, expected) == []
    assert not R._shows_fields(plan, {**expected, "x": "a\rb"})


@pytest.mark.parametrize("domain,action", [("ecommerce", "place_order"), ("travel", "book_flight")])
@pytest.mark.parametrize("lines", [True, False])
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(VALUE_TEXT | st.sampled_from(["a  b", "2000\rCNY", "x\u2028y", "p\x85q", "  ", "\r\n"]),
                      min_size=1, max_size=6))
def test_the_guard_finds_every_field_the_template_shows_whatever_its_text(domain, action, lines, texts, monkeypatch):
    """The protected-field guard on the bundled templates' output, as fields (elements) and as
    state lines, with any field texts: every field shown is found, so no render is refused (or
    sent to the default template) for a value holding two spaces, a carriage return or a line
    separator. (Before: such a value on a state line, or a carriage return in an element, was
    taken for lost: CRITICAL_LOST with the default template.)"""
    from context_editor.inject import render as R

    template, ctx, real = _captured(domain, action, monkeypatch)
    ctx.pop("spec")
    fields = [{**f, "text": texts[i % len(texts)]} for i, f in enumerate(ctx["fields"])]
    xml = real(template, **{**ctx, "fields": fields, "tokens": 123, "state_lines": lines})
    assert R.lost_fields(xml, {f["name"]: f["text"] for f in fields}) == []
    assert R.lost_fields(xml, {fields[0]["name"]: texts[0] + " more"}) == [fields[0]["name"]]


def test_only_the_pinned_templates_skip_the_guard():
    """A domain's own default.xml.j2 (or any edit of the bundled one) is parsed at every render."""
    from jinja2 import ChoiceLoader, DictLoader, Environment, FileSystemLoader
    from context_editor.inject import render as R

    editor = ContextEditor("ecommerce", "memory://")
    assert R._pinned(editor.renderer.env.get_template("place_order.xml.j2"))
    assert R._pinned(editor.renderer.env.get_template("default.xml.j2"))
    assert not R._pinned(editor.renderer.env.get_template("minimal.xml.j2"))
    bundled = FileSystemLoader(str(R.TEMPLATES_DIR))
    source = bundled.get_source(Environment(), "default.xml.j2")[0]
    own = Environment(loader=ChoiceLoader([DictLoader({"default.xml.j2": source.replace("<state>", "<state >")}), bundled]))
    assert not R._pinned_chain(own, "place_order.xml.j2") and not R._pinned_chain(own, "default.xml.j2")
    same = Environment(loader=ChoiceLoader([DictLoader({"default.xml.j2": source}), bundled]))
    assert R._pinned_chain(same, "place_order.xml.j2")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.text(alphabet=st.sampled_from(list("a<>&\"'中\x00\x0b\r\n \U0001f600\ud800")), max_size=12),
                          st.integers(-5, 10**6), st.none()), min_size=1, max_size=6))
def test_the_renderers_templates_escape_as_stock_jinja_does(values):
    """The renderer's templates (`_Template`) pass a Markup from `_finalize` through as it is instead
    of copying it: the output equals a stock Jinja environment's with the same settings, for plain
    and escaped texts, numbers and None, in a template and in one extending it; numbers as plain
    autoescape writes them; and a marked render (`_finalize` and `text` hand a `_Tag` over with its
    mark in front, escaped once) is the same output with the marks taken out."""
    from jinja2 import DictLoader
    from jinja2.sandbox import SandboxedEnvironment
    from context_editor.inject import render as render_module

    sources = {"base.xml.j2": '<a x="{{ v[0] }}">{% block b %}{% endblock %}{% for x in v %}<i y="{{ x }}">{{ x|text }}</i>{% endfor %}</a>',
               "child.xml.j2": '{% extends "base.xml.j2" %}{% block b %}<b>{{ v[-1] }}</b>{% endblock %}'}

    def env(template_class: Any) -> Any:
        e = SandboxedEnvironment(loader=DictLoader(sources), autoescape=True, finalize=render_module._finalize)
        e.filters["text"] = render_module._text
        if template_class is not None:
            e.template_class = template_class
        return e

    ours, stock = env(render_module._Template), env(None)
    plain = SandboxedEnvironment(loader=DictLoader(sources), autoescape=True)  # no finalize: autoescape alone
    plain.filters["text"] = render_module._text
    # A probe's marked render (each text an item's `_Tag`) is the same output once its marks are taken out.
    tagged = [render_module._Tag.of(x, i) if isinstance(x, str) else x for i, x in enumerate(values)]
    for name in sources:
        out = ours.get_template(name).render(v=values)
        assert out == stock.get_template(name).render(v=values)
        assert render_module._MARK.sub("", ours.get_template(name).render(v=tagged)) == out
        if not any(isinstance(x, str) for x in values):  # numbers and None: as autoescape writes them
            assert out == plain.get_template(name).render(v=values)
    assert ours.get_template("base.xml.j2").root_render_func.__globals__["escape"] is render_module._escape_once
