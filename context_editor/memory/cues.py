"""Fact cues per language, loaded from `rules/<lang>/lexicon/memory.yaml` (word lists are data)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from ..domain.rulepacks import RULES_DIR


@dataclass(frozen=True)
class Cues:
    fact: re.Pattern[str]
    question: re.Pattern[str]


def _alternation(words: list[str], whole_words: bool) -> str:
    body = "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))
    return rf"\b(?:{body})\b" if whole_words else f"(?:{body})"


@lru_cache(maxsize=8)
def load_cues(language: str, rules_dir: Path = RULES_DIR) -> Cues:
    """Compiled cue patterns for `language` ('en' words match whole words; 'zh' as substrings)."""
    path = rules_dir / language / "lexicon" / "memory.yaml"
    if not path.exists():
        path = rules_dir / "en" / "lexicon" / "memory.yaml"
    data = yaml.safe_load(path.read_text("utf-8")) or {}
    whole = data.get("language", language) != "zh"
    facts = [str(w) for group in (data.get("facts") or {}).values() for w in group]
    if whole:
        question = rf"^\s*{_alternation([str(w) for w in data.get('question_starts') or []], True)}|[?？]\s*$"
    else:
        question = rf"{_alternation([str(w) for w in data.get('question_marks') or []], False)}|[?？]\s*$"
    return Cues(re.compile(_alternation(facts, whole), re.IGNORECASE), re.compile(question, re.IGNORECASE))
