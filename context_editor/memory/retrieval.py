"""Retrieval: lexical search over all of a session's raw messages, so an old message the action
needs comes back into the context even when it lies far before the loaded window.

- Each message is indexed as it arrives (`document`): its terms (Latin words, CJK character
  bigrams: the same units the history ranking uses, so Chinese needs no word segmenter in any
  store) and its metadata: role, round, tool name, and the fields its edits set. The index is
  derived data in the store (SQLite FTS5, PostgreSQL tsvector + GIN, an in-Python BM25 index
  for memory://), rebuilt from the log at any time.
- A render's query is the latest user turn, stop words left out, or the action's vocabulary (its
  name, fields, synonyms, current values) when that turn has no search terms; the filter admits
  user, assistant and tool messages older than the loaded window. The hits compete in the ranked history with the reason
  `retrieved` (see `inject.history.select_history`).
- Dense re-ranking is an interface (`Embedder`): a deterministic double here for tests, and a
  real model in `memory.minilm` (all-MiniLM-L6-v2 with numpy, the [embed] extra).
"""

from __future__ import annotations

import hashlib
import math
from functools import lru_cache
from typing import Protocol

from ..domain import ActionSpec, Domain
from ..inject.history import action_vocabulary, terms, tool_text
from ..lang.lexicon import lexicon
from ..model import Edit, Message, SearchDoc, SearchFilter, State

RETRIEVE_K = 6  # retrieved messages offered to one render's history
ROLES = ("user", "assistant", "tool")
MAX_DOC_CHARS = 8000  # what is indexed of one message (a 10 MB tool output is not a document)


def document(domain: Domain, msg: Message, edits: list[Edit]) -> SearchDoc | None:
    """How the index holds one message (None: not searchable: system messages, empty text)."""
    if msg.role not in ROLES:
        return None
    text = tool_text(domain, msg) if msg.role == "tool" else msg.content
    words = terms(text[:MAX_DOC_CHARS])
    if not words:
        return None
    fields = tuple(sorted({e.field for e in edits if e.field and e.op == "set"}))
    return SearchDoc(msg.index, msg.round, msg.role, msg.name if msg.role == "tool" else None, fields, " ".join(words))


@lru_cache(maxsize=1)
def stopwords() -> frozenset[str]:
    """Question words and fillers of every language (the lexicon's `dialogue/stopwords`), as terms."""
    return frozenset(t for w in lexicon().words("dialogue/stopwords") for t in terms(w))


def action_query(domain: Domain, action: ActionSpec, state: State, latest: str | None) -> list[str]:
    """The terms a render searches with: the latest user turn's (what was just asked), stop words
    left out; when it has none ("ok, thanks"), the action's vocabulary (its name, fields,
    synonyms, current values). Mixing the two in one ranked query lets the many vocabulary terms
    outweigh the question: a sentence about flights outranks the one the user asked about."""
    stop = stopwords()
    asked = [t for t in dict.fromkeys(terms(latest or "")) if t not in stop and len(t) > 1]
    return asked or sorted(t for t in action_vocabulary(domain, action, state) if t not in stop and len(t) > 1)


def older_than(window_from: int) -> SearchFilter:
    """The render's filter: the roles a context shows, rounds before the loaded window."""
    return SearchFilter(roles=ROLES, rounds=(0, window_from - 1))


class Embedder(Protocol):
    """Dense retrieval's extension point: texts to vectors of one dimension (e.g. a small local
    sentence model behind an extra). Ranking is by cosine similarity (`rank_dense`)."""

    dimensions: int

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class HashingEmbedder:
    """A deterministic stand-in for a sentence model: each term hashed into one of `dimensions`
    buckets, the vector normalised. It finds shared terms, not meaning: for tests and as a floor."""

    def __init__(self, dimensions: int = 256):
        self.dimensions = dimensions

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            v = [0.0] * self.dimensions
            for t in terms(text):
                v[int(hashlib.blake2b(t.encode("utf-8"), digest_size=4).hexdigest(), 16) % self.dimensions] += 1.0
            norm = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([x / norm for x in v])
        return out


def rank_dense(embedder: Embedder, query: str, messages: list[Message], limit: int) -> list[tuple[int, float]]:
    """Messages by cosine similarity to the query, as (message index, similarity), best first."""
    if not messages:
        return []
    vectors = embedder.embed([query] + [m.content[:MAX_DOC_CHARS] for m in messages])
    q, rest = vectors[0], vectors[1:]
    qn = math.sqrt(sum(x * x for x in q)) or 1.0
    scored = []
    for m, v in zip(messages, rest):
        vn = math.sqrt(sum(x * x for x in v)) or 1.0
        scored.append((m.index, sum(a * b for a, b in zip(q, v)) / (qn * vn)))
    return sorted(scored, key=lambda x: (-x[1], -x[0]))[:limit]


__all__ = ["Embedder", "HashingEmbedder", "RETRIEVE_K", "action_query", "document", "older_than", "rank_dense", "terms"]
