"""Proposals and confirmations: how an assistant's suggestion becomes the user's value.

Assistant text never sets a user-owned field, but a question from the assistant ("要黑色的吗？",
"Shall I book MU5101?") proposes the values it mentions, and a user reply that opens with a
plain yes ("好的", "对", "可以", "yes", "sure", "ok"; the `yes_words` of the lexicons) confirms them. Both are decided on the
text alone, deterministically: a proposal is a mention inside a sentence that ends with a
question mark; a confirmation is a yes-word at the very start of the reply, standing alone
(followed by punctuation, a space or the end, after at most a particle such as 啊/吧), so
"要红色" or "okay-ish" confirm nothing, nor does a trailing-off "嗯……" / "ok..." (hesitation).
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..lang import Lexicon, lexicon



@lru_cache(maxsize=2)
def _yes(lex: Lexicon) -> re.Pattern[str]:
    """A yes-word of any registered language (`yes_words` in the lexicons), standing alone."""
    words = "|".join(re.escape(w) for w in sorted(lex.words("yes_words"), key=len, reverse=True))
    particles = "".join(re.escape(p) for p in lex.words("yes_particles"))
    return re.compile(
        rf"\s*(?P<cue>{words})(?=[{particles}]?(?:$|(?!\.\.)[\s，。！!,.;；~～]))" if particles
        else rf"\s*(?P<cue>{words})(?=(?:$|(?!\.\.)[\s，。！!,.;；~～]))",
        re.IGNORECASE)


_QUESTION = re.compile(r"[^。！!？?\n]*[？?]")


def confirmation(text: str) -> tuple[int, int] | None:
    """Span of the yes-word a reply opens with, or None when it does not open with one."""
    m = _yes(lexicon()).match(text)
    return m.span("cue") if m else None


def question_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every sentence that ends with a question mark."""
    return [m.span() for m in _QUESTION.finditer(text)]
