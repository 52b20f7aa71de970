"""Bilingual (Chinese / English) numbers, money, percents, durations and people counts.

Deterministic, pure Python, no model: every finder returns frozen matches whose
``start``/``end`` index the caller's string exactly (``text[start:end] == match.text``).

How it works
------------
Each finder first maps full-width characters onto ASCII one-for-one
(:func:`normalize_width`), so spans computed on the copy are spans of the input.
One scanner regex then walks the copy.  Its first alternative recognises things
that look numeric but are not quantities and skips over them whole:

* codes and IDs: a letter followed later by a digit in one token (``A123``,
  ``SKU12345``, ``MU5101``, ``ORDER-2024-001``), three or more hyphen-joined digit
  groups (``138-1234-5678``, ``2024-05-10``) or a zero-led group (``010-1234``);
  ``RMB2000`` / ``USD200`` are currency codes, not IDs;
* calendar dates: ``5/10``, ``5/10/2024``, ``2024年``, ``5月10日``, ``五月``,
  ``10号``, ``周五``; dotted runs like ``2024.5.10`` or ``1.2.3`` never match;
* clock times: ``9:30``, ``3pm``, ``9 o'clock``, ``9点``, ``八点半``, ``三点十分``;
* digit runs named as identifiers (``订单号20240501``, ``电话13812345678``, ``order #123``,
  ``zip 10001``) and English ordinals (``2nd``, ``10th``);
* idioms that merely contain a numeral (``一起``, ``万一``, ``十分``, ``三亚``).

Because those alternatives are tried first at every position, no number can start
inside them.  The remaining alternatives read English number words, Arabic numbers
(with ``,`` thousands, decimals, ``k``/``m`` and ``万``/``千`` suffixes) and Chinese
numerals (converted with cn2an; its exceptions are caught and mean "no number").

Conventions
-----------
* Values are ``int`` whenever integral (``1.5万`` -> 15000, ``2.0`` -> 2), else ``float``.
* ``2k`` = 2000, ``5m`` = 5 000 000; ``两千五`` = 2500, ``一万二`` = 12000.
* Two consecutive Chinese digits (``三四天``) are "three or four", not 34: no number.
* A two-part all-digit hyphen run without leading zeros (``2000-3000``) is a range
  of two numbers; longer runs and zero-led parts are codes.
* ``find_numbers`` returns cardinal expressions only; percents, money etc. are the
  same numbers seen with their unit by the other finders.
* Money: an amount is money when it carries a currency marker, an adjacent bound
  cue (``以内``, ``不超过``, ``under``, ``at least``...) or a budget cue (``预算``,
  ``人均``, ``budget``, ``price``...).  A marker-less amount followed by a non-money
  unit (``3天``, ``5 people``, ``3%``, ``128GB``) is never money.  The span covers currency
  markers and bound cues, not budget words.  A range yields two matches: the lower
  with bound ``"min"``, the upper with ``"max"``; ``and`` joins a range only after
  ``between``.
* Durations: a fractional value moves one unit down when that makes it integral
  (``一年半`` -> 18 month, ``半小时`` -> 30 minute, ``1.5 days`` -> 36 hour);
  ``duration_in`` uses year = 12 months, month = 30 days, week = 7 days, day = 24 h.
  ``X月`` is a calendar month (``三个月`` is the duration); ``2024年`` is a year.
* People counts: ``unit`` is ``"adult"``, ``"child"`` or ``"people"``.  Adjacent
  adult/child parts (``2 adults and 1 child``, ``两个大人一个小孩``, ``两大一小``) are
  summed into one ``"people"`` match (or keep their kind when all parts share it).
  The span includes a leading pronoun or family cue (``我们三个``, ``一家三口``).

Limits (deliberate, to stay predictable): values beyond float range are no number;
shapes cn2an rejects (``一亿二``) yield no number rather than a guess; ``3块5`` is 3 CNY;
a cue must be adjacent (``最多给你两千五`` is a number, not a bounded amount).

``normalize_width``, ``leftmost_longest``, ``words_pattern`` and the ``SMALL_NUMERAL`` /
``CN_CLOCK_MINUTE`` / ``NOT_A_DAY`` fragments are shared with the dates module.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from decimal import Decimal
from typing import Callable, Iterable, Protocol, TypeVar

import cn2an

__all__ = [
    "NumberMatch",
    "MoneyMatch",
    "PercentMatch",
    "DurationMatch",
    "CountMatch",
    "parse_number",
    "find_numbers",
    "find_money",
    "find_percents",
    "find_durations",
    "duration_in",
    "find_people_counts",
    "normalize_width",
    "leftmost_longest",
    "words_pattern",
    "SMALL_NUMERAL",
    "NOT_A_DAY",
    "CN_CLOCK_MINUTE",
]


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class NumberMatch:
    start: int
    end: int
    text: str
    value: int | float


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


# --------------------------------------------------------------------------- shared helpers


class _Span(Protocol):
    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


_S = TypeVar("_S", bound=_Span)

_WIDTH = str.maketrans(
    {chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F) if c != 0xFF0C}
    | {"\u3000": " ", "\u00a0": " "}
)


def normalize_width(text: str) -> str:
    """Map full-width ASCII look-alikes onto ASCII, one character for one.

    The length never changes, so a span found in the result is a span of ``text``.
    The ideographic comma is kept: in ``3，000`` it separates list items.
    """
    return text.translate(_WIDTH)


def leftmost_longest(matches: Iterable[_S]) -> list[_S]:
    """Keep a left-to-right, non-overlapping selection preferring earlier, then longer spans.

    Finders collect candidates from several patterns; this is how they agree on one reading.
    """
    kept: list[_S] = []
    for m in sorted(matches, key=lambda m: (m.start, m.start - m.end)):
        if not kept or m.start >= kept[-1].end:
            kept.append(m)
    return kept


def _alt(words: Iterable[str]) -> str:
    """Regex alternation of literal words, longest first so ``块钱`` wins over ``块``.

    A space in a word matches any run of whitespace.
    """
    escaped = (re.escape(w).replace(r"\ ", r"\s+") for w in sorted(set(words), key=len, reverse=True))
    return "(?:" + "|".join(escaped) + ")"


def words_pattern(words: Iterable[str]) -> str:
    """Alternation of ``words`` (longest first) that must not be glued to other Latin letters.

    ``max`` must not fire inside ``maximum`` nor ``to`` inside ``total``; CJK words are unaffected.
    """
    return rf"(?<![a-z]){_alt(words)}(?![a-z])"


def _decimal(value: int | float | Decimal) -> Decimal:
    """Exact decimal of a value; floats go through their shortest repr so 1.1 stays 1.1."""
    return Decimal(str(value)) if isinstance(value, float) else Decimal(value)


_FLOAT_MAX = Decimal(sys.float_info.max)


def _tidy(value: int | float | Decimal) -> int | float | None:
    """Integral values become ``int`` so ``1.5万`` equals 15000.

    Values a float cannot hold (a 400-digit run) are no quantity anyone wrote: None.
    """
    d = _decimal(value)
    if not d.is_finite() or abs(d) > _FLOAT_MAX:
        return None
    return int(d) if d == d.to_integral_value() else float(d)


_FLAGS = re.IGNORECASE | re.ASCII

# --------------------------------------------------------------------------- number grammar

_ARABIC = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?"
_CN_DIGITS = "零〇一二两俩三四五六七八九壹贰叁肆伍陆柒捌玖"
_CN_UNITS = "十拾百佰千仟万亿"
_CN_UNIT_VALUE = {"十": 10, "拾": 10, "百": 100, "佰": 100, "千": 1000, "仟": 1000, "万": 10**4, "亿": 10**8}
_CN_DIGIT_VALUE = {c: i for i, c in enumerate("〇一二三四五六七八九")}
# Single characters are the common case and cost cn2an ~25 µs each; read them directly.
_CN_SINGLE_VALUE = _CN_DIGIT_VALUE | {"零": 0, "两": 2, "俩": 2, "十": 10, "拾": 10}
_LETTER_SUFFIX = {"k": 10**3, "m": 10**6}

_EN_ONES = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_EN_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_EN_SCALES = {"hundred": 100, "thousand": 10**3, "million": 10**6, "billion": 10**9}

_EN_DIGIT = _alt(w for w, v in _EN_ONES.items() if 1 <= v <= 9)
_EN_SMALL = rf"(?:{_alt(_EN_TENS)}(?:[-\s]+{_EN_DIGIT})?|{_alt(_EN_ONES)})(?![a-z])"
_EN_SCALE = words_pattern(_EN_SCALES)
_EN_HEAD = rf"(?:(?<![a-z])an?|(?<![0-9.]){_ARABIC})(?=\s+{_EN_SCALE})|(?<![a-z]){_EN_SMALL}"
_EN_NUMBER = rf"(?:{_EN_HEAD})(?:\s+and\s+a\s+half(?![a-z]))?(?:\s+{_EN_SCALE}(?:(?:\s+and)?\s+{_EN_SMALL})?)*"
_AR_NUMBER = (
    rf"(?<![0-9#])(?<![0-9]\.){_ARABIC}"
    rf"(?:(?:[{_CN_UNITS}]+[0-9{_CN_DIGITS}]?)+|[km](?![a-z]))?(?![0-9])(?!\.[0-9])"
)
_CN_NUMBER = rf"[{_CN_DIGITS}十拾][{_CN_DIGITS}{_CN_UNITS}]*(?:点[{_CN_DIGITS}]+)?"

# --------------------------------------------------------------------------- look-alikes that are not quantities

# Month / day / hour numerals; also used by the dates module.
SMALL_NUMERAL = r"(?:[0-9]{1,2}|[零〇一二两三四五六七八九十]{1,3})"
_CURRENCY_CODES = ("rmb", "cny", "usd", "eur", "gbp")
_CODE = (
    rf"(?<![a-z0-9_-])(?!{_alt(_CURRENCY_CODES)}[0-9])"
    r"(?=[a-z0-9_-]*[a-z][a-z0-9_-]*[0-9])[a-z0-9]+(?:[-_][a-z0-9]+)*"
    r"|(?<![a-z0-9_-])(?:[0-9]+(?:-[0-9]+){2,}|0[0-9]+-[0-9]+|[0-9]+-0[0-9]+)(?![0-9a-z])"
)
_SLASH_DATE = r"(?<![0-9/])[0-9]{1,4}/[0-9]{1,2}(?:/[0-9]{1,4})?(?![0-9/])"
_YEAR = r"(?:[0-9]{4}|[零〇一二三四五六七八九]{4})年"
NOT_A_DAY = "[线楼门房机床位座台厅码]"  # 3号线, 5号楼: a numbered thing, not the 3rd / 5th
_CN_DATE = (
    rf"(?:{_YEAR})?{SMALL_NUMERAL}月(?:{SMALL_NUMERAL}[日号]?)?|{_YEAR}"
    rf"|{SMALL_NUMERAL}号(?!{NOT_A_DAY})|(?:周|星期|礼拜)[一二三四五六日天]"
)
# The minutes after 点 / 时 in a clock time; also used by the dates module.
CN_CLOCK_MINUTE = rf"半|[一三]刻|{SMALL_NUMERAL}分|[0-9]{{1,2}}|[零〇一二三四五]?十[一二三四五六七八九]?|零[一二三四五六七八九]"
_CN_DECIMAL_TAIL = r"[零〇一二两三四五六七八九]+(?![十分刻])"
_CLOCK = (
    r"(?<![0-9:])[0-9]{1,2}:[0-9]{2}(?::[0-9]{2})?(?![0-9])"
    r"|(?<![0-9])[0-9]{1,2}(?::[0-9]{2})?\s*(?:[ap]\.m\.|[ap]m|o'clock)(?![a-z])"
    rf"|{SMALL_NUMERAL}(?:点钟|点(?!{_CN_DECIMAL_TAIL})(?:{CN_CLOCK_MINUTE})?|时(?:{CN_CLOCK_MINUTE})?)"
)
_IDIOMS = (
    "一起", "一下", "一些", "一定", "一直", "一样", "一般", "一切", "一共", "一致", "一旦", "一边",
    "一向", "一路", "一会", "一流", "统一", "唯一", "万一", "三亚", "三峡", "九寨沟", "千岛湖", "五台山",
)  # fmt: skip
_IDIOM = rf"{_alt(_IDIOMS)}|十分(?!钟)"
_ORDINAL = r"(?<![0-9])[0-9]+(?:st|nd|rd|th)(?![a-z])"
# A digit run right after one of these names an identifier, not a quantity.
_ID_CUES = (
    "订单号", "订单编号", "单号", "编号", "卡号", "尾号", "手机号", "电话", "账号", "邮编", "工号", "学号",
    "身份证", "航班号", "order no", "order no.", "order number", "order id", "order #", "tracking number",
    "booking number", "confirmation number", "reference", "ref", "id", "phone", "tel", "zip", "zip code",
    "postcode",
)  # fmt: skip
_ID = rf"{_alt(_ID_CUES)}(?![a-z])\s*(?:是|为|:)?\s*#?[0-9]+(?:[-\s][0-9]+)*"

# Where a match can start: a digit, '#', a Chinese numeral, weekday, idiom or ID-cue character,
# or the first letter of a word.  Failing fast elsewhere makes the scan several times faster.
_SCAN_START_CHARS = "".join({w[0] for w in (*_IDIOMS, *_ID_CUES) if not w.isascii()})
_SCAN_START = rf"(?:(?=[0-9#{_CN_DIGITS}{_CN_UNITS}周星礼{_SCAN_START_CHARS}])|(?<![a-z])(?=[a-z]))"
_SCAN = re.compile(
    rf"{_SCAN_START}(?:(?P<skip>{_CODE}|{_ID}|{_ORDINAL}|{_SLASH_DATE}|{_CN_DATE}|{_CLOCK}|{_IDIOM})"
    rf"|(?P<en>{_EN_NUMBER})|(?P<ar>{_AR_NUMBER})|(?P<cn>{_CN_NUMBER}))",
    _FLAGS,
)
_SCALED_ARABIC = re.compile(rf"({_ARABIC})([{_CN_UNITS}]+)")
_EN_TOKEN = re.compile(r"[0-9][0-9,]*(?:\.[0-9]+)?|[a-z]+", _FLAGS)


def _en_value(s: str) -> int | float | None:
    """Evaluate English number words ("two thousand five hundred", "one and a half thousand")."""
    total, current = Decimal(0), Decimal(0)
    for tok in _EN_TOKEN.findall(s.lower()):
        if tok[0].isdigit():
            current = Decimal(tok.replace(",", ""))
        elif tok in _EN_ONES or tok in _EN_TENS:
            current += _EN_ONES.get(tok, 0) + _EN_TENS.get(tok, 0)
        elif tok == "half":
            current += Decimal("0.5")
        elif tok == "hundred":
            current = (current or Decimal(1)) * 100
        elif tok in _EN_SCALES:
            total += (current or 1) * _EN_SCALES[tok]
            current = Decimal(0)
        elif tok in ("a", "an") and not current:
            current = Decimal(1)
    return _tidy(total + current)


def _is_approximate_pair(s: str) -> bool:
    """``三四`` / ``五六`` mean "three or four", not 34."""
    return len(s) == 2 and all(c in _CN_DIGIT_VALUE for c in s) and _CN_DIGIT_VALUE[s[1]] - _CN_DIGIT_VALUE[s[0]] == 1


def _scaled_arabic_value(s: str) -> int | float | None:
    """``1.5千万``: an Arabic number times Chinese units, a shape cn2an rejects."""
    m = _SCALED_ARABIC.fullmatch(s)
    if not m:
        return None
    value = Decimal(m[1].replace(",", ""))
    for unit in m[2]:
        value *= _CN_UNIT_VALUE[unit]
    return _tidy(value)


@functools.lru_cache(maxsize=4096)
def _cn_value(s: str) -> int | float | None:
    """Chinese or mixed numerals via cn2an, which raises (ValueError, KeyError...) on odd shapes."""
    if s in _CN_SINGLE_VALUE:
        return _CN_SINGLE_VALUE[s]
    if _is_approximate_pair(s):
        return None
    try:
        return _tidy(cn2an.cn2an(s.replace("俩", "两").replace(",", ""), "smart"))
    except Exception:  # cn2an's failure modes are not a documented exception family
        return _scaled_arabic_value(s)


def _ar_value(s: str) -> int | float | None:
    """Arabic digits, optionally with a ``k``/``m`` suffix or Chinese units (``3千``, ``2万5``)."""
    plain = s.replace(",", "")
    multiplier = _LETTER_SUFFIX.get(plain[-1].lower())
    if multiplier:
        return _tidy(Decimal(plain[:-1]) * multiplier)
    if any(c in _CN_UNITS for c in plain):
        return _cn_value(plain)
    return _tidy(Decimal(plain))


_VALUE_OF: dict[str, Callable[[str], int | float | None]] = {"en": _en_value, "ar": _ar_value, "cn": _cn_value}


def _scan(text: str, norm: str) -> list[NumberMatch]:
    """Number expressions of ``norm`` (the width-normalised ``text``), with spans into ``text``."""
    found = []
    for m in _SCAN.finditer(norm):
        if m.lastgroup == "skip":
            continue
        try:
            value = _VALUE_OF[str(m.lastgroup)](m.group())
        except ArithmeticError:  # decimal signals on digit runs beyond its exponent range
            value = None
        if value is not None:
            found.append(NumberMatch(m.start(), m.end(), text[m.start() : m.end()], value))
    return found


def find_numbers(text: str) -> list[NumberMatch]:
    """All number expressions, left to right, non-overlapping, each the longest reading."""
    return _scan(text, normalize_width(text))


def parse_number(text: str) -> int | float | None:
    """The value of ``text`` if the whole string (bar surrounding spaces) is one number."""
    stripped = text.strip()
    found = find_numbers(stripped)
    if len(found) == 1 and found[0].start == 0 and found[0].end == len(stripped):
        return found[0].value
    return None


# --------------------------------------------------------------------------- units that rule out money

_DURATION_WORDS = {
    "minute": ("分钟", "minutes", "minute", "mins", "min"),
    "hour": ("小时", "钟头", "hours", "hour", "hrs", "hr", "h"),
    "day": ("天", "日游", "days", "day"),
    "week": ("周", "星期", "礼拜", "weeks", "week", "wks", "wk"),
    "month": ("个月", "months", "month", "mos"),
    "year": ("年", "years", "year", "yrs", "yr"),
}
_PEOPLE_WORDS = {
    "adult": ("大人", "成人", "成年人", "老人", "adults", "adult", "grown-ups", "grownups", "seniors", "senior"),
    "child": (
        "小孩", "孩子", "儿童", "小朋友", "宝宝", "婴儿", "kids", "kid", "children", "child",
        "infants", "infant", "babies", "baby", "toddlers", "toddler",
    ),
    "people": (
        "人", "口人", "客人", "游客", "people", "persons", "person", "guests", "guest", "travelers",
        "travellers", "traveler", "traveller", "pax", "of us",
    ),
}  # fmt: skip
_MEASURE_WORDS = (
    "%", "个", "位", "名", "口", "点", "晚", "夜", "间", "房", "张", "次", "岁", "层", "楼", "星", "折", "倍",
    "号", "公里", "米", "斤", "克", "nights", "night", "rooms", "room", "stars", "star", "times", "floors",
    "km", "kg", "miles", "percent", "years old", "gb", "tb", "mb",
)  # fmt: skip
_ALL_UNIT_WORDS = [w for ws in (*_DURATION_WORDS.values(), *_PEOPLE_WORDS.values(), _MEASURE_WORDS) for w in ws]
# A listed unit, or any Latin letters glued to the number (128GB, 5kg).
_NON_MONEY_UNIT = re.compile(rf"\s*(?:{_alt(_ALL_UNIT_WORDS)}(?![a-z])|月)|(?=[a-z])", _FLAGS)

# --------------------------------------------------------------------------- money

_CURRENCY_OF = {
    **dict.fromkeys(("元", "块钱", "块", "人民币", "rmb", "cny", "¥", "￥"), "CNY"),
    **dict.fromkeys(("$", "us$", "usd", "dollars", "dollar", "bucks", "美元", "美金"), "USD"),
    **dict.fromkeys(("€", "eur", "euros", "euro", "欧元"), "EUR"),
    **dict.fromkeys(("£", "gbp", "pounds", "pound", "英镑"), "GBP"),
}
_PREFIX_MARKERS = ("¥", "￥", "$", "us$", "€", "£", *_CURRENCY_CODES)
_BOUND_BEFORE = {
    "max": (
        "不超过", "不高于", "不多于", "最多", "至多", "最高", "封顶", "上限", "低于", "少于", "不到", "under",
        "below", "at most", "no more than", "up to", "max", "maximum", "less than", "within", "no higher than",
    ),
    "min": (
        "至少", "不低于", "不少于", "最少", "最低", "起码", "高于", "超过", "多于", "at least", "over",
        "more than", "above", "minimum", "min", "no less than", "starting at", "starting from",
    ),
}  # fmt: skip
_BOUND_AFTER = {
    "max": ("以内", "以下", "之内", "内", "封顶", "上限", "max", "maximum", "or less", "or below", "or under", "tops"),
    "min": ("以上", "起", "起步", "之上", "min", "minimum", "or more", "or above", "and up", "and above", "+", "plus"),
}
_BUDGET_WORDS = ("预算", "价位", "价格", "人均", "房费", "budget", "price", "cost", "spend")
_FILLER_WORDS = ("是", "为", "在", "大概", "大约", "约", "差不多", "控制在", ":", "is", "of", "around", "about", "roughly", "~")
_RANGE_WORDS = ("到", "至", "-", "~", "—", "–", "to", "and")

_PREFIX_CUR = rf"(?<![a-z]){_alt(_PREFIX_MARKERS)}"
_SUFFIX_CUR = rf"{_alt(_CURRENCY_OF)}(?![a-z])"
_FILL = rf"(?:\s*{_alt(_FILLER_WORDS)}(?![a-z]))*\s*"
_MONEY_LEFT_WORDS = (*_BUDGET_WORDS, *_BOUND_BEFORE["max"], *_BOUND_BEFORE["min"], *_PREFIX_MARKERS)
_MONEY_LEFT = re.compile(
    # The lookahead lets the backwards-anchored search skip positions where no cue can begin.
    rf"(?=[{re.escape(''.join({w[0] for w in _MONEY_LEFT_WORDS}))}]|\s*$)"
    rf"(?:(?P<budget>{words_pattern(_BUDGET_WORDS)}){_FILL})?"
    rf"(?:(?:(?P<max>{words_pattern(_BOUND_BEFORE['max'])})|(?P<min>{words_pattern(_BOUND_BEFORE['min'])})){_FILL})?"
    rf"(?P<cur>{_PREFIX_CUR})?\s*$",
    _FLAGS,
)
_MONEY_RIGHT = re.compile(
    rf"\s*(?P<cur>{_SUFFIX_CUR})?"
    rf"(?:\s*(?:(?P<max>{_alt(_BOUND_AFTER['max'])})|(?P<min>{_alt(_BOUND_AFTER['min'])}))(?![a-z]))?",
    _FLAGS,
)
_RANGE_JOIN = re.compile(
    rf"\s*(?P<cur>{_SUFFIX_CUR})?\s*(?P<join>{words_pattern(_RANGE_WORDS)})\s*(?P<cur2>{_PREFIX_CUR})?\s*",
    _FLAGS,
)
_BETWEEN = re.compile(rf"(?<![a-z])between\s*(?:{_PREFIX_CUR})?\s*$", _FLAGS)
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
    return _CURRENCY_OF[marker.lower()] if marker else None


def _money_cues(norm: str, num: NumberMatch, lo: int, hi: int) -> _Cues:
    """Read prefix (budget, bound, currency) and suffix (currency, bound) cues around ``num``."""
    left = _MONEY_LEFT.search(norm, max(lo, num.start - _CONTEXT), num.start)
    right = _MONEY_RIGHT.match(norm, num.end, hi)
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
    return _NON_MONEY_UNIT.match(norm, num.end) is not None


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
    join = _RANGE_JOIN.fullmatch(norm, a.end, b.start)
    if join is None:
        return None
    if join["join"].lower() == "and" and not _BETWEEN.search(norm, max(lo, a.start - _CONTEXT), a.start):
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


def find_money(text: str) -> list[MoneyMatch]:
    """Amounts with a currency marker, or with an adjacent bound or budget cue."""
    norm = normalize_width(text)
    nums = _scan(text, norm)
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

_PERCENT_AFTER = re.compile(r"\s*(?:%|(?<![a-z])(?:percent|per\s+cent|pct)(?![a-z])|个?百分点|个点)", _FLAGS)
_PERCENT_BEFORE = re.compile(r"百分之\s*$")


def find_percents(text: str) -> list[PercentMatch]:
    """``3%``, ``3％``, ``百分之三``, ``3 percent``, ``三个点``, ``2个百分点``: value in percent."""
    norm = normalize_width(text)
    found = []
    for num in _scan(text, norm):
        before = _PERCENT_BEFORE.search(norm, max(0, num.start - 8), num.start)
        after = _PERCENT_AFTER.match(norm, num.end)
        if before or after:
            start = before.start() if before else num.start
            end = after.end() if after else num.end
            found.append(PercentMatch(start, end, text[start:end], float(num.value)))
    return found


# --------------------------------------------------------------------------- durations

_UNIT_OF = {w: unit for unit, ws in _DURATION_WORDS.items() for w in ws} | {"月": "month"}
_DURATION_UNIT = rf"(?P<unit>(?<=个)月|(?<=个半)月|{_alt(w for ws in _DURATION_WORDS.values() for w in ws)})(?![a-z级代纪])"
_DURATION_AFTER = re.compile(
    rf"(?:\s*-\s*|\s*)(?P<pre>个\s*半|个)?\s*{_DURATION_UNIT}(?P<post>半|\s+and\s+a\s+half(?![a-z]))?",
    _FLAGS,
)
_WORD_DURATION = re.compile(
    rf"(?<![0-9{_CN_DIGITS}个])(?P<cnhalf>半)\s*(?:个\s*)?{_DURATION_UNIT}"
    rf"|(?<![a-z])(?P<enhalf>half\s+)?an?\s+(?P<enunit>{_alt(w for w in _UNIT_OF if w.isascii())})(?![a-z])"
    r"(?P<plus>\s+and\s+a\s+half(?![a-z]))?",
    _FLAGS,
)
_FREQUENCY_BEFORE = re.compile(r"(?<![a-z])(?:once|twice|thrice|times|per)\s*$", _FLAGS)
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
    tidy = _tidy(value)
    if isinstance(tidy, int) or unit not in _SMALLER_UNIT:
        return tidy, unit  # type: ignore[return-value]
    smaller, factor = _SMALLER_UNIT[unit]
    scaled = _tidy(value * factor)
    return (scaled, smaller) if isinstance(scaled, int) else (tidy, unit)  # type: ignore[return-value]


def _duration(text: str, start: int, end: int, value: Decimal, unit_word: str) -> DurationMatch:
    settled, unit = _settle(value, _UNIT_OF[unit_word.lower()])
    return DurationMatch(start, end, text[start:end], settled, unit)


def _numeric_durations(text: str, norm: str) -> Iterable[DurationMatch]:
    """A number followed by a unit: ``5日游``, ``18个月``, ``一个半小时``, ``two and a half hours``."""
    for num in _scan(text, norm):
        m = _DURATION_AFTER.match(norm, num.end)
        if m:
            half = Decimal("0.5") if "半" in (m["pre"] or "") or m["post"] else 0
            yield _duration(text, num.start, m.end(), _decimal(num.value) + half, m["unit"])


def _word_durations(text: str, norm: str) -> Iterable[DurationMatch]:
    """Durations without digits: ``半年``, ``半个小时``, ``a week``, ``half an hour``, ``an hour and a half``."""
    for m in _WORD_DURATION.finditer(norm):
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

_KIND_OF = {w: kind for kind, ws in _PEOPLE_WORDS.items() for w in ws}
_COUNT_RIGHT = re.compile(
    rf"\s*(?P<mw>个|位(?![数置于子])|名(?![字单额次])|口(?!人))?\s*"
    rf"(?P<who>{_alt(w for w in _KIND_OF if not w.isascii())}(?![民间份次气生家])"
    rf"|{words_pattern(w for w in _KIND_OF if w.isascii())})?",
    _FLAGS,
)
_COUNT_LEFT = re.compile(r"(?:(?P<pron>我们|咱们|他们|她们|你们|我|咱|你|他|她)|(?P<family>一?家)|(?P<ordinal>第))\s*$")
_BIG_SMALL = re.compile(r"(?P<a>[0-9]{1,2}|[一二两三四五六七八九十])大(?P<c>[0-9]{1,2}|[一二两三四五六七八九十])小(?:孩|朋友)?")
_COUNT_JOIN = re.compile(r"\s*(?:(?<![a-z])(?:and|with|plus)(?![a-z])|[&+,，、和加带跟])?\s*", _FLAGS)


def _count_part(text: str, norm: str, num: NumberMatch) -> CountMatch | None:
    """One number with a people word, measure word or pronoun (``3位``, ``我们三个``, ``一家三口``)."""
    if not isinstance(num.value, int) or num.value <= 0:
        return None
    left = _COUNT_LEFT.search(norm, max(0, num.start - 4), num.start)
    if left and left["ordinal"]:
        return None
    m = _COUNT_RIGHT.match(norm, num.end)
    assert m is not None  # every part of the pattern is optional
    mw, who = m["mw"], m["who"]
    pron, family = bool(left and left["pron"]), bool(left and left["family"])
    if who:
        kind = _KIND_OF[re.sub(r"\s+", " ", who.lower())]
    elif mw in ("位", "名") or (mw == "口" and family) or (pron and (mw == "个" or num.text == "俩")):
        if mw == "个" and _NON_MONEY_UNIT.match(norm, m.end()):
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
    _FLAGS,
)


def _solo(text: str, norm: str) -> Iterable[CountMatch]:
    """``just me``, ``by myself``, ``travelling alone``: one person said without a number."""
    for m in _SOLO.finditer(norm):
        yield CountMatch(m.start(), m.end(), text[m.start() : m.end()], 1, "people")


def find_people_counts(text: str) -> list[CountMatch]:
    """How many people: ``两个人``, ``3位``, ``4 people``, ``two adults``, ``我们三个``, ``一家三口``, ``just me``."""
    norm = normalize_width(text)
    parts = leftmost_longest(p for num in _scan(text, norm) if (p := _count_part(text, norm, num)))
    return leftmost_longest([*_big_small(text, norm), *_solo(text, norm), *_merge_parts(text, norm, parts)])
