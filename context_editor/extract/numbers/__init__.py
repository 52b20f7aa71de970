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
* words and place names that merely contain a numeral (``一起``, ``万一``, ``十分``, ``三亚``,
  ``五道口``), listed in the lexicons.

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

Layout: ``lexicon`` turns the word lists of ``rules/<lang>/lexicon.yaml`` into lookups and regex
fragments; ``grammar`` holds the numeral grammar and the scanner; ``finders`` reads money,
percents, durations and people counts around the scanned numbers. ``normalize_width``,
``leftmost_longest``, ``words_pattern`` and the ``SMALL_NUMERAL`` / ``CN_CLOCK_MINUTE`` /
``NOT_A_DAY`` fragments are shared with the dates module.
"""

from __future__ import annotations

from .finders import (
    CountMatch,
    DurationMatch,
    MoneyMatch,
    PercentMatch,
    duration_in,
    find_durations,
    find_money,
    find_people_counts,
    find_percents,
    joins_range,
)
from .grammar import (
    CN_CLOCK_MINUTE,
    NOT_A_DAY,
    SMALL_NUMERAL,
    NumberMatch,
    find_numbers,
    leftmost_longest,
    normalize_width,
    parse_number,
)
from .lexicon import alt, words_pattern

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
    "joins_range",
    "normalize_width",
    "leftmost_longest",
    "alt",
    "words_pattern",
    "SMALL_NUMERAL",
    "NOT_A_DAY",
    "CN_CLOCK_MINUTE",
]
