"""Render speed without giving up exact budgets (issues 10, 11, 15): token counts summed piece by
piece must equal the whole count for every tokenizer that uses them; the search on summed counts
must land where the exact bisection does; anything else falls back to counting whole texts."""

from __future__ import annotations


import pytest
from hypothesis import given, settings, strategies as st

from context_editor import ContextEditor
from context_editor.domaintest import load_cases
from context_editor.inject import render as render_module
from context_editor.inject.tokens import SegmentCounter, segment_counter, tokenizer_for

from conftest import ROOT
from long_conversation import long_travel_conversation

ADDITIVE = ("gpt-4o", "gpt-4", "claude-3-5-sonnet")  # o200k_base, cl100k_base, the estimate on o200k_base
GOLDEN = ROOT / "tests" / "golden"

# Characters around which pre-tokenizers decide: newlines of every kind, spaces and tabs before
# and after them, slashes (o200k's punctuation run takes `[\r\n/]*`), tags, digits, CJK, contractions.
PIECES = st.sampled_from(list("\n\n\n  \t/<>aZé1中文。，\r\x0b\x0c\x85\u2028'&\"")
                         + ["</turn>", "\n    <", "'s", "\r\n", "  \n", "12345", "\n/", "\n  /"])


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=40).map("".join))
def test_piece_counts_add_up_to_the_whole_count_on_any_text(text):
    for model in ADDITIVE:
        counter = SegmentCounter(tokenizer_for(model))
        assert counter.additive and counter.proven  # renders trust these sums without a whole count
        assert counter.count(text) == counter.tokenizer.count(text), (model, counter.pieces(text))


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES | st.sampled_from(["²", "½", "٣", "Ⅻ", "〇", "0", "007", "tokens=\"", "\" ", "m", " ×"]), max_size=16).map("".join),
       st.lists(st.integers(0, 10**7), min_size=1, max_size=4))
def test_a_piece_told_from_its_numbers_skeleton_counts_as_the_tokenizer_does(text, numbers):
    """`SegmentCounter.piece`: a text that differs from one counted before only in its numbers is
    told from the count of its skeleton (numbers written "0"); the count equals the tokenizer's,
    whatever is around the numbers (other numeric characters: counted whole)."""
    texts = [text] + [text.replace("0", str(n)) for n in numbers] + [text.replace("1", str(n)) for n in numbers]
    for model in ADDITIVE:
        counter = SegmentCounter(tokenizer_for(model))
        base = counter.tokenizer.base if counter.tokenizer.estimated else counter.tokenizer  # type: ignore[attr-defined]
        for filled in texts:  # the first counts the skeleton, the others are told from it
            assert counter.piece(filled) == base.count(filled), (model, filled)


def test_pieces_told_from_their_skeleton_stay_within_the_cache_bound(monkeypatch):
    """A process that renders ever new numbers (rounds, `tokens=`, sources) whose digit groups and
    skeleton were all counted before keeps no more than SEGMENT_CACHE counts, still right."""
    monkeypatch.setattr("context_editor.inject.tokens.SEGMENT_CACHE", 8)
    counter = SegmentCounter(tokenizer_for("gpt-4o"))
    texts = [f"m{a} m{b} m{c}" for a in range(1, 4) for b in range(1, 4) for c in range(1, 4)]
    for text in texts:
        assert counter.piece(text) == counter.tokenizer.count(text), text
        assert len(counter._cache) <= 8, len(counter._cache)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(PIECES, max_size=12).map("".join), max_size=8))
def test_lines_counted_one_by_one_add_up_to_their_join(lines):
    """`count_said` (a render's raw window, "role: content" per message) equals the whole count of
    the joined text, whatever the lines hold (roles that do not start a piece: counted whole),
    counted afresh and again from the lines it remembered."""
    said = [("user" if i % 2 else "tool" if i % 3 else line[:2], line) for i, line in enumerate(lines)]
    for model in ADDITIVE:
        counter = SegmentCounter(tokenizer_for(model))
        whole = counter.tokenizer.count("\n".join(f"{role}: {text}" for role, text in said))
        assert counter.count_said(said) == counter.count_said(said) == whole, (model, said)
        assert all(isinstance(key[0], tuple) for key in counter._lines), model  # one kind of key: (role, text)


@pytest.mark.parametrize("model", ADDITIVE)
def test_every_golden_context_counts_the_same_piece_by_piece(model):
    counter = SegmentCounter(tokenizer_for(model))
    checked = 0
    for domain in ("ecommerce", "travel", "finance"):
        editor = ContextEditor(domain, "memory://", model=model)
        for case in load_cases(GOLDEN / domain):
            editor.ingest(case.id, case.messages)
            for action in editor.domain.actions:
                ctx = editor.render(case.id, action, budget=100_000)
                assert counter.count(ctx.xml) == counter.tokenizer.count(ctx.xml) == ctx.tokens
                checked += 1
    assert checked > 100


def test_a_tokenizer_json_is_counted_whole(tmp_path):
    """Hugging Face pre-tokenizers differ in where they split (a byte-level one keeps a newline
    with the spaces after it): no piece sums for them, the plain bisection on whole counts."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(["<turn>hello 你好</turn>\n    <turn>2000 元</turn>"] * 10,
                            trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                show_progress=False))
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    assert not segment_counter(str(path)).additive
    editor = ContextEditor("travel", "memory://", model=str(path))
    editor.ingest("s", long_travel_conversation(30))
    full = editor.render("s", "book_flight", budget=100_000)
    ctx = editor.render("s", "book_flight", budget=full.tokens - 60)
    assert ctx.tokens == tokenizer_for(str(path)).count(ctx.xml) <= full.tokens - 60 < full.tokens


def _bisected(editor: ContextEditor, monkeypatch: pytest.MonkeyPatch, *args: object) -> str:
    with monkeypatch.context() as m:
        m.setattr(render_module.Renderer, "_fit", lambda self, plan, state: self._bisect(plan, state, plan.sizes(), {}))
        return editor.render(*args).xml


@pytest.mark.parametrize("model", ADDITIVE[::2])
def test_the_search_on_summed_counts_finds_what_the_bisection_finds(model, monkeypatch):
    editor = ContextEditor("travel", "memory://", model=model)
    editor.ingest("s", long_travel_conversation(60))
    builds = []
    original = render_module.Renderer._build
    monkeypatch.setattr(render_module.Renderer, "_build", lambda self, *a, **k: builds.append(1) or original(self, *a, **k))
    for action in editor.domain.actions:
        # From 280: the smallest context (required fields, and the names of every fact and open
        # value the budget dropped, recent turns' included) is 268 tokens for book_flight here.
        for budget in range(280, 900, 41):
            builds.clear()
            fast = editor.render("s", action, budget=budget)
            fast_builds = len(builds)
            assert fast.xml == _bisected(editor, monkeypatch, "s", action, budget)
            assert fast.tokens == tokenizer_for(model).count(fast.xml) <= budget
            # The marked whole render and the candidate (no check of one item more: `Renderer._fit`).
            # The guess counts what a cut brings in (its <truncated_context> line, the summary lines
            # its dropped turns hid) and what it empties (the wrappers of a tier it drops whole):
            # without them 10 of these 32 searches took a third render (a correction).
            assert fast_builds <= 2, (action, budget, fast_builds)


def test_a_sum_that_disagrees_switches_the_tokenizer_to_whole_counts(monkeypatch):
    editor = ContextEditor("ecommerce", "memory://", model="gpt-4")
    editor.ingest("s", long_travel_conversation(10))
    counter = segment_counter("gpt-4")
    monkeypatch.setattr(counter, "piece", lambda text: len(text))  # a wrong count for every piece
    monkeypatch.setattr(counter, "additive", True)
    monkeypatch.setattr(counter, "proven", False)  # cl100k's pattern is proven: only an unproven sum is confirmed whole
    ctx = editor.render("s", "place_order", budget=400)
    assert not counter.additive
    assert ctx.tokens == tokenizer_for("gpt-4").count(ctx.xml) <= 400


def test_renders_as_messages_arrive_equal_renders_from_scratch():
    """What renders remember (zone lines per view, turns, state views, piece counts) never shows:
    a render after each new message equals a render by a fresh editor reading the same store."""
    conv = long_travel_conversation(70)
    warm = ContextEditor("travel", "memory://", retrieval=True)
    warm.ingest("s", conv[:90])
    for i, message in enumerate(conv[90:], 90):
        warm.add("s", message)
        if i % 9 == 0:
            for action in warm.domain.actions:
                for budget in (450, 900):
                    cold = ContextEditor("travel", warm.store, retrieval=True)
                    assert warm.render("s", action, budget=budget).xml == cold.render("s", action, budget=budget).xml


def test_a_turn_remembered_before_a_pii_value_was_known_is_protected_after(tmp_path):
    """The renderer remembers each turn's masked text per what is hidden; a `pii:` value learned
    later must change what an earlier turn shows (the remembered text is not reused)."""
    from test_pii import POLICY_DOMAIN, TS

    from context_editor import load_domain
    from context_editor.inject import pii

    path = tmp_path / "pay.yaml"
    path.write_text(POLICY_DOMAIN, encoding="utf-8")
    editor = ContextEditor(load_domain(path), "memory://")
    editor.ingest("s", [{"role": "user", "content": "订单ORDER-2024-001, member VIP-778899", "timestamp": TS}])
    assert "VIP-778899" in editor.render("s", "track").xml  # not known as personal yet
    editor.ingest("s", [{"role": "tool", "content": '{"member_id": "VIP-778899", "status": "ok"}', "timestamp": TS}])
    xml = editor.render("s", "track").xml
    assert "VIP-778899" not in xml and pii.protect("hash", "VIP-778899", "member_id") in xml


def test_templates_that_post_process_output_are_told_apart_without_or_with_a_parse():
    from jinja2 import DictLoader, Environment

    from context_editor.inject.render import _post_processes

    env = Environment(loader=DictLoader({
        "base": "<a>{% block b %}{% if x %}{{ x }}{% endif %}{% endblock %}</a>",
        "plain": '{% extends "base" %}{% block b %}{% for i in y %}{{ i }}{% endfor %}{% endblock %}',
        "filtered": "{% filter upper %}{{ x }}{% endfilter %}",
        "child_of_filtered": "{% extends 'filtered' %}",
        "hidden_macro": '{{ "{% if" }}{% macro m() %}x{% endmacro %}{{ m() }}',
        "captured": "{% set out %}{{ x }}{% endset %}{{ out | upper }}",
        "computed": "{% extends name %}",
    }))
    assert not _post_processes(env, "plain")  # only plain statements: the fast path
    assert _post_processes(env, "filtered") and _post_processes(env, "child_of_filtered")
    assert _post_processes(env, "hidden_macro") and _post_processes(env, "captured") and _post_processes(env, "computed")
