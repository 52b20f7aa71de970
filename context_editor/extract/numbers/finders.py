"""Finders: money, percents, durations and people counts, each a number seen with its unit.

Each finder scans the numbers of the grammar and reads the words around them (currency
markers, bound and budget cues, units); every word list comes from the lexicons, compiled once
per vocabulary by `_patterns`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Iterable

from .grammar import CN_DIGITS, NumberMatch, leftmost_longest, normalize_width, parse_number, scan, tidy, to_decimal
from .lexicon import FLAGS, Vocabulary, alt, vocabulary, words_pattern


@dataclass(frozen=True, slots=True)
class MoneyMatch:
    start: int
    end: int
    text: str
    amount: int | float
    currency: str | None
    bound: str | None


@dataclass(frozen=True, slots=True)
class PercentMatch:
    start: int
    end: int
    text: str
    value: float


@dataclass(frozen=True, slots=True)
class DurationMatch:
    start: int
    end: int
    text: str
    value: int | float
    unit: str


@dataclass(frozen=True, slots=True)
class CountMatch:
    start: int
    end: int
    text: str
    value: int
    unit: str


# --------------------------------------------------------------------------- patterns from the lexicons


@dataclass(frozen=True)
class _Patterns:
    """The finders' regexes for one vocabulary (rebuilt only when the lexicons change)."""

    vocab: Vocabulary
    non_money_unit: re.Pattern[str]  # a unit after a number that makes it something other than money
    money_left: re.Pattern[str]
    money_right: re.Pattern[str]
    range_join: re.Pattern[str]  # between two amounts, with the currency markers either side may carry
    bare_range: re.Pattern[str]  # between two plain numbers
    between: re.Pattern[str]
    unit_of: dict[str, str]  # duration word -> unit
    duration_after: re.Pattern[str]
    word_duration: re.Pattern[str]
    kind_of: dict[str, str]  # people word -> adult / child / people
    count_right: re.Pattern[str]
    count_cue: re.Pattern[str]  # a word without which a text holds no count (see find_people_counts)


def _money_patterns(v: Vocabulary) -> dict[str, re.Pattern[str]]:
    prefix_markers = (*v.currency_prefix, *v.currency_codes)
    prefix_cur = rf"(?<![a-z]){alt(prefix_markers)}"
    suffix_cur = rf"{alt(v.currency_of)}(?![a-z])"
    fill = rf"(?:\s*{alt(v.filler)}(?![a-z]))*\s*"
    left_words = (*v.budget, *v.bound_before["max"], *v.bound_before["min"], *prefix_markers)
    return {
        "money_left": re.compile(
            # The lookahead lets the backwards-anchored search skip positions where no cue can begin.
            rf"(?=[{re.escape(''.join({w[0] for w in left_words}))}]|\s*$)"
            rf"(?:(?P<budget>{words_pattern(v.budget)}){fill})?"
            rf"(?:(?:(?P<max>{words_pattern(v.bound_before['max'])})|(?P<min>{words_pattern(v.bound_before['min'])})){fill})?"
            rf"(?P<cur>{prefix_cur})?\s*$",
            FLAGS,
        ),
        "money_right": re.compile(
            rf"\s*(?P<cur>{suffix_cur})?"
            rf"(?:\s*(?:(?P<max>{alt(v.bound_after['max'])})|(?P<min>{alt(v.bound_after['min'])}))(?![a-z]))?",
            FLAGS,
        ),
        "range_join": re.compile(
            rf"\s*(?P<cur>{suffix_cur})?\s*(?P<join>{words_pattern(v.range)})\s*(?P<cur2>{prefix_cur})?\s*",
            FLAGS,
        ),
        "bare_range": re.compile(rf"\s*{words_pattern(v.range)}\s*", FLAGS),
        "between": re.compile(rf"(?<![a-z])between\s*(?:{prefix_cur})?\s*$", FLAGS),
    }


def _duration_patterns(unit_of: dict[str, str]) -> dict[str, re.Pattern[str]]:
    unit = rf"(?P<unit>(?<=个)月|(?<=个半)月|{alt(w for w in unit_of if w != '月')})(?![a-z级代纪])"
    return {
        "duration_after": re.compile(
            rf"(?:\s*-\s*|\s*)(?P<pre>个\s*半|个)?\s*{unit}(?P<post>半|\s+and\s+a\s+half(?![a-z]))?",
            FLAGS,
        ),
        "word_duration": re.compile(
            rf"(?<![0-9{CN_DIGITS}个])(?P<cnhalf>半)\s*(?:个\s*)?{unit}"
            rf"|(?<![a-z])(?P<enhalf>half\s+)?an?\s+(?P<enunit>{alt(w for w in unit_of if w.isascii())})(?![a-z])"
            r"(?P<plus>\s+and\s+a\s+half(?![a-z]))?",
            FLAGS,
        ),
    }


@functools.lru_cache(maxsize=2)
def _compile(v: Vocabulary) -> _Patterns:
    all_units = [w for ws in (*v.duration.values(), *v.people.values(), v.measure) for w in ws]
    unit_of = {w.lower(): unit for unit, ws in v.duration.items() for w in ws} | {"月": "month"}
    kind_of = {w.lower(): kind for kind, ws in v.people.items() for w in ws}
    count_right = re.compile(
        rf"\s*(?P<mw>个|位(?![数置于子])|名(?![字单额次])|口(?!人))?\s*"
        rf"(?P<who>{alt(w for w in kind_of if not w.isascii())}(?![民间份次气生家])"
        rf"|{words_pattern(w for w in kind_of if w.isascii())})?",
        FLAGS,
    )
    return _Patterns(
        vocab=v,
        # A listed unit, or any Latin letters glued to the number (128GB, 5kg).
        non_money_unit=re.compile(rf"\s*(?:{alt(all_units)}(?![a-z])|月)|(?=[a-z])", FLAGS),
        unit_of=unit_of,
        kind_of=kind_of,
        count_right=count_right,
        # What `_count_part` and `_big_small` need to see: a people word or one of the measure words.
        count_cue=re.compile(rf"[个位名口俩大]|{alt(w for w in kind_of if not w.isascii())}"
                             rf"|{words_pattern(w for w in kind_of if w.isascii())}", FLAGS),
        **_money_patterns(v),
        **_duration_patterns(unit_of),
    )


def _patterns() -> _Patterns:
    return _compile(vocabulary())


# --------------------------------------------------------------------------- money

_CONTEXT = 32  # characters of left context a cue may occupy


@dataclass(frozen=True, slots=True)
class _Cues:
    """Money cues around one amount: where they extend its span and what they say."""

    start: int
    end: int
    currency: str | None
    bound: str | None
    budget: bool


def _group_span(m: re.Match[str], names: Iterable[str], default: tuple[int, int]) -> tuple[int, int]:
    """Outer span of the named groups that took part in the match, or ``default``."""
    spans = [m.span(n) for n in names if m.group(n) is not None]
    return (min(s for s, _ in spans), max(e for _, e in spans)) if spans else default


def _bound_of(*matches: re.Match[str]) -> str | None:
    return next((b for m in matches for b in ("max", "min") if m.group(b) is not None), None)


def _currency_of(marker: str | None) -> str | None:
    return _patterns().vocab.currency_of[marker.lower()] if marker else None


def _money_cues(norm: str, num: NumberMatch, lo: int, hi: int) -> _Cues:
    """Read prefix (budget, bound, currency) and suffix (currency, bound) cues around ``num``."""
    left = _patterns().money_left.search(norm, max(lo, num.start - _CONTEXT), num.start)
    right = _patterns().money_right.match(norm, num.end, hi)
    assert left is not None and right is not None  # both patterns can match the empty string
    start, _ = _group_span(left, ("max", "min", "cur"), (num.start, num.start))
    _, end = _group_span(right, ("cur", "max", "min"), (num.end, num.end))
    return _Cues(
        start=start,
        end=end,
        currency=_currency_of(left["cur"] or right["cur"]),
        bound=_bound_of(left, right),
        budget=left["budget"] is not None,
    )


def _is_unit_bound(norm: str, num: NumberMatch) -> bool:
    """``3天``, ``5 people``, ``3%``: the amount counts something other than money."""
    return _patterns().non_money_unit.match(norm, num.end) is not None


def _money(text: str, start: int, end: int, amount: int | float, currency: str | None, bound: str | None) -> MoneyMatch:
    return MoneyMatch(start, end, text[start:end], amount, currency, bound)


def _single_money(text: str, norm: str, num: NumberMatch, lo: int, hi: int) -> MoneyMatch | None:
    cues = _money_cues(norm, num, lo, hi)
    if cues.currency is None and (not (cues.bound or cues.budget) or _is_unit_bound(norm, num)):
        return None
    return _money(text, cues.start, cues.end, num.value, cues.currency, cues.bound)


def _range_money(
    text: str, norm: str, a: NumberMatch, b: NumberMatch, lo: int, hi: int
) -> tuple[MoneyMatch, MoneyMatch] | None:
    """``2000到3000元``, ``$200-$300``, ``between 200 and 300 dollars``: lower is min, upper max."""
    join = _patterns().range_join.fullmatch(norm, a.end, b.start)
    if join is None:
        return None
    if join["join"].lower() == "and" and not _patterns().between.search(norm, max(lo, a.start - _CONTEXT), a.start):
        return None
    left, right = _money_cues(norm, a, lo, a.end), _money_cues(norm, b, b.start, hi)
    currency = left.currency or _currency_of(join["cur"] or join["cur2"]) or right.currency
    if currency is None and (not (left.budget or left.bound or right.bound) or _is_unit_bound(norm, b)):
        return None
    a_end = join.end("cur") if join["cur"] else a.end
    b_start = join.start("cur2") if join["cur2"] else b.start
    a_bound, b_bound = ("min", "max") if a.value <= b.value else ("max", "min")
    return (
        _money(text, left.start, a_end, a.value, currency, a_bound),
        _money(text, b_start, right.end, b.value, currency, b_bound),
    )


def joins_range(text: str, a: NumberMatch, b: NumberMatch) -> bool:
    """Only a range word (``到``, ``-``, ``to``…) stands between the numbers ``a`` and ``b``."""
    return _patterns().bare_range.fullmatch(normalize_width(text), a.end, b.start) is not None


def find_money(text: str) -> list[MoneyMatch]:
    """Amounts with a currency marker, or with an adjacent bound or budget cue."""
    norm = normalize_width(text)
    nums = scan(text, norm)
    starts = [n.start for n in nums[1:]] + [len(norm)] * 2  # where the number after nums[i] begins
    found: list[MoneyMatch] = []
    i = 0
    while i < len(nums):
        lo = found[-1].end if found else 0
        pair = _range_money(text, norm, nums[i], nums[i + 1], lo, starts[i + 1]) if i + 1 < len(nums) else None
        if pair:
            found.extend(pair)
            i += 2
            continue
        single = _single_money(text, norm, nums[i], lo, starts[i])
        if single:
            found.append(single)
        i += 1
    return found


# --------------------------------------------------------------------------- percents

_PERCENT_AFTER = re.compile(r"\s*(?:%|(?<![a-z])(?:percent|per\s+cent|pct)(?![a-z])|个?百分点|个点)", FLAGS)
_PERCENT_BEFORE = re.compile(r"百分之\s*$")


def find_percents(text: str) -> list[PercentMatch]:
    """``3%``, ``3％``, ``百分之三``, ``3 percent``, ``三个点``, ``2个百分点``: value in percent."""
    norm = normalize_width(text)
    found: list[PercentMatch] = []
    for num in scan(text, norm):
        before = _PERCENT_BEFORE.search(norm, max(0, num.start - 8), num.start)
        after = _PERCENT_AFTER.match(norm, num.end)
        if before or after:
            start = before.start() if before else num.start
            end = after.end() if after else num.end
            if found and start < found[-1].end:
                continue  # "百分之0百分之0": the number "0百" ran into the next cue; spans never overlap
            found.append(PercentMatch(start, end, text[start:end], float(num.value)))
    return found


# --------------------------------------------------------------------------- durations

_FREQUENCY_BEFORE = re.compile(r"(?<![a-z])(?:once|twice|thrice|times|per)\s*$", FLAGS)
_SMALLER_UNIT = {
    "year": ("month", 12),
    "month": ("day", 30),
    "week": ("day", 7),
    "day": ("hour", 24),
    "hour": ("minute", 60),
}
_MINUTES_IN = {"minute": 1, "hour": 60, "day": 60 * 24, "week": 60 * 24 * 7, "month": 60 * 24 * 30}
_MINUTES_IN["year"] = 12 * _MINUTES_IN["month"]


def _settle(value: Decimal, unit: str) -> tuple[int | float, str]:
    """Express a fractional value one unit down when that makes it whole (1.5 year -> 18 month)."""
    tidied = tidy(value)
    if isinstance(tidied, int) or unit not in _SMALLER_UNIT:
        return tidied, unit  # type: ignore[return-value]
    smaller, factor = _SMALLER_UNIT[unit]
    scaled = tidy(value * factor)
    return (scaled, smaller) if isinstance(scaled, int) else (tidied, unit)  # type: ignore[return-value]


def _duration(text: str, start: int, end: int, value: Decimal, unit_word: str) -> DurationMatch:
    settled, unit = _settle(value, _patterns().unit_of[unit_word.lower()])
    return DurationMatch(start, end, text[start:end], settled, unit)


def _numeric_durations(text: str, norm: str) -> Iterable[DurationMatch]:
    """A number followed by a unit: ``5日游``, ``18个月``, ``一个半小时``, ``two and a half hours``."""
    for num in scan(text, norm):
        m = _patterns().duration_after.match(norm, num.end)
        if m:
            half = Decimal("0.5") if "半" in (m["pre"] or "") or m["post"] else 0
            yield _duration(text, num.start, m.end(), to_decimal(num.value) + half, m["unit"])


def _word_durations(text: str, norm: str) -> Iterable[DurationMatch]:
    """Durations without digits: ``半年``, ``半个小时``, ``a week``, ``half an hour``, ``an hour and a half``."""
    for m in _patterns().word_duration.finditer(norm):
        if m["cnhalf"]:
            yield _duration(text, m.start(), m.end(), Decimal("0.5"), m["unit"])
        elif not _FREQUENCY_BEFORE.search(norm, max(0, m.start() - 12), m.start()):
            value = Decimal("0.5") if m["enhalf"] else Decimal(1)
            yield _duration(text, m.start(), m.end(), value + (Decimal("0.5") if m["plus"] else 0), m["enunit"])


def find_durations(text: str) -> list[DurationMatch]:
    """Lengths of time in minutes, hours, days, weeks, months or years."""
    norm = normalize_width(text)
    return leftmost_longest([*_numeric_durations(text, norm), *_word_durations(text, norm)])


def duration_in(match: DurationMatch, unit: str) -> float:
    """``match`` expressed in ``unit`` (year = 12 months, month = 30 days, week = 7 days, day = 24 h)."""
    if unit not in _MINUTES_IN:
        raise ValueError(f"unknown duration unit {unit!r}; expected one of {sorted(_MINUTES_IN)}")
    return float(match.value) * _MINUTES_IN[match.unit] / _MINUTES_IN[unit]


# --------------------------------------------------------------------------- people counts

_COUNT_LEFT = re.compile(r"(?:(?P<pron>我们|咱们|他们|她们|你们|我|咱|你|他|她)|(?P<family>一?家)|(?P<ordinal>第))\s*$")
_BIG_SMALL = re.compile(r"(?P<a>[0-9]{1,2}|[一二两三四五六七八九十])大(?P<c>[0-9]{1,2}|[一二两三四五六七八九十])小(?:孩|朋友)?")
_COUNT_JOIN = re.compile(r"\s*(?:(?<![a-z])(?:and|with|plus)(?![a-z])|[&+,，、和加带跟])?\s*", FLAGS)


def _count_part(text: str, norm: str, num: NumberMatch, patterns: _Patterns) -> CountMatch | None:
    """One number with a people word, measure word or pronoun (``3位``, ``我们三个``, ``一家三口``)."""
    if not isinstance(num.value, int) or num.value <= 0:
        return None
    left = _COUNT_LEFT.search(norm, max(0, num.start - 4), num.start)
    if left and left["ordinal"]:
        return None
    m = patterns.count_right.match(norm, num.end)
    assert m is not None  # every part of the pattern is optional
    mw, who = m["mw"], m["who"]
    pron, family = bool(left and left["pron"]), bool(left and left["family"])
    if who:
        kind = patterns.kind_of[re.sub(r"\s+", " ", who.lower())]
    elif mw in ("位", "名") or (mw == "口" and family) or (pron and (mw == "个" or num.text == "俩")):
        if mw == "个" and patterns.non_money_unit.match(norm, m.end()):
            return None  # 我们三个月: the 个 belongs to a unit
        kind = "people"
    else:
        return None
    start = left.start() if left and (pron or family) else num.start
    end = m.end("who") if who else m.end("mw") if mw else num.end
    return CountMatch(start, end, text[start:end], num.value, kind)


def _merge_parts(text: str, norm: str, parts: list[CountMatch]) -> list[CountMatch]:
    """Sum adjacent adult/child parts joined by and / 和 / , (``2 adults and 1 child`` -> 3)."""
    merged: list[CountMatch] = []
    for part in parts:
        prev = merged[-1] if merged else None
        if (
            prev is not None
            and {prev.unit, part.unit} <= {"adult", "child"}
            and _COUNT_JOIN.fullmatch(norm, prev.end, part.start)
        ):
            unit = prev.unit if prev.unit == part.unit else "people"
            merged[-1] = CountMatch(prev.start, part.end, text[prev.start : part.end], prev.value + part.value, unit)
        else:
            merged.append(part)
    return merged


def _big_small(text: str, norm: str) -> Iterable[CountMatch]:
    """``两大一小``: adults plus children, a common Chinese travel shorthand."""
    for m in _BIG_SMALL.finditer(norm):
        adults, children = parse_number(m["a"]), parse_number(m["c"])
        if isinstance(adults, int) and isinstance(children, int):
            yield CountMatch(m.start(), m.end(), text[m.start() : m.end()], adults + children, "people")


_SOLO = re.compile(
    r"(?<![a-z])(?:(?:just|only)\s+(?:me|myself)|by\s+myself|on\s+my\s+own|(?:travel(?:l?ing)?|go(?:ing)?|fly(?:ing)?)\s+(?:alone|solo))(?![a-z])",
    FLAGS,
)


def _solo(text: str, norm: str) -> Iterable[CountMatch]:
    """``just me``, ``by myself``, ``travelling alone``: one person said without a number."""
    for m in _SOLO.finditer(norm):
        yield CountMatch(m.start(), m.end(), text[m.start() : m.end()], 1, "people")


def find_people_counts(text: str) -> list[CountMatch]:
    """How many people: ``两个人``, ``3位``, ``4 people``, ``two adults``, ``我们三个``, ``一家三口``, ``just me``."""
    norm = normalize_width(text)
    if not _patterns().count_cue.search(norm):
        return list(_solo(text, norm))  # no people or measure word: reading every number would find nothing
    return _people_counts(text, norm)


def _people_counts(text: str, norm: str) -> list[CountMatch]:
    patterns = _patterns()
    parts = leftmost_longest(p for num in scan(text, norm) if (p := _count_part(text, norm, num, patterns)))
    return leftmost_longest([*_big_small(text, norm), *_solo(text, norm), *_merge_parts(text, norm, parts)])
