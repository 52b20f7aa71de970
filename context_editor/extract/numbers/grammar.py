"""Numeral grammar: what a number looks like, and the look-alikes that are not quantities.

One scanner regex walks the width-normalised text. Its first alternative recognises things that
look numeric but are not quantities and skips over them whole (codes and IDs, calendar dates,
clock times, digit runs after an ID cue, ordinals, words and place names that contain a numeral,
such as 一起, 三亚, 五道口), so no number can start inside them. The remaining alternatives read
English number words, Arabic numbers (``,`` thousands, decimals, ``k``/``m`` and ``万``/``千``
suffixes) and Chinese numerals (converted with cn2an; its exceptions mean "no number").

The ID cues and the numeral-bearing words come from the lexicons (see `lexicon.py`); what is
here is grammar: the shapes of numerals, codes, dates and clock times.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Iterable, Protocol, TypeVar

from .lexicon import FLAGS, Vocabulary, alt, vocabulary, words_pattern


@dataclass(frozen=True, slots=True)
class NumberMatch:
    start: int
    end: int
    text: str
    value: int | float


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


def to_decimal(value: int | float | Decimal) -> Decimal:
    """Exact decimal of a value; floats go through their shortest repr so 1.1 stays 1.1."""
    return Decimal(str(value)) if isinstance(value, float) else Decimal(value)


_FLOAT_MAX = Decimal(sys.float_info.max)


def tidy(value: int | float | Decimal) -> int | float | None:
    """Integral values become ``int`` so ``1.5万`` equals 15000.

    Values a float cannot hold (a 400-digit run) are no quantity anyone wrote: None.
    """
    d = to_decimal(value)
    if not d.is_finite() or abs(d) > _FLOAT_MAX:
        return None
    return int(d) if d == d.to_integral_value() else float(d)


# --------------------------------------------------------------------------- numerals

_ARABIC = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?"
CN_DIGITS = "零〇一二两俩三四五六七八九壹贰叁肆伍陆柒捌玖"
_CN_UNITS = "十拾百佰千仟万亿"
_CN_UNIT_VALUE = {"十": 10, "拾": 10, "百": 100, "佰": 100, "千": 1000, "仟": 1000, "万": 10**4, "亿": 10**8}
_CN_DIGIT_VALUE = {c: i for i, c in enumerate("〇一二三四五六七八九")}
# Single characters are the common case and cost cn2an ~25 µs each; read them directly.
_CN_SINGLE_VALUE = _CN_DIGIT_VALUE | {"零": 0, "两": 2, "俩": 2, "十": 10, "拾": 10}
_LETTER_SUFFIX = {"k": 10**3, "m": 10**6}

# English numerals are grammar (how "two thousand five hundred" composes), not vocabulary.
_EN_ONES = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_EN_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_EN_SCALES = {"hundred": 100, "thousand": 10**3, "million": 10**6, "billion": 10**9}

_EN_DIGIT = alt(w for w, v in _EN_ONES.items() if 1 <= v <= 9)
_EN_SMALL = rf"(?:{alt(_EN_TENS)}(?:[-\s]+{_EN_DIGIT})?|{alt(_EN_ONES)})(?![a-z])"
_EN_SCALE = words_pattern(_EN_SCALES)
_EN_HEAD = rf"(?:(?<![a-z])an?|(?<![0-9.]){_ARABIC})(?=\s+{_EN_SCALE})|(?<![a-z]){_EN_SMALL}"
_EN_NUMBER = rf"(?:{_EN_HEAD})(?:\s+and\s+a\s+half(?![a-z]))?(?:\s+{_EN_SCALE}(?:(?:\s+and)?\s+{_EN_SMALL})?)*"
_AR_NUMBER = (
    rf"(?<![0-9#])(?<![0-9]\.){_ARABIC}"
    rf"(?:(?:[{_CN_UNITS}]+[0-9{CN_DIGITS}]?)+|[km](?![a-z]))?(?![0-9])(?!\.[0-9])"
)
_CN_NUMBER = rf"[{CN_DIGITS}十拾][{CN_DIGITS}{_CN_UNITS}]*(?:点[{CN_DIGITS}]+)?"

# --------------------------------------------------------------------------- look-alikes that are not quantities

# Month / day / hour numerals; also used by the dates module.
SMALL_NUMERAL = r"(?:[0-9]{1,2}|[零〇一二两三四五六七八九十]{1,3})"
_CODE_SHAPE = (
    # "a letter, later a digit" written deterministically (first letter, then letters up to the
    # first digit): the ambiguous [a-z0-9_-]*[a-z][a-z0-9_-]*[0-9] was quadratic on a run of letters.
    r"(?=[0-9_-]*[a-z][a-z_-]*[0-9])[a-z0-9]+(?:[-_][a-z0-9]+)*"
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
_ORDINAL = r"(?<![0-9])[0-9]+(?:st|nd|rd|th)(?![a-z])"


@functools.lru_cache(maxsize=2)
def _scanner(vocab: Vocabulary) -> re.Pattern[str]:
    """The scanner for a vocabulary: skip look-alikes, read English, Arabic, Chinese numerals."""
    code = rf"(?<![a-z0-9_-])(?!{alt(vocab.currency_codes)}[0-9]){_CODE_SHAPE}"
    # A digit run right after an ID cue names an identifier, not a quantity.
    ident = rf"{alt(vocab.id_cues)}(?![a-z])\s*(?:是|为|:)?\s*#?[0-9]+(?:[-\s][0-9]+)*"
    idiom = rf"{alt(vocab.not_numbers)}|十分(?!钟)"
    # Where a match can start: a digit, '#', a Chinese numeral, weekday, idiom or ID-cue character,
    # or the first letter of a word.  Failing fast elsewhere makes the scan several times faster.
    firsts = re.escape("".join(sorted({w[0] for w in (*vocab.not_numbers, *vocab.id_cues) if not w.isascii()})))
    start = rf"(?:(?=[0-9#{CN_DIGITS}{_CN_UNITS}周星礼{firsts}])|(?<![a-z])(?=[a-z]))"
    return re.compile(
        rf"{start}(?:(?P<skip>{code}|{ident}|{_ORDINAL}|{_SLASH_DATE}|{_CN_DATE}|{_CLOCK}|{idiom})"
        rf"|(?P<en>{_EN_NUMBER})|(?P<ar>{_AR_NUMBER})|(?P<cn>{_CN_NUMBER}))",
        FLAGS,
    )


_SCALED_ARABIC = re.compile(rf"({_ARABIC})([{_CN_UNITS}]+)")
_EN_TOKEN = re.compile(r"[0-9][0-9,]*(?:\.[0-9]+)?|[a-z]+", FLAGS)


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
            total += (current or Decimal(1)) * _EN_SCALES[tok]
            current = Decimal(0)
        elif tok in ("a", "an") and not current:
            current = Decimal(1)
    return tidy(total + current)


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
    return tidy(value)


@functools.cache
def _cn2an() -> Callable[[str, str], Any]:
    """cn2an's converter, imported on first use: the package builds all of its converters at import
    (~120 ms), which only a process that meets a Chinese numeral should pay."""
    import cn2an

    convert: Callable[[str, str], Any] = cn2an.cn2an
    return convert


@functools.lru_cache(maxsize=4096)
def _cn_value(s: str) -> int | float | None:
    """Chinese or mixed numerals via cn2an, which raises (ValueError, KeyError...) on odd shapes."""
    if s in _CN_SINGLE_VALUE:
        return _CN_SINGLE_VALUE[s]
    if _is_approximate_pair(s):
        return None
    try:
        return tidy(_cn2an()(s.replace("俩", "两").replace(",", ""), "smart"))
    except Exception:  # cn2an's failure modes are not a documented exception family
        return _scaled_arabic_value(s)


def _ar_value(s: str) -> int | float | None:
    """Arabic digits, optionally with a ``k``/``m`` suffix or Chinese units (``3千``, ``2万5``)."""
    plain = s.replace(",", "")
    if plain.isdigit() and len(plain) <= 15:  # the common case, exact in a float too: no Decimal round trip
        return int(plain)
    multiplier = _LETTER_SUFFIX.get(plain[-1].lower())
    if multiplier:
        return tidy(Decimal(plain[:-1]) * multiplier)
    if any(c in _CN_UNITS for c in plain):
        return _cn_value(plain)
    return tidy(Decimal(plain))


_VALUE_OF: dict[str, Callable[[str], int | float | None]] = {"en": _en_value, "ar": _ar_value, "cn": _cn_value}


def scan(text: str, norm: str) -> list[NumberMatch]:
    """Number expressions of ``norm`` (the width-normalised ``text``), with spans into ``text``."""
    found = []
    for m in _scanner(vocabulary()).finditer(norm):
        if m.lastgroup == "skip" or m.lastgroup is None:
            continue
        try:
            value = _VALUE_OF[m.lastgroup](m.group())
        except ArithmeticError:  # decimal signals on digit runs beyond its exponent range
            value = None
        if value is not None:
            found.append(NumberMatch(m.start(), m.end(), text[m.start() : m.end()], value))
    return found


def find_numbers(text: str) -> list[NumberMatch]:
    """All number expressions, left to right, non-overlapping, each the longest reading."""
    return scan(text, normalize_width(text))


def parse_number(text: str) -> int | float | None:
    """The value of ``text`` if the whole string (bar surrounding spaces) is one number."""
    stripped = text.strip()
    found = find_numbers(stripped)
    if len(found) == 1 and found[0].start == 0 and found[0].end == len(stripped):
        return found[0].value
    return None
