"""What a render reuses from earlier renders never shows in its output (issue 15, render speed).

A live editor keeps work between renders: piece counts, whether the last render of an action
fitted (tried unmarked first), a minimal plan's lines, the zone's scored lines, turns, state
views. A render after each new message must equal, byte for byte, the render of a fresh editor
reading the same store, for any messages, action, budget and tokenizer; `tokens=` must be the
exact count of the output."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from context_editor import ContextEditor
from context_editor.domaintest import load_cases
from context_editor.errors import BudgetError
from context_editor.inject import render as render_module
from context_editor.inject.tokens import tokenizer_for

from conftest import ROOT

GOLDEN = ROOT / "tests" / "golden"
DOMAINS = ("ecommerce", "travel", "finance")
MODELS = ("gpt-4o", "gpt-4", "claude-3-5-sonnet")  # o200k_base, cl100k_base, the estimate on o200k_base
POOLS = {d: [m for case in load_cases(GOLDEN / d) for m in case.messages if m["role"] in ("user", "assistant")] for d in DOMAINS}


def rendered(editor: ContextEditor, session: str, action: str, budget: int | None) -> str:
    try:
        return editor.render(session, action, budget=budget).xml
    except BudgetError as exc:  # too small a budget: the same error either way
        return f"over budget: {exc}"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(domain=st.sampled_from(DOMAINS), model=st.sampled_from(MODELS), data=st.data())
def test_a_render_after_each_new_message_equals_a_fresh_editors(domain, model, data):
    pool = POOLS[domain]
    picks = data.draw(st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=16), label="messages")
    budgets = data.draw(st.lists(st.one_of(st.none(), st.integers(120, 900)), min_size=1, max_size=3), label="budgets")
    warm = ContextEditor(domain, "memory://", model=model)
    actions = sorted(warm.domain.actions)
    for step, i in enumerate(picks):
        warm.add("s", {"role": pool[i]["role"], "content": pool[i]["content"], "timestamp": "2024-05-01T10:00:00"})
        action = actions[step % len(actions)]
        for budget in budgets:
            xml = rendered(warm, "s", action, budget)
            cold = ContextEditor(domain, warm.store, model=model)
            assert xml == rendered(cold, "s", action, budget), (step, action, budget)
            if not xml.startswith("over budget"):
                assert f'tokens="{tokenizer_for(model).count(xml)}"' in xml


def test_an_action_that_fitted_and_then_does_not_is_searched_again():
    """The render tried unmarked first (it fitted last time) and now over its budget: the marked
    render and the search still run, and land where a fresh editor lands."""
    warm = ContextEditor("travel", "memory://")
    pool = POOLS["travel"]
    warm.add("s", {**pool[0], "timestamp": "2024-05-01T10:00:00"})
    first = warm.render("s", "book_flight", budget=400)
    assert not first.dropped
    for m in pool[1:40]:
        warm.add("s", {**m, "timestamp": "2024-05-01T10:00:00"})
    later = warm.render("s", "book_flight", budget=400)
    assert later.dropped and later.tokens <= 400
    assert later.xml == ContextEditor("travel", warm.store).render("s", "book_flight", budget=400).xml


def test_the_tokens_attribute_settles_wherever_a_template_puts_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The count is settled on the piece holding `tokens` when the padding point ("<context ")
    is in that piece, and on the whole text otherwise: exact either way."""
    tdir = tmp_path / "templates"
    tdir.mkdir()
    for name in ("default.xml.j2", "minimal.xml.j2", "multi.xml.j2"):
        (tdir / name).write_text((render_module.TEMPLATES_DIR / name).read_text("utf-8"), "utf-8")
    (tdir / "book_flight.xml.j2").write_text(
        '<context action="{{ action }}">\n  <meta tokens="{{ tokens }}" budget="{{ budget }}"/>\n'
        '{%- for f in fields %}\n  <field name="{{ f.name }}">{{ f.text|text }}</field>\n{%- endfor %}\n</context>', "utf-8")
    monkeypatch.setattr(render_module, "TEMPLATES_DIR", tdir)
    for model in MODELS:
        editor = ContextEditor("travel", "memory://", model=model)
        editor.renderer = render_module.Renderer(editor.domain, templates_dir=tdir, model=model)
        editor.add("s", {"role": "user", "content": "Fly me from Berlin to Tokyo on 2024-06-10, two adults, no layovers"})
        for action in ("book_flight", "plan_trip"):
            ctx = editor.render("s", action)
            assert ctx.tokens == tokenizer_for(model).count(ctx.xml), (model, action)


def test_a_plans_turns_are_taken_again_only_for_the_same_message_under_the_same_view():
    """`Renderer._seen` shows a message as the last plan did only when it is the very message
    object under the very view (`hidden`) of that plan; a new view masks anew, and another message
    at the same index (another session's, or the log rewritten) is read anew."""
    from dataclasses import replace

    from context_editor.inject import history
    from context_editor.model import Message

    editor = ContextEditor("ecommerce", "memory://")
    renderer = editor.renderer
    messages = [Message("s", i, i // 2, "user" if i % 2 == 0 else "assistant", text, hash=f"h{i}")
                for i, text in enumerate(["Hello.", "Noted.", "Ship it to Berlin.", "我们明天发货。"])]
    plain = history.Hidden({}, {}, {})
    masked = history.Hidden({2: [(11, 17, "city")]}, {}, {})

    def expected(msgs: list[Message], hidden: history.Hidden) -> dict[int, dict]:
        return {m.index: history.turn(renderer.domain, m, hidden) for m in msgs}

    assert renderer._seen(messages, plain, plain.fingerprint(spans=False)) == expected(messages, plain)
    assert "Berlin" in renderer._seen(messages, plain, plain.fingerprint(spans=False))[2]["content"]
    # The same messages under a new view: the city is hidden now.
    seen = renderer._seen(messages, masked, masked.fingerprint(spans=False))
    assert seen == expected(messages, masked) and "Berlin" not in seen[2]["content"]
    # Another message at index 3 (same view): read anew, the others taken again.
    other = [*messages[:3], replace(messages[3], content="我们后天发货。", hash="h3b")]
    seen = renderer._seen(other, masked, masked.fingerprint(spans=False))
    assert seen == expected(other, masked) and seen[3]["content"] == "我们后天发货。"
