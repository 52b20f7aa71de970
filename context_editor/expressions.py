"""Safe expressions from domain files (guards and business rules).

Domain files are data, never code: expressions are compiled by Jinja2's SandboxedEnvironment,
which forbids attribute tricks and imports, and evaluated against a dict of field values plus
a few pure helpers. `None` of an unset field propagates: a rule that reads an unset field is
not evaluated (there is nothing to check yet).
"""

from __future__ import annotations

from datetime import date, datetime
from functools import lru_cache
from typing import Any, Callable, cast

from jinja2 import TemplateSyntaxError, meta
from jinja2.environment import TemplateExpression
from jinja2.sandbox import SandboxedEnvironment


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

_env = SandboxedEnvironment()


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
    return compile_expression(source)(**ctx)


__all__ = ["compile_expression", "evaluate", "expression_names", "TemplateSyntaxError", "HELPERS"]
