"""Compaction of older history, by class (seed article 001), derived and never destructive.

- transient: instructions are not compacted at all; they are shown only in their round.
- anchor: already structured as fields in <state>.
- trace: older messages not shown verbatim are distilled *extractively*: only sentences that
  carry a number, an identifier or a term of the action's vocabulary, copied as written (no
  word added, no hedging), each line pointing to its source messages.
- relation: entities (identifiers and values in state) weighted by mentions and links (co-
  occurrence in one message); the top nodes are kept.
Compaction is a pure function of the raw log, so it is atomic and reversible: the log is never
touched, and the same log always compacts to the same lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..model import Message
from .history import ID, words

_SENTENCE = re.compile(r"[^。！？!?；;\n]+[。！？!?；;]?|[^.\n]+(?:\.(?!\d)|$)")
_DIGIT = re.compile(r"\d")
MAX_LINE_CHARS = 240  # longer sentences are not distilled (they would have to be cut)
MAX_LINES = 12
TOP_ENTITIES = 8
MIN_WEIGHT = 1.5


@dataclass(frozen=True)
class DigestLine:
    text: str
    round: int
    sources: tuple[int, ...]  # message indexes


@dataclass(frozen=True)
class Entity:
    name: str
    mentions: int
    links: tuple[str, ...]

    @property
    def weight(self) -> float:
        return self.mentions + 0.5 * len(self.links)


def distil(messages: list[tuple[Message, str]], vocabulary: set[str], shown: frozenset[str] | set[str] = frozenset()) -> list[DigestLine]:
    """Extractive digest: informative sentences of `messages`, verbatim, deduplicated, in order.

    Informative: a number or an identifier, or at least two terms of the action's vocabulary.
    Sentences already visible verbatim elsewhere in the context (`shown` texts) are left out.
    Each message comes with the text the action may see of it (masked, trimmed)."""
    lines: dict[str, list[Any]] = {}
    for m, text in messages:
        if m.role not in ("user", "assistant", "tool"):
            continue
        for s in _SENTENCE.findall(text[:8000]):
            s = s.strip()
            if not s or len(s) > MAX_LINE_CHARS or any(s in t for t in shown):
                continue
            if _DIGIT.search(s) or ID.search(s) or len(words(s) & vocabulary) >= 2:
                entry = lines.setdefault(s, [m.round, []])
                entry[1].append(m.index)
    out = [DigestLine(text, rnd, tuple(src)) for text, (rnd, src) in lines.items()]
    return out[-MAX_LINES:]


def entity_graph(texts: list[str], known_values: list[str]) -> list[Entity]:
    """Identifiers and known values, weighted by mentions and co-mentions; the top nodes."""
    mentions: dict[str, int] = {}
    links: dict[str, set[str]] = {}
    for text in texts:
        found = set(ID.findall(text)) | {v for v in known_values if v and v in text}
        for name in found:
            mentions[name] = mentions.get(name, 0) + 1
            links.setdefault(name, set()).update(found - {name})
    nodes = [Entity(n, mentions[n], tuple(sorted(links[n]))) for n in mentions]
    # A node mentioned once and linked to nothing carries no relation worth the tokens.
    nodes = [e for e in nodes if e.weight >= MIN_WEIGHT]
    return sorted(nodes, key=lambda e: (-e.weight, e.name))[:TOP_ENTITIES]
