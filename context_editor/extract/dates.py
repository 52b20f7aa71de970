"""Bilingual (Chinese / English) dates and times, resolved against a caller-supplied ``now``.

Chosen over dateparser and Duckling by measurement (benchmarks/dates_compare.py): dateparser
misses most Chinese forms (下周五, 5月10号, 后天早上9点), Duckling reads 下周五 as this week's
Friday and misses 三天后, 月底, 2024/5/10; both need more than ten times the time.

Deterministic and pure: the clock is always the ``now`` argument (never the system
clock), nothing is fetched, and every match carries exact spans into the input
(``text[start:end] == match.text``).  Full-width digits and punctuation are read as
ASCII (``２０２４／５／１０``, ``９：３０``).

Recognised
----------
* Relative days: 今天 明天 后天 大后天 昨天 前天 大前天 今晚 明晚 今早 明早; today, tonight,
  tomorrow (tmr, tmrw), the day after tomorrow, yesterday, the day before yesterday.
* Weekdays: 周五 / 星期五 / 礼拜五 / 周日 / 周末, with 这 本 下 下下 上 (and 个);
  Friday / Fri, with this, coming, on, next, last; weekend.
* Calendar days: 2024年5月10日, 明年5月10号, 五月十日, 5月10, 下个月3号, 本月15日, 月底,
  5月底, 10号; 2024-05-10, 2024/5/10, 2024.5.10; 5/10/2024 and 5/10 (month first);
  May 10, May 10th, May 10, 2024, 10 May, 10th of May.
* Offsets: 三天后, 两周以后; in 3 days, in a week, 3 days from now, two weeks later.
* Clock times: 9点, 9点半, 9点一刻, 9点30分, 九点, 早上9点, 下午3点, 晚上8点半, 9:30, 下午3:30;
  9am, 3:30 pm, 9 a.m., 9 o'clock, noon, midnight, at 9 (only next to a day),
  9 in the evening.

Conventions
-----------
* A date alone has grain ``"day"`` and a ``date`` value; a date with a clock time (either
  order: ``明天早上9点``, ``tomorrow at 9am``, ``9am tomorrow``, ``3pm on Friday``) has grain
  ``"minute"`` and a ``datetime`` value carrying ``now.tzinfo``.
* Weeks start on Monday.  ``下周五`` / ``next Friday`` is the Friday of next calendar week;
  ``下下周五`` the week after; ``上周五`` / ``last Friday`` the Friday of last calendar week.
  ``周五`` / ``这周五`` / ``本周五`` / ``this Friday`` / ``on Friday`` is the coming Friday,
  today when today is Friday.  ``周末`` / ``weekend`` is that week's Saturday.
* A month and day without a year is this year's, or next year's if that date is already
  past (the first valid year, so 2月29日 finds a leap year).  ``10号`` is this month's 10th,
  or the next month that has a 10th still ahead.  An explicit year never rolls.
* ``5/10`` and ``5/10/2024`` are month/day (US order); a 2-digit year is 20xx.
* Clock hours are read on a 24-hour dial unless a period or am/pm says otherwise:
  下午 / 晚上 / 傍晚 / afternoon / evening / tonight / pm add 12 to hours before 12;
  中午 adds 12 to hours before 11; 12am / 凌晨12点 are 00:00; 晚上12点 is 00:00 of the next
  day.  A period word before the clock (``tomorrow evening at 8``) or implied by the day
  (``今晚8点``) applies when the clock has none of its own.
* A clock time with no day is its next occurrence: today if not yet past (to the
  minute), else tomorrow.  A bare Chinese-numeral hour (``两点``, ``一点``: also "two points",
  "a bit") and ``at 9`` are only read next to a day or with a period word.
* Digits glued to letters or joined by hyphens/slashes to more digits (``MU5101``,
  ``SKU2024-05-10``, ``2024-05-10-001``) are not dates; ``3号线`` is a line, not the 3rd.
* Impossible dates (``2月30日``, ``25点``) produce no match.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable

from ..lang import Lexicon, lexicon

from .numbers import (
    CN_CLOCK_MINUTE,
    NOT_A_DAY,
    SMALL_NUMERAL,
    alt,
    leftmost_longest,
    normalize_width,
    parse_number,
    words_pattern,
)

__all__ = ["DateMatch", "PREFER", "TimeMatch", "find_dates", "find_times"]


@dataclass(frozen=True, slots=True)
class DateMatch:
    start: int
    end: int
    text: str
    value: dt.date | dt.datetime
    grain: str
    day_said: bool = True  # False for a clock time alone ("下午2点"): its day is only implied


@dataclass(frozen=True, slots=True)
class _Day:
    """A resolved calendar day, plus the period some day words imply (今晚 -> evening)."""

    start: int
    end: int
    day: dt.date
    period: str | None = None


@dataclass(frozen=True, slots=True)
class _Clock:
    """A clock reading before period adjustment; ``strong`` ones may stand without a day."""

    start: int
    end: int
    hour: int
    minute: int
    period: str | None
    strong: bool


_FLAGS = re.IGNORECASE | re.ASCII

# --------------------------------------------------------------------------- vocabulary

@dataclass(frozen=True, eq=False)  # hashed by identity: one per lexicon, a cache key
class _DateWords:
    """The date words of the registered languages (`dates:` in the lexicons), as lookups."""

    day: dict[str, tuple[int, str | None]]  # 明天 / tomorrow -> (days from today, implied period)
    weekday: dict[str, int]  # lower-cased weekday name or abbreviation -> 0 (Monday) … 6
    weekday_names: tuple[str, ...]  # matched in any case
    weekday_abbreviations: tuple[str, ...]  # matched only as written ("Sat", never "sat")
    week_shift: dict[str, int | None]  # next / 下 -> weeks ahead; None: the coming one
    month: dict[str, int]  # lower-cased month name or abbreviation -> 1 … 12
    joiners: tuple[str, ...]  # between a day and its month ("10 of May", "10 de mayo")


# The Chinese weekday forms are grammar (周 / 星期 / 礼拜 + a numeral), not words of a list.
_ZH_WEEKDAY_OF = {**{c: i for i, c in enumerate("一二三四五六日")}, "天": 6, "末": 5}
_ZH_WEEK_SHIFT: dict[str, int | None] = {"这": None, "本": None, "下": 1, "下下": 2, "上": -1}


@lru_cache(maxsize=2)
def _date_words(lex: Lexicon) -> _DateWords:
    def offset(value: Any) -> tuple[int, str | None]:
        return (int(value[0]), str(value[1])) if isinstance(value, list) else (int(value), None)

    weekdays = lex.table("dates/weekdays")
    abbreviations = lex.table("dates/weekday_abbreviations")
    return _DateWords(
        day={_key(w): offset(v) for w, v in lex.get("dates/relative_days", {}).items()},
        weekday=_ZH_WEEKDAY_OF | {w.lower(): int(i) for table in (weekdays, abbreviations) for i, ws in table.items() for w in ws},
        weekday_names=tuple(w for ws in weekdays.values() for w in ws),
        weekday_abbreviations=tuple(w for ws in abbreviations.values() for w in ws),
        week_shift=_ZH_WEEK_SHIFT | {_key(w): (None if v is None else int(v)) for w, v in lex.get("dates/weekday_shift", {}).items()},
        month={w.lower(): int(i) for i, ws in lex.table("dates/months").items() for w in ws},
        joiners=tuple(lex.words("dates/day_month_joiners")),
    )


def _words() -> _DateWords:
    return _date_words(lexicon())


_MONTH_SHIFT = {"这个": 0, "本": 0, "下个": 1, "下": 1, "上个": -1, "上": -1}
_YEAR_SHIFT = {"今": 0, "明": 1, "后": 2, "去": -1, "前": -2}
_OFFSET_UNIT_DAYS = {"天": 1, "周": 7, "星期": 7, "礼拜": 7, "day": 1, "days": 1, "week": 7, "weeks": 7}
_PERIOD_OF = {
    **dict.fromkeys(("早上", "早晨", "清晨", "上午", "morning"), "morning"),
    "凌晨": "small hours",
    "中午": "noon",
    **dict.fromkeys(("下午", "afternoon"), "afternoon"),
    **dict.fromkeys(("傍晚", "晚上", "夜里", "夜间", "evening", "night", "tonight"), "evening"),
    "am": "am",
    "pm": "pm",
}
_CN_PERIODS = words_pattern(w for w in _PERIOD_OF if not w.isascii())
_EN_PERIODS = words_pattern(("morning", "afternoon", "evening", "night"))

# --------------------------------------------------------------------------- patterns

_NUM = SMALL_NUMERAL
_EN_COUNT = r"[0-9]{1,3}|an?|[a-z]+(?:-[a-z]+)?"


def _weekday_names(w: _DateWords) -> str:
    return (rf"(?:{words_pattern(w.weekday_names)}"
            rf"|(?-i:{alt(w.weekday_abbreviations)})\.?)(?![a-z])" if w.weekday_abbreviations else
            rf"(?:{words_pattern(w.weekday_names)})(?![a-z])")


def _month_names(w: _DateWords) -> str:
    return rf"{words_pattern(w.month)}\.?"


def _joined(w: _DateWords) -> str:
    """An optional joiner word and the space after it ("of ", "de ")."""
    return rf"(?:(?:{alt(w.joiners)})\s+)?" if w.joiners else ""


_ORDINAL = r"(?:st|nd|rd|th)?"
_ISOLATED = r"(?<![0-9a-z/.-])"  # not glued to a code, a longer number or a path

# A resolver reads one match against today; `prefer` says which way a date that names no year
# (or no month, or no week) points: "future" (a booking: May 20 said in June is next year's) or
# "past" (a claim's incident date: May 20 said in June is this year's).
_Resolver = Callable[[re.Match[str], dt.date, str], "dt.date | None"]
PREFER = ("future", "past")


@dataclass(frozen=True, slots=True)
class _Rule:
    """A pattern, and substrings one of which every match contains (lower case).

    Rules whose substrings are all absent from a message are skipped without scanning,
    which keeps a message with no 月 from paying for the 月 patterns.
    """

    pattern: re.Pattern[str]
    needs: tuple[str, ...] = ()

    def finditer(self, lowered: str, norm: str) -> Iterable[re.Match[str]]:
        if self.needs and not any(n in lowered for n in self.needs):
            return ()
        return self.pattern.finditer(norm)


# A pattern is written once; those built from the lexicons' words are functions of them.
_Pattern = str | Callable[[_DateWords], str]
_DAY_RULES: list[tuple[_Pattern, tuple[str, ...], _Resolver]] = []


def _rule(pattern: _Pattern, needs: tuple[str, ...] = ()) -> Callable[[_Resolver], _Resolver]:
    """Register a day resolver for ``pattern``; resolvers return None for impossible dates."""

    def register(resolver: _Resolver) -> _Resolver:
        _DAY_RULES.append((pattern, needs, resolver))
        return resolver

    return register


@lru_cache(maxsize=2)
def _day_rules(w: _DateWords) -> list[tuple[_Rule, _Resolver]]:
    """The day rules compiled for the registered languages' words."""
    return [(_Rule(re.compile(p if isinstance(p, str) else p(w), _FLAGS), needs), resolve)
            for p, needs, resolve in _DAY_RULES]


def _safe_date(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def _shift_month(year: int, month: int, k: int) -> tuple[int, int]:
    index = year * 12 + month - 1 + k
    return index // 12, index % 12 + 1


def _day_in_month(year: int, month: int, day: int | None) -> dt.date | None:
    """The ``day`` of that month, or its last day when ``day`` is None (月底)."""
    if not 1 <= month <= 12 or not dt.MINYEAR <= year <= dt.MAXYEAR:
        return None
    return _safe_date(year, month, day if day is not None else calendar.monthrange(year, month)[1])


def _next_month_day(today: dt.date, month: int, day: int | None, prefer: str = "future") -> dt.date | None:
    """This year's ``month``/``day``, or the first later year where it is valid and not past
    (with ``prefer="past"``: the first earlier year where it is valid and not ahead)."""
    step = -1 if prefer == "past" else 1
    for year in range(today.year, today.year + 5 * step, step):
        found = _day_in_month(year, month, day)
        if found and (found <= today if step < 0 else found >= today):
            return found
    return None


def _int(s: str | None) -> int | None:
    value = parse_number(s) if s else None
    return value if isinstance(value, int) else None


@_rule(lambda w: rf"(?<![然以之]){words_pattern(w.day)}")  # not the 后天 of 然后天气 ("then the weather")
def _relative_day(m: re.Match[str], today: dt.date, prefer: str) -> dt.date:
    return today + dt.timedelta(days=_words().day[_key(m[0])][0])


@_rule(r"(?P<shift>下下|下|这|本|上)?个?(?:周|星期|礼拜)(?P<wd>[一二三四五六日天末])", ("周", "星期", "礼拜"))
@_rule(lambda w: rf"(?<![a-z])(?:(?P<shift>{words_pattern(k for k in w.week_shift if k.isascii() or k not in _ZH_WEEK_SHIFT)})\s+)?"
       rf"(?P<wd>{_weekday_names(w)})")
def _weekday(m: re.Match[str], today: dt.date, prefer: str) -> dt.date:
    weekday = _words().weekday[_key(m["wd"].rstrip("."))]
    shift = _words().week_shift[_key(m["shift"])] if m["shift"] else None
    if shift is None and prefer == "past":  # "on Friday" of an incident: the Friday just gone (or today)
        return today - dt.timedelta(days=(today.weekday() - weekday) % 7)
    if shift is None:
        return today + dt.timedelta(days=(weekday - today.weekday()) % 7)
    return today + dt.timedelta(days=7 * shift + weekday - today.weekday())


@_rule(
    rf"(?:(?P<year>[0-9]{{4}}|[零〇一二三四五六七八九]{{4}})年|(?P<yshift>[今明后去前])年)?"
    rf"(?:(?<![0-9])(?P<month>{_NUM})|(?P<mshift>这个|本|下个|下|上个|上))?月"
    rf"(?:(?P<day>{_NUM})(?:日|号(?!{NOT_A_DAY}))?(?![0-9])|(?P<end>底|末))",
    ("月",),
)
def _chinese_calendar_day(m: re.Match[str], today: dt.date, prefer: str) -> dt.date | None:
    day = _int(m["day"])
    if m["month"] is None:  # 下个月3号, 月底: relative to the current month
        year, month = _shift_month(today.year, today.month, _MONTH_SHIFT[m["mshift"]] if m["mshift"] else 0)
        return _day_in_month(year, month, day) if (m["mshift"] or m["end"]) else None
    month_of_year = _int(m["month"])
    if month_of_year is None:
        return None
    if m["year"] or m["yshift"]:
        in_year = _int(m["year"]) if m["year"] else today.year + _YEAR_SHIFT[m["yshift"]]
        return _day_in_month(in_year, month_of_year, day) if in_year else None
    return _next_month_day(today, month_of_year, day, prefer)


@_rule(rf"(?<![0-9月])(?P<day>{_NUM})号(?!{NOT_A_DAY})", ("号",))
# "the 3rd", "on the 10th", "the 9th of this month", "5th of next month": an ordinal day needs
# "the" before it or "of this/next month" after it, and is no day when a thing follows ("the
# 3rd one", "the 2nd floor", "the 5th time").
@_rule(
    lambda w: r"(?<![0-9a-z])(?:(?P<the>the)\s+)?(?P<day>[0-9]{1,2})(?:st|nd|rd|th)(?![0-9a-z])"
    r"(?:\s+of\s+(?:the\s+)?(?P<which>this|next|the\s+next|the\s+following|following)\s+month(?![a-z]))?"
    rf"(?!\s+{_joined(w)}{_month_names(w)}(?![a-z]))"  # "the 3rd of March" is a calendar day
    r"(?(which)|(?(the)(?!\s+(?:one|ones|option|choice|floor|row|place|time|times|street|st|avenue|ave|grade|"
    r"edition|person|party|seat|show|song|track|album|episode|season|century|round|line|item)\b)|(?!)))",
    ("st", "nd", "rd", "th"),
)
def _day_of_month(m: re.Match[str], today: dt.date, prefer: str) -> dt.date | None:
    day = _int(m["day"])
    if m.groupdict().get("which"):
        year, month = _shift_month(today.year, today.month, 0 if m["which"].lower() == "this" else 1)
        return _day_in_month(year, month, day)
    step = -1 if prefer == "past" else 1
    for k in range(0, (12 if day else 0) * step, step):
        year, month = _shift_month(today.year, today.month, k)
        found = _day_in_month(year, month, day)
        if found and (found <= today if step < 0 else found >= today):
            return found
    return None


@_rule(
    rf"{_ISOLATED}(?P<year>[0-9]{{4}})(?P<sep>[-/.])(?P<month>[0-9]{{1,2}})(?P=sep)(?P<day>[0-9]{{1,2}})"
    r"(?![0-9a-z]|[-/.][0-9])"
)
def _iso_day(m: re.Match[str], today: dt.date, prefer: str) -> dt.date | None:
    return _safe_date(int(m["year"]), int(m["month"]), int(m["day"]))


@_rule(
    rf"{_ISOLATED}(?P<month>[0-9]{{1,2}})/(?P<day>[0-9]{{1,2}})(?:/(?P<year>[0-9]{{4}}|[0-9]{{2}}))?"
    r"(?![0-9a-z]|[/.][0-9])",
    ("/",),
)
def _us_numeric_day(m: re.Match[str], today: dt.date, prefer: str) -> dt.date | None:
    month, day = int(m["month"]), int(m["day"])
    if m["year"] is None:
        return _next_month_day(today, month, day, prefer)
    year = int(m["year"])
    return _safe_date(year + 2000 if year < 100 else year, month, day)


@_rule(
    lambda w: rf"(?<![a-z])(?P<mon>{_month_names(w)})\s+(?:the\s+)?(?P<day>[0-9]{{1,2}}){_ORDINAL}(?![0-9a-z:])"
    rf"(?:,?\s*(?P<year>[0-9]{{4}})(?![0-9]))?"
)
@_rule(
    lambda w: rf"(?<![0-9a-z])(?P<day>[0-9]{{1,2}}){_ORDINAL}\s+{_joined(w)}(?P<mon>{_month_names(w)})(?![a-z])"
    rf"(?:,?\s*{_joined(w)}(?P<year>[0-9]{{4}})(?![0-9]))?"
)
def _named_month_day(m: re.Match[str], today: dt.date, prefer: str) -> dt.date | None:
    month, day = _words().month[m["mon"].rstrip(".").lower()], int(m["day"])
    if m["year"]:
        return _safe_date(int(m["year"]), month, day)
    return _next_month_day(today, month, day, prefer)


@_rule(rf"(?P<n>{_NUM}|[0-9]{{3}})个?(?P<unit>天|周|星期|礼拜)(?:以后|之后|后)", ("后",))
@_rule(rf"(?<![a-z])in\s+(?P<n>{_EN_COUNT})\s+(?P<unit>days?|weeks?)(?![a-z])", ("day", "week"))
@_rule(
    rf"(?<![a-z])(?P<n>{_EN_COUNT})\s+(?P<unit>days?|weeks?)\s+(?:from\s+(?:now|today)|later)(?![a-z])",
    ("day", "week"),
)
def _offset_day(m: re.Match[str], today: dt.date, prefer: str) -> dt.date | None:
    n = 1 if m["n"].lower() in ("a", "an") else _int(m["n"])
    return None if n is None else today + dt.timedelta(days=n * _OFFSET_UNIT_DAYS[m["unit"].lower()])


def _key(word: str) -> str:
    """Table key for a matched word: lower case, single spaces (``The  day after``)."""
    return " ".join(word.lower().split())


# --------------------------------------------------------------------------- clock times

_EN_HOUR_WORDS = words_pattern(("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"))
_EN_PERIOD_AFTER = rf"(?:\s+(?:in\s+the\s+)?(?P<after>{_EN_PERIODS}))?"
_CLOCK_RULES = [
    # 下午3点半, 九点一刻, 9点30分, 两点钟, 10时
    _Rule(
        re.compile(
            rf"(?:(?P<period>{_CN_PERIODS})\s*)?(?<![0-9])(?P<hour>{_NUM})(?P<mark>点钟|点|时)"
            rf"(?:(?P<min>{CN_CLOCK_MINUTE}))?(?![0-9])",
            _FLAGS,
        ),
        ("点", "时"),
    ),
    # 9:30, 下午3:30, 3:30 pm, 9am, 9 a.m.
    _Rule(
        re.compile(
            rf"(?:(?P<period>{_CN_PERIODS})\s*)?(?<![0-9:])(?P<hour>[0-9]{{1,2}})"
            rf"(?:(?P<colon>:)(?P<min>[0-9]{{2}})(?::[0-9]{{2}})?(?![0-9]))?"
            rf"(?:\s*(?P<ampm>[ap]\.?m\.?)(?![a-z]))?{_EN_PERIOD_AFTER}",
            _FLAGS,
        ),
        (":", "m"),
    ),
    # 9 o'clock, nine o'clock
    _Rule(
        re.compile(
            rf"(?<![a-z0-9])(?P<hour>[0-9]{{1,2}}|[a-z]+)\s+(?P<oclock>o'clock)(?![a-z]){_EN_PERIOD_AFTER}", _FLAGS
        ),
        ("o'clock",),
    ),
    # at 9: only read next to a day or with a period word
    _Rule(
        re.compile(rf"(?<![a-z])(?P<at>at)\s+(?P<hour>[0-9]{{1,2}})(?![0-9:]|\s*[ap]\.?m){_EN_PERIOD_AFTER}", _FLAGS),
        ("at",),
    ),
    _Rule(re.compile(r"(?<![a-z])(?P<word>noon|midnight)(?![a-z])", _FLAGS), ("noon", "midnight")),
    # half past seven, quarter to 8, 20 past 6 (the hour is the one named after past/to)
    _Rule(
        re.compile(
            rf"(?<![a-z0-9])(?P<rel>half|quarter|[0-9]{{1,2}}|{_EN_HOUR_WORDS}|twenty|twenty-five)\s+(?:minutes\s+)?"
            rf"(?P<dir>past|after|to)\s+(?P<hour>[0-9]{{1,2}}|{_EN_HOUR_WORDS})(?![a-z0-9:])"
            rf"(?:\s*(?P<ampm>[ap]\.?m\.?)(?![a-z]))?{_EN_PERIOD_AFTER}",
            _FLAGS,
        ),
        ("past", "after", " to "),
    ),
    # seven pm, seven thirty pm, eight in the evening
    _Rule(
        re.compile(
            rf"(?<![a-z0-9])(?P<hour>{_EN_HOUR_WORDS})(?:\s+(?P<wmin>fifteen|thirty|forty-five|forty five))?"
            rf"(?:\s*(?P<ampm>[ap]\.?m\.?)(?![a-z])|\s+(?:in\s+the\s+)?(?P<after>{_EN_PERIODS}))",
            _FLAGS,
        ),
    ),
]
_WORD_CLOCK = {"noon": (12, 0), "midnight": (0, 0)}
_WORD_MINUTE = {"fifteen": 15, "thirty": 30, "forty-five": 45, "forty five": 45}
_MINUTE_WORDS = {"半": 30, "一刻": 15, "三刻": 45}
_HOUR_MARKS = ("mark", "colon", "ampm", "oclock", "at", "dir", "after")  # one must be present: a bare "9" is no time


def _period(word: str | None) -> str | None:
    return _PERIOD_OF[_key(word).replace(".", "")] if word else None


def _minute(word: str | None) -> int | None:
    if not word:
        return 0
    return _MINUTE_WORDS.get(word) or _int(word.removesuffix("分"))


def _clock(m: re.Match[str]) -> _Clock | None:
    """Read one clock match; None when it is no time or the hour or minute is impossible."""
    g = m.groupdict()
    if g.get("word"):
        hour, minute = _WORD_CLOCK[g["word"].lower()]
        return _Clock(m.start(), m.end(), hour, minute, None, True)
    read_hour, read_minute = _int(g["hour"]), _minute(g.get("min"))
    if g.get("wmin"):
        read_minute = _WORD_MINUTE.get(_key(g["wmin"]), 0)
    if g.get("dir") and read_hour is not None:  # half past 7 -> 7:30, quarter to 8 -> 7:45
        rel = {"half": 30, "quarter": 15}.get(g["rel"].lower()) or _int(g["rel"].replace("twenty-five", "25"))
        if rel is None or not 0 < rel < 60:
            return None
        read_hour, read_minute = (read_hour, rel) if g["dir"].lower() != "to" else ((read_hour - 1) % 12 or 12, 60 - rel)
    if not any(g.get(k) for k in _HOUR_MARKS) or read_hour is None or read_minute is None:
        return None
    hour, minute = read_hour, read_minute
    if not (0 <= hour <= 23 or (hour == 24 and minute == 0)) or not 0 <= minute <= 59:
        return None
    period = _period(g.get("ampm") or g.get("period") or g.get("after"))
    weak = g.get("at") or (g.get("mark") in ("点", "时") and not g["hour"].isdigit())
    strong = bool(period or g.get("min") or not weak)
    return _Clock(m.start(), m.end(), hour, minute, period, strong)


def _hour24(hour: int, period: str | None) -> int:
    """Hour on a 24-hour dial; 24 stands for midnight at the end of the day (晚上12点)."""
    if period in ("pm", "afternoon", "evening") and hour < 12:
        return hour + 12
    if period == "evening" and hour == 12:
        return 24
    if period == "noon" and hour < 11:
        return hour + 12
    if period in ("am", "small hours") and hour == 12:
        return 0
    return hour


# --------------------------------------------------------------------------- assembling days and clocks

_GLUE_AFTER_DAY = re.compile(
    rf"\s*[,，的]?\s*(?:(?:in\s+the\s+)?(?P<period>{_EN_PERIODS}|{_CN_PERIODS})\s*)?(?:at\s+|@\s*)?", _FLAGS
)
_GLUE_BEFORE_DAY = re.compile(r"\s*[,，]?\s*(?:on\s+)?", _FLAGS)


def _days(norm: str, lowered: str, today: dt.date, prefer: str) -> list[_Day]:
    found = []
    for rule, resolve in _day_rules(_words()):
        for m in rule.finditer(lowered, norm):
            try:
                day = resolve(m, today, prefer)
            except OverflowError:  # beyond 9999-12-31 or before year 1
                continue
            if day is not None:
                implied = _words().day.get(_key(m[0]), (0, None))[1]
                found.append(_Day(m.start(), m.end(), day, implied))
    return leftmost_longest(found)


def _clocks(norm: str, lowered: str) -> list[_Clock]:
    return leftmost_longest(c for rule in _CLOCK_RULES for m in rule.finditer(lowered, norm) if (c := _clock(m)))


def _at(day: dt.date, clock: _Clock, period: str | None, tz: dt.tzinfo | None, days: int = 0) -> dt.datetime | None:
    """``day`` (plus ``days``) at ``clock``; None past the end of the calendar."""
    hour = _hour24(clock.hour, clock.period or period)
    try:
        return dt.datetime.combine(day, dt.time(tzinfo=tz)) + dt.timedelta(days=days, hours=hour, minutes=clock.minute)
    except OverflowError:
        return None


def _pair(norm: str, day: _Day, clocks: list[_Clock], used: set[int]) -> tuple[_Clock, str | None] | None:
    """The free clock written right after (明天早上9点, tomorrow at 9) or before (9am tomorrow) ``day``."""
    for i, clock in enumerate(clocks):
        if i in used:
            continue
        glue = _GLUE_AFTER_DAY.fullmatch(norm, day.end, clock.start) if clock.start >= day.end else None
        if glue:
            used.add(i)
            return clock, _period(glue["period"]) or day.period
        if clock.end <= day.start and _GLUE_BEFORE_DAY.fullmatch(norm, clock.end, day.start):
            used.add(i)
            return clock, day.period
    return None


def _match(text: str, start: int, end: int, value: dt.date | dt.datetime, day_said: bool = True) -> DateMatch:
    grain = "minute" if isinstance(value, dt.datetime) else "day"
    return DateMatch(start, end, text[start:end], value, grain, day_said)


def _assemble(text: str, norm: str, now: dt.datetime, prefer: str) -> Iterable[DateMatch]:
    lowered = norm.lower()
    days, clocks = _days(norm, lowered, now.date(), prefer), _clocks(norm, lowered)
    used: set[int] = set()
    for day in days:
        paired = _pair(norm, day, clocks, used)
        when = _at(day.day, paired[0], paired[1], now.tzinfo) if paired else None
        if paired is None or when is None:
            yield _match(text, day.start, day.end, day.day)
        else:
            yield _match(text, min(day.start, paired[0].start), max(day.end, paired[0].end), when)
    minute_now = now.replace(second=0, microsecond=0)
    for i, clock in enumerate(clocks):
        if i in used or not clock.strong:
            continue
        when = _at(now.date(), clock, None, now.tzinfo)
        if when is not None and prefer == "past" and when > minute_now:
            when = _at(now.date(), clock, None, now.tzinfo, days=-1)
        elif when is not None and prefer != "past" and when < minute_now:
            when = _at(now.date(), clock, None, now.tzinfo, days=1)
        if when is not None:
            yield _match(text, clock.start, clock.end, when, day_said=False)


def find_dates(text: str, now: dt.datetime, prefer: str = "future") -> list[DateMatch]:
    """Dates and date-times in ``text``, left to right, non-overlapping, resolved against ``now``;
    ``prefer`` ("future" or "past") decides which way a date without a year, month or week points."""
    return leftmost_longest(_assemble(text, normalize_width(text), now, prefer))


@dataclass(frozen=True, slots=True)
class TimeMatch:
    """A time of day, normalised to ``HH:MM`` (24-hour), with its exact span."""

    start: int
    end: int
    text: str
    value: str


def find_times(text: str, answer: bool = False) -> list[TimeMatch]:
    """Clock times in ``text`` ("7:30pm", "half past seven", "19:30", "晚上七点半", "早上9点"), left to right.

    A weak reading ("at 8", "两点": also "two points") counts only when ``answer`` is true, i.e.
    the text answers a question about a time; then a bare hour ("8", "eight") is a time too."""
    norm = normalize_width(text)
    lowered = norm.lower()
    clocks = [c for c in _clocks(norm, lowered) if c.strong or answer]
    if answer and not clocks:
        bare = _BARE_HOUR.fullmatch(norm)
        hour = _int(bare["hour"]) if bare else None
        if bare is not None and hour is not None and 0 <= hour <= 23:
            clocks = [_Clock(bare.start("hour"), bare.end("hour"), hour, 0, None, False)]
    out = []
    for c in clocks:
        hour = _hour24(c.hour, c.period) % 24
        out.append(TimeMatch(c.start, c.end, text[c.start:c.end], f"{hour:02d}:{c.minute:02d}"))
    return out


_BARE_HOUR = re.compile(rf"\s*(?:at\s+|around\s+|about\s+)?(?P<hour>[0-9]{{1,2}}|{_EN_HOUR_WORDS})\s*[.!。！]?\s*", _FLAGS)
