"""Negation scope: does a cue ("不要", "not", "no") govern a mention?

A cue governs a mention when it stands before it in the same clause (no clause punctuation in
between) and close enough, or when a short refusal follows it directly ("红眼航班也不行",
"layovers are out"). The A-not-A question forms ("要不要", "想不想", "能不能") ask, they do
not negate, so their 不 is no cue. This is deliberately simple and deterministic; `mentions: negated`
fields (exclusion lists) rely on it as much as enum fields that must ignore "不要红色".
"""

from __future__ import annotations

import re

_CUES = re.compile(
    r"(?<!要)不要|(?<!想)不想要|(?<!想)不想|(?<!用)不用|(?<!需)不需要|别|(?<!是)不是|除了|(?<!有)没有|不喜欢|不考虑|避开|排除|拒绝|"
    r"(?<!能)不能|不坐|不买|不订|讨厌|受不了|去掉|删掉|拿掉|"
    r"\b(?:no|not|don'?t|do not|doesn'?t|won'?t|without|except|avoid|never|hate|skip|can'?t stand|instead of|isn'?t|aren'?t|rather than|no more|pass on|drop|remove|take out|get rid of)\b",
    re.IGNORECASE,
)
# Refusals that follow the mention they negate ("红眼航班也不行", "layovers are out"). Not 不要 or
# 算了: "要黑色不要白色" wants black, "买黑色的算了" settles on black.
_AFTER = re.compile(
    r"\s*(?:的)?(?:也|就|都)?(?:不行|免了|不考虑|不坐|不可以|不接受|不能接受)"
    r"|\s+(?:is|are)\s+(?:out|not ok(?:ay)?|a no(?:-go)?|off the table)\b",
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(r"[，。,.!?！？；;:：\n]|\bbut\b|但是|可是|而是|不过")
MAX_GAP = 16  # characters between the end of the cue and the mention
MAX_GAP_LATIN = 24  # English words are longer: "skip anything with a stopover"


def is_negated(text: str, start: int, end: int | None = None) -> bool:
    """True when a negation cue governs the mention at `start` (and, given its `end`, a cue right after it)."""
    if end is not None and _AFTER.match(text, end):
        return True
    window_start = max(0, start - MAX_GAP_LATIN - 12)
    window = text[window_start:start]
    clause = _CLAUSE_END.split(window)[-1]
    offset = start - len(clause)
    limit = MAX_GAP_LATIN if clause.isascii() else MAX_GAP
    for cue in _CUES.finditer(clause):
        if start - (offset + cue.end()) <= limit:
            return True
    return False
