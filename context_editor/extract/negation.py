"""Negation scope: does a cue ("不要", "not", "no") govern a mention?

A cue governs a mention when it stands before it in the same clause (no clause punctuation in
between) and close enough, or when a short refusal follows it directly ("红眼航班也不行",
"layovers are out"). The A-not-A question forms ("要不要", "想不想", "能不能") ask, they do
not negate, so their 不 is no cue. The cue words are the `negation` sections of the lexicons. This is deliberately
simple and deterministic; `mentions: negated`
fields (exclusion lists) rely on it as much as enum fields that must ignore "不要红色".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..lang import Lexicon, lexicon



@dataclass(frozen=True)
class _Cues:
    before: re.Pattern[str]  # cues that negate what follows them in the clause
    questions: tuple[str, ...]  # A-not-A question forms: their trailing cue asks, it does not negate
    after: re.Pattern[str]  # refusals right after the mention
    clause_end: re.Pattern[str]


def _words(words: list[str]) -> str:
    """Literal alternation, longest first; Latin words must stand as whole words."""
    return "|".join(rf"\b{re.escape(w)}\b" if w.isascii() else re.escape(w) for w in sorted(words, key=len, reverse=True))


@lru_cache(maxsize=2)
def _cues(lex: Lexicon) -> _Cues:
    """The negation section of the lexicons, compiled."""
    particles = "".join(re.escape(p) for p in lex.words("negation/after_particles"))
    after = [w for w in lex.words("negation/after")]
    zh_after, en_after = [w for w in after if not w.isascii()], [w for w in after if w.isascii()]
    verbs = _words(lex.words("negation/after_verbs"))
    return _Cues(
        before=re.compile(_words(lex.words("negation/before")), re.IGNORECASE),
        questions=tuple(lex.words("negation/questions")),
        after=re.compile(
            rf"\s*[{particles}]{{0,2}}(?:{_words(zh_after)})" + (rf"|\s+(?:{verbs})\s+(?:{_words(en_after)})" if verbs else ""),
            re.IGNORECASE),
        clause_end=re.compile(rf"[，。,.!?！？；;:：\n]|{_words(lex.words('negation/clause_breaks'))}"),
    )


def _asks(clause: str, cue: re.Match[str], questions: tuple[str, ...]) -> bool:
    """The cue ends an A-not-A question form ("要不要"): it asks, it does not negate."""
    return any(clause.endswith(q, 0, cue.end()) and q.endswith(cue.group()) for q in questions)


MAX_GAP = 16  # characters between the end of the cue and the mention
MAX_GAP_LATIN = 24  # English words are longer: "skip anything with a stopover"


def is_negated(text: str, start: int, end: int | None = None) -> bool:
    """True when a negation cue governs the mention at `start` (and, given its `end`, a cue right after it)."""
    cues = _cues(lexicon())
    if end is not None and cues.after.match(text, end):
        return True
    window_start = max(0, start - MAX_GAP_LATIN - 12)
    window = text[window_start:start]
    clause = cues.clause_end.split(window)[-1]
    offset = start - len(clause)
    limit = MAX_GAP_LATIN if clause.isascii() else MAX_GAP
    for cue in cues.before.finditer(clause):
        if start - (offset + cue.end()) <= limit and not _asks(clause, cue, cues.questions):
            return True
    return False
