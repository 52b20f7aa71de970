"""Proposals and confirmations: how an assistant's suggestion becomes the user's value.

Assistant text never sets a user-owned field, but a question from the assistant ("要黑色的吗？",
"Shall I book MU5101?") proposes the values it mentions, and a user reply that opens with a
plain yes ("好的", "对", "可以", "yes", "sure", "ok") confirms them. Both are decided on the
text alone, deterministically: a proposal is a mention inside a sentence that ends with a
question mark; a confirmation is a yes-word at the very start of the reply, standing alone
(followed by punctuation, a space or the end, after at most a particle such as 啊/吧), so
"要红色" or "okay-ish" confirm nothing, nor does a trailing-off "嗯……" / "ok..." (hesitation).
"""

from __future__ import annotations

import re

YES_ZH = ("好的", "好啊", "好吧", "好", "对的", "对", "是的", "是", "可以", "行", "嗯嗯", "嗯", "没问题", "就这个",
          "就它", "要的", "确认", "订吧", "就这样")
YES_EN = ("yes", "yeah", "yep", "yup", "sure", "ok", "okay", "sounds good", "please do", "go ahead", "correct",
          "that's right", "perfect", "do it", "book it", "confirm", "confirmed")

_YES = re.compile(
    r"\s*(?P<cue>" + "|".join(re.escape(w) for w in sorted(YES_ZH + YES_EN, key=len, reverse=True)) + r")"
    r"(?=[啊呀吧哈嘛的]?(?:$|(?!\.\.)[\s，。！!,.;；~～]))",
    re.IGNORECASE)
_QUESTION = re.compile(r"[^。！!？?\n]*[？?]")


def confirmation(text: str) -> tuple[int, int] | None:
    """Span of the yes-word a reply opens with, or None when it does not open with one."""
    m = _YES.match(text)
    return m.span("cue") if m else None


def question_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every sentence that ends with a question mark."""
    return [m.span() for m in _QUESTION.finditer(text)]
