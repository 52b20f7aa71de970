"""Safe expressions from domain files (guards and business rules).

Domain files are data, never code: expressions are compiled by Jinja2's SandboxedEnvironment,
which forbids attribute tricks and imports, and evaluated against a dict of field values plus
a few pure helpers. `None` of an unset field propagates: a rule that reads an unset field is
not evaluated (there is nothing to check yet).

Every evaluation also has a budget, so one expression cannot stall a worker or exhaust memory:
at most MAX_OPERATIONS arithmetic operations and calls, integers of at most MAX_INT_BITS bits
and strings or lists of at most MAX_LENGTH items. `7 ** (10**9)`, `'x' * 10**9` and
`'{0:>2000000000}'.format(1)` are refused before they are computed (ExpressionBudgetError).
Intercepting the operators also keeps Jinja from folding such constants at compile time.
"""

from __future__ import annotations

import math
import operator
import re
from contextvars import ContextVar
from datetime import date, datetime
from functools import lru_cache
from typing import Any, Callable, cast

from jinja2 import TemplateSyntaxError, meta
from jinja2.environment import TemplateExpression
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

MAX_OPERATIONS = 10_000
MAX_INT_BITS = 4_096
MAX_LENGTH = 100_000


class ExpressionBudgetError(SecurityError):
    """An expression would exceed its evaluation budget."""


def _as_date(v: Any) -> date:
    if isinstance(v, datetime):
        return v.date()
    if isinstance(v, date):
        return v
    return datetime.fromisoformat(str(v)).date()


def days_between(a: Any, b: Any) -> int:
    """Whole days from `a` to `b` (negative if `b` is earlier)."""
    return (_as_date(b) - _as_date(a)).days


def amount(money: Any) -> float | None:
    """The number inside a money value (or the value itself if it is a number)."""
    value = money.get("amount") if isinstance(money, dict) else money
    return cast("float | None", value)


HELPERS: dict[str, Callable[..., Any]] = {
    "days_between": days_between,
    "amount": amount,
    "len": len,
    "min": min,
    "max": max,
    "abs": abs,
}

_operations: ContextVar[int] = ContextVar("expression_operations", default=0)
_FORMAT_NUMBER = re.compile(r"\d+")
_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "**": operator.pow}
# Filters whose output size is set by an argument (center(10**9), format, indent, wordwrap):
# expressions compare values, they never need to lay out text.
_UNBOUNDED_FILTERS = ("center", "format", "indent", "wordwrap", "pprint", "urlize", "xmlattr", "filesizeformat")


def _refuse(what: str) -> ExpressionBudgetError:
    return ExpressionBudgetError(f"expression exceeds its evaluation budget: {what}")


def _bits(value: Any) -> int:
    return abs(value).bit_length() if isinstance(value, int) else 0


def _sized(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else 0


def _check_format(text: str) -> None:
    """A format string may not ask for a field wider (or more precise) than MAX_LENGTH."""
    if any(int(n) > MAX_LENGTH for n in _FORMAT_NUMBER.findall(text)):
        raise _refuse(f"a format width or precision above {MAX_LENGTH:,}")


class BudgetedEnvironment(SandboxedEnvironment):
    """The sandbox with arithmetic, sizes and calls counted and bounded per evaluation."""

    intercepted_binops = frozenset(_BINOPS)

    def __init__(self) -> None:
        super().__init__()
        for name in _UNBOUNDED_FILTERS:
            self.filters.pop(name, None)

    @staticmethod
    def _spend() -> None:
        n = _operations.get() + 1
        if n > MAX_OPERATIONS:
            raise _refuse(f"more than {MAX_OPERATIONS:,} operations")
        _operations.set(n)

    def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
        self._spend()
        if op == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0:
            if right * math.log2(abs(left)) > MAX_INT_BITS:
                raise _refuse(f"an integer above {MAX_INT_BITS:,} bits")
        elif op == "*":
            sized, count = (left, right) if _sized(left) else (right, left)
            if isinstance(count, int) and _sized(sized) and _sized(sized) * count > MAX_LENGTH:
                raise _refuse(f"a string or list longer than {MAX_LENGTH:,}")
            if _bits(left) + _bits(right) > MAX_INT_BITS:
                raise _refuse(f"an integer above {MAX_INT_BITS:,} bits")
        elif op == "%" and isinstance(left, str):
            _check_format(left)
        result = _BINOPS[op](left, right)
        if _bits(result) > MAX_INT_BITS or _sized(result) > MAX_LENGTH:
            raise _refuse(f"a value above {MAX_INT_BITS:,} bits or {MAX_LENGTH:,} items")
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """The sandbox wraps str.format / format_map at attribute access; check the format string there."""
        wrapped = super().wrap_str_format(value)
        if wrapped is not None:
            _check_format(value.__self__)
        return wrapped

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - Jinja's signature
        __self._spend()
        if isinstance(getattr(__obj, "__self__", None), str):
            if any(isinstance(a, int) and a > MAX_LENGTH for a in (*args, *kwargs.values())):
                raise _refuse(f"a string method asked for more than {MAX_LENGTH:,} characters")
        result = super().call(__context, __obj, *args, **kwargs)
        if _bits(result) > MAX_INT_BITS or _sized(result) > MAX_LENGTH:
            raise _refuse(f"a value above {MAX_INT_BITS:,} bits or {MAX_LENGTH:,} items")
        return result


_env = BudgetedEnvironment()


@lru_cache(maxsize=1024)
def compile_expression(source: str) -> TemplateExpression:
    """Compile once; raises TemplateSyntaxError with a readable message on bad syntax."""
    return _env.compile_expression(source, undefined_to_none=True)


def expression_names(source: str) -> set[str]:
    """The free variable names an expression reads (for lint: every one must be a field)."""
    ast = _env.parse("{{ " + source + " }}")
    return set(meta.find_undeclared_variables(ast)) - set(HELPERS) - {"today", "true", "false", "none"}


def evaluate(source: str, values: dict[str, Any], today: date | None = None) -> Any:
    """Evaluate with field values and helpers. Raises on sandbox violations, never executes code."""
    ctx = {**HELPERS, **values}
    if today is not None:
        ctx["today"] = today.isoformat()
    token = _operations.set(0)
    try:
        return compile_expression(source)(**ctx)
    finally:
        _operations.reset(token)


def budget_problem(source: str) -> str | None:
    """For lint: evaluate the expression once with every field unset and say whether it broke
    its budget (other errors are expected: unset fields are None)."""
    try:
        evaluate(source, {}, date(2000, 1, 1))
    except ExpressionBudgetError as exc:
        return str(exc)
    except Exception:  # noqa: BLE001 - None operands and the like; only the budget matters here
        return None
    return None


__all__ = ["compile_expression", "evaluate", "expression_names", "budget_problem", "ExpressionBudgetError",
           "TemplateSyntaxError", "HELPERS"]
