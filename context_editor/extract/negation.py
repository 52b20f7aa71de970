"""Negation scope: does a cue ("不要", "not", "no") govern a mention?

A cue governs a mention when it stands before it in the same clause (no clause punctuation in
between) and close enough. This is deliberately simple and deterministic; `mentions: negated`
fields (exclusion lists) rely on it as much as enum fields that must ignore "不要红色".
"""

from __future__ import annotations

import re

_CUES = re.compile(
    r"不要|不想要|不想|不用|不需要|别|(?<!是)不是|除了|(?<!有)没有|不喜欢|不考虑|避开|排除|拒绝|不能|不坐|不买|不订|"
    r"\b(?:no|not|don'?t|do not|doesn'?t|won'?t|without|except|avoid|never|isn'?t|aren'?t|rather than|no more)\b",
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(r"[，。,.!?！？；;:：\n]|\bbut\b|但是|可是|而是|不过")
MAX_GAP = 16  # characters between the end of the cue and the mention


def is_negated(text: str, start: int) -> bool:
    """True when a negation cue governs the mention starting at `start`."""
    window_start = max(0, start - MAX_GAP - 12)
    window = text[window_start:start]
    clause = _CLAUSE_END.split(window)[-1]
    offset = start - len(clause)
    for cue in _CUES.finditer(clause):
        if start - (offset + cue.end()) <= MAX_GAP:
            return True
    return False
