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
- Dense recall is an interface (`Embedder`): a deterministic double here for tests, and a real
  model in `memory.minilm` (all-MiniLM-L6-v2 with numpy, the [embed] extra). Each message's
  vector is derived data (`VectorIndex`); the nearest ones are fused with the lexical hits (`fuse`).
"""

from __future__ import annotations

import hashlib
import heapq
import math
from dataclasses import replace
from functools import lru_cache
from typing import Any, Protocol

from ..domain import ActionSpec, Domain
from ..inject.history import action_vocabulary, terms, tool_text
from ..lang.lexicon import lexicon
from ..model import Edit, Message, SearchDoc, SearchFilter, State

RETRIEVE_K = 6  # retrieved messages offered to one render's history
RRF_K = 60  # reciprocal rank fusion's constant (Cormack et al. 2009): damps the weight of the top ranks
ROLES = ("user", "assistant", "tool")
MAX_DOC_CHARS = 8000  # what is indexed of one message (a 10 MB tool output is not a document)


def document_text(domain: Domain, msg: Message) -> str:
    """The text of a message that search sees (a tool result's kept parts, not its raw JSON)."""
    return (tool_text(domain, msg) if msg.role == "tool" else msg.content)[:MAX_DOC_CHARS]


def document(domain: Domain, msg: Message, edits: list[Edit]) -> SearchDoc | None:
    """How the index holds one message (None: not searchable: system messages, empty text)."""
    if msg.role not in ROLES:
        return None
    words = terms(document_text(domain, msg))
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
    sentence model behind an extra). Ranking is by cosine similarity. Optional attributes: `name`
    (what stored vectors were made with) and `min_similarity` (below it a dense hit is noise)."""

    dimensions: int

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class HashingEmbedder:
    """A deterministic stand-in for a sentence model: each term hashed into one of `dimensions`
    buckets, the vector normalised. It finds shared terms, not meaning: for tests and as a floor."""

    def __init__(self, dimensions: int = 256):
        self.dimensions = dimensions
        self.name = "hashing"

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            v = [0.0] * self.dimensions
            for t in terms(text):
                v[int(hashlib.blake2b(t.encode("utf-8"), digest_size=4).hexdigest(), 16) % self.dimensions] += 1.0
            norm = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([x / norm for x in v])
        return out


def embedder_name(embedder: Embedder) -> str:
    """What a stored vector was made with (vectors of another model are not comparable)."""
    return f"{getattr(embedder, 'name', type(embedder).__name__)}/{embedder.dimensions}"


class VectorIndex:
    """One session's message vectors for dense recall, beside the lexical index. Derived data:
    the store keeps one row per message (kind `vectors`, key = message index, with the model's
    name), rebuilt from the log at any time; here they are searched by cosine similarity with the
    same metadata filter as lexical search. No store here has a vector extension to hand this to
    (see README: sqlite-vec cannot load into a Python without loadable SQLite extensions, and
    PostgreSQL's pgvector is not among the Debian packages), so the scan is in process: about 1 ms
    for 1,000 messages of 384 dimensions with numpy."""

    KIND = "vectors"

    def __init__(self, model: str):
        self.model = model
        self.docs: dict[int, SearchDoc] = {}
        self.vectors: dict[int, list[float]] = {}
        self._matrix: Any = None  # numpy rows in `_order`, rebuilt after an add

    @classmethod
    def from_bodies(cls, model: str, bodies: dict[int, dict[str, Any]]) -> VectorIndex:
        index = cls(model)
        for body in bodies.values():
            if body.get("model") == model:  # rows of another model are rebuilt by the caller
                index.add(SearchDoc(**body["doc"]), body["vector"])
        return index

    def body(self, i: int) -> dict[str, Any]:
        d = self.docs[i]
        return {"model": self.model, "vector": self.vectors[i],
                "doc": {"message_index": d.message_index, "round": d.round, "role": d.role, "tool": d.tool,
                        "fields": list(d.fields), "terms": ""}}

    def last(self) -> int:
        return max(self.docs, default=-1)

    def add(self, doc: SearchDoc, vector: list[float]) -> None:
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        self.docs[doc.message_index] = replace(doc, fields=tuple(doc.fields), terms="")
        self.vectors[doc.message_index] = [x / norm for x in vector]
        self._matrix = None

    def nearest(self, vector: list[float], where: SearchFilter, limit: int,
                floor: float = 0.0) -> list[tuple[int, float]]:
        """(message index, cosine similarity) of the admitted messages closest to `vector`, best
        first; none below `floor` (an embedder's `min_similarity`: what it scores unrelated text)."""
        admitted = [i for i, d in self.docs.items() if where.admits(d)]
        if not admitted or limit <= 0:
            return []
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        q = [x / norm for x in vector]
        try:
            import numpy as np
        except ImportError:  # a plain-Python scan: the HashingEmbedder needs no numpy
            sims = [(i, sum(a * b for a, b in zip(q, self.vectors[i]))) for i in admitted]
        else:
            if self._matrix is None:
                order = sorted(self.vectors)
                self._matrix = (order, {i: k for k, i in enumerate(order)},
                                np.asarray([self.vectors[i] for i in order], dtype=np.float32))
            _, row, matrix = self._matrix
            scores = matrix[[row[i] for i in admitted]] @ np.asarray(q, dtype=np.float32)
            sims = [(i, float(s)) for i, s in zip(admitted, scores)]
        return heapq.nsmallest(limit, [x for x in sims if x[1] >= floor], key=lambda x: (-x[1], -x[0]))


def fuse(lexical: list[tuple[int, float]], dense: list[tuple[int, float]], limit: int) -> list[tuple[int, float]]:
    """Lexical and dense hits as one list, by reciprocal rank fusion (each list gives 1/(60 + rank);
    ties go to the closer vector, then the newer message): a message found by either way competes,
    and one found by both comes first. The score is the fused one."""
    closeness = dict(dense)
    fused: dict[int, float] = {}
    for hits in (lexical, dense):
        for rank, (i, _) in enumerate(hits, start=1):
            fused[i] = fused.get(i, 0.0) + 1.0 / (RRF_K + rank)
    ranked = sorted(fused.items(), key=lambda x: (-x[1], -closeness.get(x[0], -1.0), -x[0]))
    return ranked[:limit]


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


__all__ = ["Embedder", "HashingEmbedder", "RETRIEVE_K", "VectorIndex", "action_query", "document", "document_text",
           "embedder_name", "fuse", "older_than", "rank_dense", "terms"]
