"""The literal pre-filter: which of the strings a pattern's every match must contain a message holds.

`regexcheck.required_literals` says, for a rule or enum pattern, the strings one of which every
match contains. A message that holds none of them cannot match, so its scan is skipped: a hostile
run of letters, digits or punctuation costs a substring search instead of a regex pass per rule.

Gated by script (the language packs): a literal with a Latin letter cannot be in a message
without one, nor a literal with a CJK character in a message without one. So a pattern's
literals are grouped by the script they need, and a message looks only in the groups of the
scripts it holds: a Chinese message skips the English pack's cues and the English synonyms of
every enum without a lookup, an English one the Chinese. Mixed text holds both scripts and
looks in both groups. It is exact: a skipped group could not have been found.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ..domain.regexcheck import required_literals

_LATIN = re.compile(r"[a-z]")  # in case-folded text: a Latin letter (the folded form of every ASCII letter)
FEW = 4  # up to this many literals are looked up one by one (shared across patterns); more, in one pass
_CJK = re.compile(r"[\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
                  r"\U00020000-\U0003ffff]")


class Present:
    """The scripts one message holds, and the literals it holds (case-folded), each looked up at most once."""

    def __init__(self, text: str):
        self.folded = text.casefold()
        self.latin = _LATIN.search(self.folded) is not None
        self.cjk = _CJK.search(self.folded) is not None
        self._seen: dict[str, bool] = {}

    def could_match(self, pattern: re.Pattern[str]) -> bool:
        groups = _groups(pattern.pattern, pattern.flags)  # keyed by the source: a Pattern hashes its whole compiled code
        if groups is None:
            return True
        for script, literals, search in groups:
            if script is None or (self.latin if script == "latin" else self.cjk):
                if search is not None:  # many literals: one pass over the text
                    if search(self.folded):
                        return True
                elif any(self._holds(lit) for lit in literals):
                    return True
        return False

    def _holds(self, literal: str) -> bool:
        hit = self._seen.get(literal)
        if hit is None:
            hit = self._seen[literal] = literal in self.folded
        return hit


@lru_cache(maxsize=4096)
def _groups(source: str, flags: int) -> tuple[tuple[str | None, tuple[str, ...], Any], ...] | None:
    """A pattern's required literals by the script they need ("latin", "cjk", None: any)."""
    literals = required_literals(re.compile(source, flags))
    if literals is None:
        return None
    by_script: dict[str | None, list[str]] = {}
    for lit in sorted(literals):
        script = "latin" if _LATIN.search(lit) else "cjk" if _CJK.search(lit) else None
        by_script.setdefault(script, []).append(lit)
    return tuple((script, tuple(lits), _alternation(lits).search if len(lits) > FEW else None)
                 for script, lits in by_script.items())


def _alternation(literals: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(lit) for lit in sorted(literals, key=len, reverse=True)))
