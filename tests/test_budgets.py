"""Bounded cost (issue 12): domain expressions have an evaluation budget, so one rule cannot
stall a worker or take gigabytes; lint refuses such a rule, quickly."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings, strategies as st

from context_editor.domain import lint_domain
from context_editor.expressions import ExpressionBudgetError, evaluate

BOMBS = ["7 ** (10**9)", "'x' * 10**9", "10**9 * 'x'", "'{0:>2000000000}'.format(1)", "'{x:>2000000000}'.format_map({'x': 1})",
         "'%2000000000d' % 1", "'x'.ljust(10**9)", "'ab'.center(10**9)", "2**4000 * 2**4000", "(2**4000) ** 2",
         "[1] * 10**8"]


@pytest.mark.parametrize("expr", BOMBS)
def test_expression_bombs_are_refused_quickly(expr):
    start = time.perf_counter()
    with pytest.raises(ExpressionBudgetError, match="evaluation budget"):
        evaluate(expr, {})
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize("expr,value", [
    ("days_between(a, b) >= 1", True), ("amount(m) * 2 > 5", True), ("2 ** 10 == 1024", True),
    ("'{0:>8}'.format(amount(m))", "       3"), ("'x' * 3", "xxx"), ("len(a) * 100", 1000)])
def test_ordinary_expressions_are_unaffected(expr, value):
    assert evaluate(expr, {"a": "2024-05-01", "b": "2024-05-03", "m": {"amount": 3}}) == value


def test_lint_refuses_an_expression_bomb(tmp_path):
    p = tmp_path / "d.yaml"
    p.write_text("domain: shop\nversion: 1\nfields:\n  n: {type: int}\nactions:\n  a: {fields: [n]}\n"
                 "rules:\n  - {id: big, check: 'n > 7 ** (10**9)', code: X}\n", encoding="utf-8")
    start = time.perf_counter()
    problems = lint_domain(p)[1]
    assert time.perf_counter() - start < 2.0
    (bomb,) = [pr for pr in problems if pr.is_error]
    assert (bomb.code, bomb.line) == ("CE117", 8) and "evaluation budget" in bomb.message


def test_a_backtracking_rule_is_refused_and_a_linear_one_passes():
    import re

    from context_editor.domain.regexcheck import superlinear_problem

    # Value before its cue, unanchored and unbounded: rescans the rest of a run from every position.
    assert "backtracks" in (superlinear_problem("t", re.compile(r"(?P<value>[a ]+)\s*dollars", re.I)) or "")
    assert superlinear_problem("t", re.compile(r"\bbudget\s{0,3}(?P<value>[0-9]{1,9})", re.I)) is None


@pytest.mark.parametrize("text,field", [("预算1e999999元", "budget_max"), ("budget is $1e309", "budget_max"),
                                        ("预算1e3元", "budget_max")])
def test_exponent_numbers_are_rejected_with_a_reason(text, field):
    from context_editor import ContextEditor

    state = ContextEditor("ecommerce", "memory://").ingest("s", [{"role": "user", "content": text}], now="2024-05-01T10:00:00")
    assert state.get(field) is None
    (entry,) = state.fields[field].history
    assert (entry.status, entry.reason) == ("rejected", "NUMBER_NOT_A_QUANTITY") and "e" in entry.value


def test_a_power_of_ten_is_no_people_count():
    from context_editor import ContextEditor

    state = ContextEditor("travel", "memory://").ingest("s", [{"role": "user", "content": "10^1000 people"}],
                                                       now="2024-05-01T10:00:00")
    assert state.get("travelers") is None
    assert [(h.value, h.reason) for h in state.fields["travelers"].history] == [("10^1000", "NUMBER_NOT_A_QUANTITY")]


def test_the_literal_prefilter_never_skips_a_rule_that_would_match():
    """A rule is skipped only when none of the strings every match contains is in the text: on
    real messages, whenever a rule matches, one of its literals is there."""
    from conftest import ROOT
    from context_editor.conversation import read_conversation
    from context_editor.domain.regexcheck import required_literals
    from context_editor.domain.rulepacks import load_rule_library

    texts = [m["content"] for path in sorted((ROOT / "domains" / "samples").glob("*.jsonl"))
             for m in read_conversation(str(path))]
    texts += ["I have $50,000 to invest for three years", "预算不超过三千元", "Returns around 4 percent a year",
              "我们一家三口下周五出发", "Budget is 2k USD, 2 adults", "要3件L码的", "ORDER-2024-001 到了吗"]
    checked = 0
    for rule in load_rule_library().values():
        literals = required_literals(rule.pattern)
        for text in texts:
            if literals is not None and rule.pattern.search(text):
                assert any(lit in text.casefold() for lit in literals), (rule.id, text, literals)
                checked += 1
    assert checked > 20


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["1", "三", "两", " ", "位", "个", "名", "口", "人", "大", "小", "people", "adults", "我们",
                                 "一家", "第", "月", ",", "，", "and", "just me", "元", "a", "2 kids"]), max_size=12))
def test_the_people_count_cue_check_never_hides_a_count(parts):
    """`find_people_counts` reads a text's numbers only when a people or measure word is in it;
    the shortcut must find exactly what reading every number finds."""
    from context_editor.extract.numbers.finders import _people_counts, find_people_counts
    from context_editor.extract.numbers.grammar import normalize_width

    text = "".join(parts)
    assert find_people_counts(text) == _people_counts(text, normalize_width(text))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["the first", " one", "the last one", "第二个", "option 2", "the 3rd one", "最后",
                                 " ", "a", "s", "!", "the", "second", "前者", "x"]), max_size=10))
def test_one_merged_ordinal_matcher_finds_what_one_matcher_per_number_finds(parts):
    from context_editor.extract.cues import _anywhere, load_cues
    from context_editor.lang import lexicon

    text = "".join(parts)
    best = None
    for n, words in sorted((int(k), v) for k, v in lexicon().table("dialogue/ordinals").items()):
        m = (p := _anywhere(words)) and p.search(text)
        if m and (best is None or m.start() < best[1]):
            best = (n, m.start(), m.end())
    assert load_cues().ordinal(text) == best
