"""Language detection driven by the registered languages' `detect:` sections.

A lexicon's `detect:` may give a `script` (a regex character class; the language with most
characters of its script wins, so any CJK ideograph makes text Chinese) and `words` (marker
words, for languages sharing the Latin script); one language says `fallback: true` (English).
With only zh and en registered this is exactly "zh when the text contains CJK ideographs".
"""

from __future__ import annotations

import re
from functools import lru_cache

from .lexicon import Lexicon, alternation, lexicon

SAMPLE = 2000  # characters looked at: a language is decided by a message's opening


@lru_cache(maxsize=1)
def _detectors(lex: Lexicon) -> tuple[list[tuple[str, re.Pattern[str]]], list[tuple[str, re.Pattern[str]]], str]:
    scripts, words, fallback = [], [], "en"
    for code, data in lex.items():
        spec = data.get("detect") or {}
        if spec.get("script"):
            scripts.append((code, re.compile(spec["script"])))
        if spec.get("words"):
            words.append((code, re.compile(rf"(?<![^\W\d_]){alternation(spec['words'])}(?![^\W\d_])", re.IGNORECASE)))
        if spec.get("fallback"):
            fallback = code
    return scripts, words, fallback


def detect_language(text: str) -> str:
    """The registered language `text` is most likely in (by script, then by marker words)."""
    sample = text[:SAMPLE]
    scripts, words, fallback = _detectors(lexicon())
    for found in (scripts, words):
        if len(found) == 1:  # one candidate: whether it occurs at all decides (no count needed)
            if found[0][1].search(sample):
                return found[0][0]
            continue
        counts = [(len(p.findall(sample)), code) for code, p in found]
        best = max(counts, default=(0, fallback))
        if best[0]:
            return best[1]
    return fallback
