"""Dialogue cues: the word lists of `rules/<lang>/dialogue.yaml`, compiled once.

They say how a reply accepts, declines or picks from an offer ("sounds good", "不用了", "the
second one"), which assistant sentences offer something ("How about …", "为您推荐 …"), which
questions ask about no field ("Anything else?") and what kind of value a question asks for
("what time" -> a time). All of it is data: a language is added by adding a file, and the
domain version hash covers the files (see `domain.rulepacks.dialogue_lexicon_texts`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from ..domain.rulepacks import RULES_DIR

LEXICON_FILE = "dialogue.yaml"
# After a cue: at most a particle, then punctuation, a space or the end ("好啊", "yes,"), never more
# letters ("okay-ish") or a trailing-off "ok..." / "嗯……" (hesitation is no answer).
_STANDS_ALONE = r"(?=[啊呀吧哈嘛的了]?(?:$|(?!\.\.|……)[\s，。！!,.;；~～…]))"


def _alternation(words: list[str]) -> str:
    out = []
    for w in sorted(set(words), key=len, reverse=True):
        body = re.escape(w).replace(r"\ ", r"\s+")
        out.append((r"(?<![A-Za-z])" + body) if w[:1].isascii() and w[:1].isalpha() else body)
    return "|".join(out)


def _opening(words: list[str]) -> re.Pattern[str] | None:
    """A cue that opens the text and stands alone."""
    return re.compile(r"\s*(?P<cue>" + _alternation(words) + r")" + _STANDS_ALONE, re.IGNORECASE) if words else None


def _anywhere(words: list[str]) -> re.Pattern[str] | None:
    if not words:
        return None
    return re.compile(r"(?:" + _alternation(words) + r")(?![A-Za-z])", re.IGNORECASE)


@dataclass(frozen=True)
class Cues:
    """Compiled cues of all languages together (a reply may mix them: "OK，就这个")."""

    accept: re.Pattern[str] | None
    decline: re.Pattern[str] | None
    ordinals: tuple[tuple[re.Pattern[str], int], ...]
    closing: re.Pattern[str] | None
    offer: re.Pattern[str] | None
    kinds: tuple[tuple[str, re.Pattern[str]], ...]
    stopwords: frozenset[str]
    lead: re.Pattern[str] | None  # a filler opening an answer ("in", "I'd like", "我想")
    trail: re.Pattern[str] | None  # a filler closing it ("please", "吧")

    def opens_with(self, pattern: re.Pattern[str] | None, text: str) -> tuple[int, int] | None:
        m = pattern.match(text) if pattern else None
        return m.span("cue") if m else None

    def ordinal(self, text: str) -> tuple[int, int, int] | None:
        """(n, start, end) of the first ordinal pick in `text` (n = -1: the last one)."""
        best = None
        for pattern, n in self.ordinals:
            m = pattern.search(text)
            if m and (best is None or m.start() < best[1]):
                best = (n, m.start(), m.end())
        return best

    def question_kinds(self, text: str) -> set[str]:
        return {kind for kind, pattern in self.kinds if pattern.search(text)}

    def strip_fillers(self, text: str) -> tuple[int, int]:
        """The span of `text` left once leading and trailing fillers and punctuation are cut."""
        start, end = 0, len(text)
        while start < end:
            m = _EDGE.match(text, start, end) or (self.lead.match(text, start, end) if self.lead else None)
            if not m or m.end() == start:
                break
            start = m.end()
        while start < end:
            m = _EDGE_END.search(text, start, end) or (self.trail.search(text, start, end) if self.trail else None)
            if not m or m.start() == end:
                break
            end = m.start()
        return start, end


_EDGE = re.compile(r"[\s,，.。!！?？;；~～、:：]+")
_EDGE_END = re.compile(r"[\s,，.。!！?？;；~～、:：]+$")


def _read(rules_dir: Path) -> list[dict]:
    out = []
    for path in sorted(rules_dir.glob(f"*/{LEXICON_FILE}")):
        data = yaml.load(path.read_text("utf-8"), Loader=yaml.BaseLoader) or {}  # words stay words: `no` is not False
        if isinstance(data, dict):
            out.append(data)
    return out


@lru_cache(maxsize=2)
def load_cues(rules_dir: Path = RULES_DIR) -> Cues:
    docs = _read(rules_dir)

    def words(key: str) -> list[str]:
        return [str(w) for d in docs for w in (d.get(key) or [])]

    ordinals: dict[int, list[str]] = {}
    kinds: dict[str, list[str]] = {}
    for d in docs:
        for n, phrases in (d.get("ordinals") or {}).items():
            ordinals.setdefault(int(n), []).extend(str(p) for p in phrases)
        for kind, phrases in (d.get("question_kinds") or {}).items():
            kinds.setdefault(str(kind), []).extend(str(p) for p in phrases)
    fillers = words("fillers")
    return Cues(
        accept=_opening(words("accept")), decline=_opening(words("decline")),
        ordinals=tuple((p, n) for n, ws in sorted(ordinals.items()) if (p := _anywhere(ws)) is not None),
        closing=_anywhere(words("closing")), offer=_anywhere(words("offer")),
        kinds=tuple((k, p) for k, ws in sorted(kinds.items()) if (p := _anywhere(ws)) is not None),
        stopwords=frozenset(w.lower() for w in words("stopwords")),
        lead=re.compile(r"(?:" + _alternation(fillers) + r")(?![A-Za-z])", re.IGNORECASE) if fillers else None,
        trail=re.compile(r"(?<![A-Za-z])(?:" + _alternation(fillers) + r")$", re.IGNORECASE) if fillers else None)
