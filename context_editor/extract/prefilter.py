"""The literal pre-filter: which of the strings a pattern's every match must contain a message holds.

`regexcheck.required_literals` says, for a rule or enum pattern, the strings one of which every
match contains. A message that holds none of them cannot match, so its scan is skipped: a hostile
run of letters, digits or punctuation costs a substring search instead of a regex pass per rule.
Rules share cue words, so each literal is looked up once per message.
"""

from __future__ import annotations

import re

from ..domain.regexcheck import required_literals


class Present:
    """The literals one message holds (case-folded), each looked up at most once."""

    def __init__(self, text: str):
        self.folded = text.casefold()
        self._seen: dict[str, bool] = {}

    def could_match(self, pattern: re.Pattern[str]) -> bool:
        literals = required_literals(pattern)
        return literals is None or any(self._holds(lit) for lit in literals)

    def _holds(self, literal: str) -> bool:
        hit = self._seen.get(literal)
        if hit is None:
            hit = self._seen[literal] = literal in self.folded
        return hit
