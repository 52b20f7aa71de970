"""Turn the text a rule matched into a typed, normalised value.

The parser is the rule's `parse` or, by default, the field's type. A parser that finds nothing
returns None: the candidate is dropped rather than guessed (no invented facts).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..domain import FieldSpec
from .dates import find_dates
from .numbers import duration_in, find_durations, find_money, find_numbers, find_people_counts, find_percents, parse_number


def _number(text: str) -> int | float | None:
    v = parse_number(text.strip())
    if v is None:
        found = find_numbers(text)
        v = found[0].value if found else None
    return v


def _money(text: str, default_currency: str) -> dict | None:
    found = find_money(text)
    if found:
        m = found[-1] if len(found) > 1 and found[-1].bound == "max" else found[0]
        return {"amount": m.amount, "currency": m.currency or default_currency}
    v = _number(text)
    return {"amount": v, "currency": default_currency} if v is not None else None


def _duration(text: str, unit: str) -> int | float | None:
    found = find_durations(text)
    if not found:
        return None
    v = duration_in(found[0], unit)
    return int(v) if float(v).is_integer() else v


def parse_value(parser: str, text: str, spec: FieldSpec, now: datetime, default_currency: str) -> Any:
    """Parse `text` with `parser` for field `spec`; None when it does not hold such a value."""
    if parser == "money":
        return _money(text, default_currency)
    if parser in ("number", "float"):
        v = _number(text)
        return float(v) if v is not None and spec.type == "float" else v
    if parser == "int":
        v = _number(text)
        return int(v) if v is not None and float(v).is_integer() else None
    if parser == "percent":
        found = find_percents(text)
        return found[0].value if found else None
    if parser == "count":
        found = find_people_counts(text)
        return found[0].value if found else _number(text)
    if parser == "duration":
        return _duration(text, spec.unit or "day")
    if parser in ("date", "datetime"):
        found = find_dates(text, now)
        if not found:
            return None
        v = found[0].value
        if parser == "date" and isinstance(v, datetime):
            v = v.date()
        return v.isoformat()
    if parser == "upper":
        return text.strip().upper()
    return " ".join(text.split()) or None  # text: whitespace-normalised, as written


def default_parser(spec: FieldSpec) -> str:
    """The parser a field's type implies when its rule does not name one."""
    return {"money": "money", "int": "int", "float": "number", "percent": "percent", "duration": "duration",
            "date": "date", "datetime": "datetime"}.get(spec.type, "text")
