"""Bounded cost (issue 12): domain expressions have an evaluation budget, so one rule cannot
stall a worker or take gigabytes; lint refuses such a rule, quickly."""

from __future__ import annotations

import time

import pytest

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
