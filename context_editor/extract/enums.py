"""Enum synonyms declared in the domain file, matched as one regex per field.

Longest synonyms first, so "深空灰" beats "灰"; Latin synonyms need word boundaries so "red"
does not fire inside "reduce", CJK synonyms cannot have them (no spaces in Chinese).
"""

from __future__ import annotations

import re

from ..domain import FieldSpec

_LATIN = re.compile(r"[A-Za-z0-9]")


def _alternative(phrase: str) -> str:
    body = re.escape(phrase).replace(r"\ ", r"\s+")
    left = r"(?<![A-Za-z0-9])" if _LATIN.match(phrase[0]) else ""
    right = r"(?![A-Za-z0-9])" if _LATIN.match(phrase[-1]) else ""
    return left + body + right


class EnumMatcher:
    """Finds canonical values of one enum field in text."""

    def __init__(self, spec: FieldSpec):
        self.by_phrase: dict[str, str] = {}
        for canonical, phrases in spec.synonyms.items():
            for phrase in [canonical.replace("_", " "), canonical, *phrases]:
                self.by_phrase.setdefault(phrase.lower(), canonical)
        ordered = sorted(self.by_phrase, key=lambda p: (-len(p), p))
        self.pattern = re.compile("|".join(_alternative(p) for p in ordered), re.IGNORECASE) if ordered else None

    def finditer(self, text: str):
        """Yield (start, end, matched text, canonical value)."""
        if self.pattern is None:
            return
        for m in self.pattern.finditer(text):
            key = " ".join(m.group(0).lower().split())
            yield m.start(), m.end(), m.group(0), self.by_phrase.get(key) or self.by_phrase[m.group(0).lower()]
