"""The interval a stated constraint or value covers: "100-150元", "4.5分以上", "under 50", "5 stars".

A constraint the user states as a range or a bound is only *met or not* by a value an assistant
offers ("人均消费是119元" against "50-100元"); `interval` reads both the same way and `meets` says
whether the offered one lies inside. The unit is whatever follows the number ("元", "分", "hours"):
the two sides are compared as they are written, so a caller compares values of one field only.
Range words and bound cues are the lexicons' (`range`, `bound/before`, `bound/after`); nothing here
is specific to a dataset.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

from .grammar import find_numbers, normalize_width
from .lexicon import Vocabulary, alt, vocabulary

_UNIT = r"[^\d\s,，。;；]{0,4}?"  # the unit a number carries before a bound or range word ("元", "小时", "stars")


@lru_cache(maxsize=2)
def _patterns(v: Vocabulary) -> tuple[re.Pattern[str], dict[str, re.Pattern[str]], dict[str, re.Pattern[str]]]:
    joiner = re.compile(r"\s*" + _UNIT + r"\s*(?:[-~–—]|" + alt(v.range) + r")\s*$", re.IGNORECASE)
    after = {b: re.compile(r"^\s*" + _UNIT + r"\s*" + alt(words), re.IGNORECASE) for b, words in v.bound_after.items() if words}
    # a currency sign may stand between the cue and the number ("under $50")
    before = {b: re.compile(alt(words) + r"\s*(?:[^\w\s]\s*)?$", re.IGNORECASE) for b, words in v.bound_before.items() if words}
    return joiner, after, before


def interval(text: str) -> tuple[float, float] | None:
    """(low, high) of the first number of `text` with its range or bound; None without a number.
    "50-100元" -> (50, 100); "4.5分以上" / "at least 4" -> (4.5, inf); "100元以下" -> (-inf, 100);
    "5分" -> (5, 5)."""
    norm = normalize_width(text)
    nums = find_numbers(norm)
    if not nums:
        return None
    joiner, after, before = _patterns(vocabulary())
    first = nums[0]
    if len(nums) > 1 and joiner.search(norm[first.end:nums[1].start]):
        low, high = sorted((float(first.value), float(nums[1].value)))
        return low, high
    value = float(first.value)
    rest, lead = norm[first.end:], norm[:first.start]
    if after.get("min") and after["min"].search(rest) or before.get("min") and before["min"].search(lead):
        return value, math.inf
    if after.get("max") and after["max"].search(rest) or before.get("max") and before["max"].search(lead):
        return -math.inf, value
    return value, value


def meets(constraint: str, offered: str) -> bool | None:
    """Whether the value `offered` lies within `constraint`; None when either says no number."""
    want, got = interval(constraint), interval(offered)
    if want is None or got is None:
        return None
    return want[0] <= got[0] and got[1] <= want[1]
