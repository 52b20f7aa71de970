"""Turn the text a rule matched into a typed, normalised value, with the exact span it came from.

The parser is the rule's `parse` or, by default, the field's type. A rule's value group may be
the value itself ("2000") or a stretch of text next to a cue ("下周五从上海" before "出发"):
the typed finders (numbers.py, dates.py) then pick the value out of it, and `nearest` says which
one when there are several — the first when the cue comes before the group, the last when the
group opens the match and its cue follows, i.e. the value nearest the cue. A parser that finds nothing returns None: the
candidate is dropped rather than guessed (no invented facts).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from ..domain import FieldSpec
from .dates import find_dates, find_times
from .numbers import (duration_in, find_durations, find_money, find_numbers, find_people_counts, find_percents,
                      joins_range, parse_number)


@dataclass(frozen=True, slots=True)
class Parsed:
    """A typed value and where in the parsed text it was read (start, end)."""

    value: Any
    start: int
    end: int


def _pick(found: Sequence[Any], nearest: str) -> Any:
    if not found:
        return None
    return found[0] if nearest == "first" else found[-1]


def _whole(text: str, value: Any) -> Parsed:
    """`value` read from all of `text` bar surrounding whitespace."""
    start = len(text) - len(text.lstrip())
    return Parsed(value, start, start + len(text.strip()))


def _number(text: str, nearest: str) -> Parsed | None:
    v = parse_number(text.strip())
    if v is not None:
        return _whole(text, v)
    m = _pick(find_numbers(text), nearest)
    return Parsed(m.value, m.start, m.end) if m else None


def _money(text: str, default_currency: str, nearest: str) -> Parsed | None:
    """An amount with its currency; of a range ("1000-2000元", "1000到2000") the upper bound, the
    budget's ceiling. Bare numbers are money here because the rule's cue ("预算") said so."""
    found = find_money(text)
    if found:
        maxima = [m for m in found if m.bound == "max"]
        m = _pick(maxima, nearest) if len(found) > 1 and maxima else _pick(found, nearest)
        return Parsed({"amount": m.amount, "currency": m.currency or default_currency}, m.start, m.end)
    nums = find_numbers(text)
    if len(nums) == 2 and joins_range(text, nums[0], nums[1]):
        return Parsed({"amount": nums[1].value, "currency": default_currency}, nums[1].start, nums[1].end)
    n = _number(text, nearest)
    return Parsed({"amount": n.value, "currency": default_currency}, n.start, n.end) if n else None


def _duration(text: str, unit: str, now: datetime, nearest: str) -> Parsed | None:
    """A length of time in `unit`; "三天后" / "in 3 days" are dates, not durations, and are skipped."""
    dates = [(d.start, d.end) for d in find_dates(text, now)] if now else []
    found = [d for d in find_durations(text) if not any(s < d.end and d.start < e for s, e in dates)]
    m = _pick(found, nearest)
    if m is None:
        return None
    v = duration_in(m, unit)
    return Parsed(int(v) if float(v).is_integer() else v, m.start, m.end)


def _date(text: str, now: datetime, grain: str, nearest: str, prefer: str = "future") -> Parsed | None:
    """A date (or date-time); a clock time alone ("下午2点起飞") names no day, so no date."""
    m = _pick([d for d in find_dates(text, now, prefer) if d.day_said or grain == "datetime"], nearest)
    if m is None:
        return None
    v = m.value.date() if grain == "date" and isinstance(m.value, datetime) else m.value
    return Parsed(v.isoformat(), m.start, m.end)


def _time(text: str, nearest: str, answer: bool) -> Parsed | None:
    """A time of day as HH:MM; a weak one ("at 8", "8") only when the text answers a question about it."""
    m = _pick(find_times(text, answer), nearest)
    return Parsed(m.value, m.start, m.end) if m else None


# Parsers that read a quantity, date or time: none finds one in text without a letter, digit or
# ideograph. Any other parser keeps the text as written.
TYPED_PARSERS = frozenset({"money", "number", "float", "int", "percent", "count", "duration", "date", "datetime", "time"})


def parse_value(parser: str, text: str, spec: FieldSpec, now: datetime, default_currency: str,
                nearest: str = "first", answer: bool = False) -> Parsed | None:
    """Parse `text` with `parser` for field `spec`; None when it does not hold such a value.
    `answer`: the text answers the assistant's question about this field, so weaker forms count."""
    if parser == "money":
        return _money(text, default_currency, nearest)
    if parser in ("number", "float", "int"):
        n = _number(text, nearest)
        if n is None:
            return None
        if parser == "int" or spec.type == "int":
            return n if float(n.value).is_integer() else None
        return Parsed(float(n.value), n.start, n.end) if spec.type == "float" else n
    if parser == "percent":
        m = _pick(find_percents(text), nearest)
        return Parsed(m.value, m.start, m.end) if m else None
    if parser == "count":
        m = _pick(find_people_counts(text), nearest)
        return Parsed(m.value, m.start, m.end) if m else None
    if parser == "duration":
        return _duration(text, spec.unit or "day", now, nearest)
    if parser in ("date", "datetime"):
        return _date(text, now, parser, nearest, spec.prefer)
    if parser == "time":
        return _time(text, nearest, answer)
    if parser == "upper":
        return _whole(text, text.strip().upper()) if text.strip() else None
    value = " ".join(text.split())  # text: whitespace-normalised, as written
    return _whole(text, value) if value else None


def default_parser(spec: FieldSpec) -> str:
    """The parser a field's type implies when its rule does not name one."""
    return {"money": "money", "int": "int", "float": "number", "percent": "percent", "duration": "duration",
            "date": "date", "datetime": "datetime", "time": "time"}.get(spec.type, "text")
