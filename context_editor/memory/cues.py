"""Fact cues per language: the `memory:` section of `rules/<lang>/lexicon.yaml` (word lists are data)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..lang.lexicon import alternation, lexicon

FALLBACK = "en"


@dataclass(frozen=True)
class Cues:
    fact: re.Pattern[str]
    question: re.Pattern[str]


@lru_cache(maxsize=16)
def load_cues(language: str) -> Cues:
    """Compiled cue patterns of `language` (falling back to English when it has none)."""
    per_language = lexicon().per_language
    data = (per_language.get(language) or {}).get("memory") or (per_language.get(FALLBACK) or {}).get("memory") or {}
    whole = data.get("match", "words") == "words"
    facts = [str(w) for group in (data.get("facts") or {}).values() for w in group]
    starts = [str(w) for w in data.get("question_starts") or []]
    marks = [str(w) for w in data.get("question_marks") or []]
    question = "|".join(p for p in (rf"^\s*{alternation(starts, True)}" if starts else "",
                                    alternation(marks, False) if marks else "", r"[?？]\s*$") if p)
    return Cues(re.compile(alternation(facts, whole), re.IGNORECASE), re.compile(question, re.IGNORECASE))
