"""Enum synonyms declared in the domain file, matched as one regex per field.

Longest synonyms first, so "深空灰" beats "灰"; Latin synonyms need word boundaries so "red"
does not fire inside "reduce", CJK synonyms cannot have them (no spaces in Chinese).

A canonical value also matches as written ("black", "premium economy") unless its synonym
list names it with a leading `!` (`first: ['!first', 头等舱, first class]`): a canonical that
is also a common word ("first", "business") must not fire on its own. Latin phrases of one or
two letters (sizes S, M, XL) match only in the case written, so "it's" is not size S.
"""

from __future__ import annotations

import re
from typing import Iterator

from ..domain import Domain, FieldSpec
from ..domain.versions import PerVersion
from .prefilter import Present

_LATIN = re.compile(r"[A-Za-z0-9]")
EXCLUDE = "!"
SHORT = 2  # Latin phrases this short are case-sensitive
ALL = Present("")  # as `present`: the caller knows a phrase can be in the text (no pre-filter)


def _alternative(phrase: str) -> str:
    body = re.escape(phrase).replace(r"\ ", r"\s+")
    left = r"(?<![A-Za-z0-9'’])" if _LATIN.match(phrase[0]) else ""
    right = r"(?![A-Za-z0-9])" if _LATIN.match(phrase[-1]) else ""
    case = "(?-i:" if len(phrase) <= SHORT and phrase.isascii() else "(?:"
    return case + left + body + right + ")"


def phrases(spec: FieldSpec) -> dict[str, str]:
    """Phrase as written -> canonical value; the first spelling of a phrase wins, excluded ones are left out."""
    out: dict[str, str] = {}
    seen: set[str] = set()
    for canonical, synonyms in spec.synonyms.items():
        excluded = {s[len(EXCLUDE):].lower() for s in synonyms if s.startswith(EXCLUDE)}
        for phrase in [canonical.replace("_", " "), canonical, *synonyms]:
            key = phrase.lower()
            if not phrase.startswith(EXCLUDE) and key not in excluded and key not in seen:
                seen.add(key)
                out[phrase] = canonical
    return out


class EnumMatcher:
    """Finds canonical values of one enum field in text."""

    def __init__(self, spec: FieldSpec):
        written = phrases(spec)
        self.by_phrase = {p.lower(): c for p, c in written.items()}
        ordered = sorted(written, key=lambda p: (-len(p), p.lower()))
        self.pattern = re.compile("|".join(_alternative(p) for p in ordered), re.IGNORECASE) if ordered else None
        self._last: tuple[str, list[tuple[int, int, str, str]]] | None = None

    def matches(self, text: str, present: Present | None = None) -> list[tuple[int, int, str, str]]:
        """`finditer`'s matches as a list, kept for the last text: the extractor and the summary zone
        read the same message with the same matcher (the text's identity is checked, so a stale
        entry is never used; threads only overwrite it)."""
        last = self._last
        if last is not None and last[0] is text:
            return last[1]
        found = list(self.finditer(text, present))
        self._last = (text, found)
        return found

    def finditer(self, text: str, present: Present | None = None) -> Iterator[tuple[int, int, str, str]]:
        """Yield (start, end, matched text, canonical value); `present`: the message's literals, when
        `text` is that message, or ALL when the caller has already pre-filtered."""
        if self.pattern is None or (present is not ALL and not (present or Present(text)).could_match(self.pattern)):
            return  # no phrase can be here: skip the scan
        for m in self.pattern.finditer(text):
            key = " ".join(m.group(0).lower().split())
            yield m.start(), m.end(), m.group(0), self.by_phrase[key]


_compiled: PerVersion[str, dict[str, EnumMatcher]] = PerVersion()  # version hash -> its matchers


def enum_matchers(domain: Domain) -> dict[str, EnumMatcher]:
    """Field -> the matcher of each enum field of `domain`, compiled once per domain version in the
    process and shared by every reader (the extractor of each new editor, the summary zone): the
    version hash covers the document, its gazetteers included, so one version has one vocabulary."""
    return _compiled.get(domain.version_hash,
                         lambda: {name: EnumMatcher(spec) for name, spec in domain.fields.items() if spec.synonyms})
