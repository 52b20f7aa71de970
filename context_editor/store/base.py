"""The store contract: raw messages and the edit log, appended one message at a time.

Every backend gives the same guarantees, checked by one contract test suite:
- `append` is atomic: a message and all its edits are committed together or not at all;
- the log is append-only and ordered by `seq`; message indexes are dense per session;
- a concurrent writer that lost the race gets a StoreError, never a corrupted chain;
- the domain document a session was processed with is kept, so replay uses that exact version.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import json
import math
import re
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ..errors import Errors
from ..model import GENESIS_HASH, Edit, Message, SearchDoc, SearchFilter, canonical_json, canonical_part
from ..signing import Signer


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """An API key of the service, as stored: only the SHA-256 of the secret, never the secret.

    `key_id` is the public part (printed, listed, used to revoke); the tenant and role come
    from here and nowhere else."""

    key_id: str
    key_hash: str
    tenant: str
    role: str
    created: str
    revoked: str | None = None


@dataclass(frozen=True, slots=True)
class SessionInfo:
    session: str
    domain: str
    domain_version: str
    messages: int
    edits: int
    # How many parts of the session were erased (`session()` fills it): a reader that cached the
    # session's state re-reads it when this changes, as erased text may be in its cache.
    erased: int = 0


@dataclass(frozen=True, slots=True)
class StoredSession:
    """One session as a batch read returns it: what is known about it, its messages and its log."""

    info: SessionInfo
    messages: tuple[Message, ...]
    edits: tuple[Edit, ...]


def redacted(url: str) -> str:
    """A store URL without its password, for messages and files."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


def domain_text(source: dict[str, Any]) -> tuple[str, str]:
    """The stored text of a domain document (key order kept) and its full SHA-256."""
    text = json.dumps(source, ensure_ascii=False, separators=(",", ":"))
    return text, hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_domain_row(version_hash: str, row: tuple[str, str] | None) -> dict[str, Any] | None:
    """The document of a domains row (source, sha256), refused if its text does not match its hash."""
    if row is None:
        return None
    text, digest = row
    if hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() != digest:
        raise Errors.DOMAIN_DOCUMENT_CHANGED(version=version_hash)
    doc: dict[str, Any] = json.loads(text)
    return doc


@dataclass(frozen=True, slots=True)
class Head:
    """Where a session stands: what a truncation, deletion or rewrite would have to change."""

    session: str
    domain: str
    domain_version: str
    domain_sha256: str | None
    messages: int
    edits: int
    last_message_hash: str
    last_edit_hash: str

    def text(self) -> str:
        """canonical_json of the head's fields (written out, keys in sorted order: one per message appended)."""
        j = canonical_part
        return (f'{{"domain":{j(self.domain)},"domain_sha256":{j(self.domain_sha256)},"domain_version":{j(self.domain_version)},'
                f'"edits":{j(self.edits)},"last_edit_hash":{j(self.last_edit_hash)},"last_message_hash":{j(self.last_message_hash)},'
                f'"messages":{j(self.messages)},"session":{j(self.session)}}}')


def new_head(domain: str, domain_version: str, domain_sha256: str | None, message: Message, edits: list[Edit],
             n_msgs: int, n_edits: int, last_edit_hash: str | None) -> Head:
    """The head of a session after `message` and its `edits` are appended."""
    return Head(message.session, domain, domain_version, domain_sha256, n_msgs + 1, n_edits + len(edits), message.hash,
                edits[-1].hash if edits else (last_edit_hash or GENESIS_HASH))


HEADS_KEPT = 4096  # sessions whose head a store remembers (least recently written out)


class KnownHeads:
    """Where sessions stand as this store last wrote them: (messages, edits, last edit hash).

    An SQL store's append then writes on condition that the session is still there (one
    statement checks and moves the head) instead of reading the head first. The batch itself
    says most of it (the message's index and prev hash, the first edit's seq and prev hash);
    only the edit count before a message without edits needs the remembered head. A stale or
    missing entry costs the reading path, never a wrong write: the condition is checked on the
    stored row. Bounded (least recently written out) and safe to share between threads."""

    def __init__(self, kept: int = HEADS_KEPT):
        self._heads: OrderedDict[str, tuple[int, int, str]] = OrderedDict()
        self._lock = threading.Lock()
        self._kept = kept

    def expected(self, message: Message, edits: list[Edit]) -> tuple[int, str] | None:
        """(edits, last edit hash) the session should hold before this batch, if known."""
        if edits:
            return edits[0].seq, edits[0].prev_hash
        if message.index == 0:
            return 0, GENESIS_HASH
        known = self._heads.get(message.session)
        return (known[1], known[2]) if known is not None and known[0] == message.index else None

    def remember(self, session: str, head: Head) -> None:
        with self._lock:
            self._heads[session] = (head.messages, head.edits, head.last_edit_hash)
            self._heads.move_to_end(session)
            while len(self._heads) > self._kept:
                self._heads.popitem(last=False)


def head_hashes(text: str | None) -> tuple[str, str] | None:
    """(last message hash, last edit hash) from a session's stored head, so an append checks the
    chain with the one read of the sessions row; None when the row holds no head yet."""
    if not text:
        return None
    head = json.loads(text)
    return head["last_message_hash"], head["last_edit_hash"]


def key_range(after: str | None, upto: str | None, column: str, mark: str) -> tuple[str, tuple[str, ...]]:
    """The SQL condition (and its parameters) for session ids in the key range (after, upto]:
    `column` compared in code-point order, `mark` the driver's placeholder. Bounds that are None
    are left out rather than tested in SQL, so the planner always sees the index."""
    bounds = [(f"{column} {op} {mark}", v) for op, v in ((">", after), ("<=", upto)) if v is not None]
    return " AND ".join(b for b, _ in bounds) or "1 = 1", tuple(v for _, v in bounds if v is not None)


def raw_session_rows(query: Callable[[str, tuple[Any, ...]], Iterable[Sequence[Any]]], where: str,
                     params: tuple[Any, ...]) -> dict[str, tuple[Any, ...] | None]:
    """`Store.raw_sessions` for an SQL store, given a function that runs a query with parameters
    and the store's key-range condition on `session` (`where`, with its `params`): every session
    id in any table, with its sessions row or None."""
    found: dict[str, tuple[Any, ...] | None] = {}
    for table in ("messages", "edits"):
        found.update((r[0], None) for r in query(f"SELECT DISTINCT session FROM {table} WHERE {where}", params))
    found.update((r[0], tuple(r[1:])) for r in query(
        f"SELECT session, domain, domain_version, messages, edits, head, signature FROM sessions WHERE {where}", params))
    return found


def stored_sessions(keys: list[str], infos: Iterable[Sequence[Any]], messages: Iterable[Sequence[Any]],
                    edits: Iterable[Sequence[Any]]) -> list[StoredSession]:
    """`Store.read_sessions` for an SQL store, from the rows of its three batch queries:
    sessions rows (session, domain, domain_version, messages, edits), then (session,
    ROW_COLUMNS) of messages in index order and (session, EDIT_COLUMNS) of edits in seq order."""
    msgs: dict[str, list[Message]] = {}
    for s, *row in messages:
        msgs.setdefault(s, []).append(message_from_row(*row))
    log: dict[str, list[Edit]] = {}
    for s, *row in edits:
        log.setdefault(s, []).append(edit_from_row(*row))
    found = {row[0]: SessionInfo(*row) for row in infos}
    return [StoredSession(found[k], tuple(msgs.get(k, ())), tuple(log.get(k, ()))) for k in keys if k in found]


KEY_COLUMNS = "key_id, key_hash, tenant, role, created, revoked"


def astuple_key(key: KeyRecord) -> tuple[Any, ...]:
    """A key record as a row of api_keys, in KEY_COLUMNS order."""
    return (key.key_id, key.key_hash, key.tenant, key.role, key.created, key.revoked)


# The columns a reader selects for a message or an edit: the hashed body, its hash, and the
# erasable salt and payload (NULL for rows written before schema 8, and once erased); an edit
# also has the salt and payload of the value it replaced.
ROW_COLUMNS = "body, hash, salt, payload"
EDIT_COLUMNS = "body, hash, salt, payload, before_salt, before_payload"
# Where each kind of erasable part is stored: table, key column, salt and payload columns.
ERASABLE = {"message": ("messages", "idx", "salt", "payload"), "edit": ("edits", "seq", "salt", "payload"),
            "before": ("edits", "seq", "before_salt", "before_payload")}


def _payload(salt: str | None, payload: str | None) -> tuple[str, dict[str, Any]] | None:
    return (salt, json.loads(payload)) if salt is not None and payload is not None else None


def payload_text(record: Message | Edit) -> str | None:
    """The stored text of a record's erasable payload (None for a record without a salt)."""
    return record.payload_text() if record.salt is not None else None


def before_text(e: Edit) -> str | None:
    """The stored text of the value an edit replaced (None without its salt)."""
    return e.before_text() if e.before_salt is not None else None


def message_row(m: Message) -> tuple[Any, ...]:
    """The row of a message in an SQL store: key columns, canonical body, hash, salt, payload."""
    return (m.session, m.index, m.round, m.body_text(), m.hash, m.salt, payload_text(m))


def message_from_row(body: str, hash_: str, salt: str | None = None, payload: str | None = None) -> Message:
    return Message.from_stored(json.loads(body), hash_, _payload(salt, payload))


def edit_row(e: Edit) -> tuple[Any, ...]:
    """The row of an edit in an SQL store: key columns, canonical body, hash, then salt and
    payload of its value, and of the value it replaced."""
    return (e.session, e.seq, e.round, e.message_index, e.body_text(), e.hash, e.salt, payload_text(e),
            e.before_salt, before_text(e))


def edit_from_row(body: str, hash_: str, salt: str | None = None, payload: str | None = None,
                  before_salt: str | None = None, before: str | None = None) -> Edit:
    return Edit.from_stored(json.loads(body), hash_, _payload(salt, payload), _payload(before_salt, before))


def payload_rows(kind: str, rows: Iterable[Sequence[Any]]) -> dict[tuple[str, int], tuple[Any, Any]]:
    """`Store.raw_payloads` entries from (position, salt, payload[, before salt, before payload])
    rows: only the pairs with a column filled."""
    out: dict[tuple[str, int], tuple[Any, Any]] = {}
    for pos, *pairs in rows:
        for part, (salt, payload) in zip((kind, "before"), zip(pairs[::2], pairs[1::2])):
            if salt is not None or payload is not None:
                out[(part, pos)] = (salt, payload)
    return out


# Which events of a user's memory an erasure deletes, per (tenant, user): a test on each event.
Forget = dict[tuple[str, str], Callable[[dict[str, Any]], bool]]


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What is left of an erased message or edit: its place, its commitment, when, by whom, why.
    Its canonical text is signed with the store's key when there is one."""

    session: str
    kind: str  # "message" | "edit" (its value and text) | "before" (the value the edit replaced)
    pos: int  # message index or edit seq
    commitment: str
    at: str
    actor: str
    reason: str

    def text(self) -> str:
        return canonical_json({"session": self.session, "kind": self.kind, "pos": self.pos, "commitment": self.commitment,
                               "at": self.at, "actor": self.actor, "reason": self.reason})


RETRY_FIX = "another writer appended to this session; reload its state and retry"


def check_batch(message: Message, edits: list[Edit], n_messages: int, n_edits: int, last_hash: str,
                last_message_hash: str | None = None) -> None:
    """Refuse an append that would not continue the session exactly where it stands.

    The message must take the next index, the edits the next seqs, each linked to the hash
    before it. A writer that lost a race, or a caller that built a bad batch, gets a StoreError
    before anything is written.
    """
    where = f"session {message.session!r}"
    if message.index != n_messages:
        raise Errors.STORE_CONFLICT(problem=f"{where}: expected message index {n_messages}, got {message.index}", fix=RETRY_FIX)
    if last_message_hash is not None and message.prev_hash != last_message_hash:
        raise Errors.STORE_CONFLICT(problem=f"{where}: message {message.index} does not link to the last stored message", fix=RETRY_FIX)
    prev, seq = last_hash, n_edits
    for e in edits:
        if e.session != message.session or e.message_index != message.index:
            raise Errors.STORE(problem=f"{where}: edit {e.seq} belongs to {e.session!r} message {e.message_index}",
                             fix="commit each message with its own edits")
        if e.seq != seq or e.prev_hash != prev:
            raise Errors.STORE_CONFLICT(problem=f"{where}: edit seq {e.seq} does not continue the chain at seq {seq}", fix=RETRY_FIX)
        prev, seq = e.hash, seq + 1


def check_records(session: str, edits: list[Edit], n_messages: int, n_edits: int, last_hash: str) -> None:
    """Refuse edits appended after a session's last message (a render's recorded model answers)
    unless they belong to that message and continue the chain exactly where it stands."""
    where = f"session {session!r}"
    if n_messages == 0:
        raise Errors.STORE(problem=f"{where} has no message to attach records to", fix="add a message first")
    prev, seq = last_hash, n_edits
    for e in edits:
        if e.session != session or e.message_index > n_messages - 1:
            raise Errors.STORE(problem=f"{where}: edit {e.seq} belongs to {e.session!r} message {e.message_index}",
                               fix="attach records to the session's last message")
        if e.message_index != n_messages - 1 or e.seq != seq or e.prev_hash != prev:
            raise Errors.STORE_CONFLICT(problem=f"{where}: record seq {e.seq} does not continue the chain at seq {seq}",
                                        fix=RETRY_FIX)
        prev, seq = e.hash, seq + 1


def records_head(info: SessionInfo, domain_sha256: str | None, last_message_hash: str, edits: list[Edit]) -> Head:
    """The head of a session after `edits` are appended to its last message."""
    return Head(info.session, info.domain, info.domain_version, domain_sha256, info.messages, info.edits + len(edits),
                last_message_hash, edits[-1].hash)
BM25_K1, BM25_B = 1.2, 0.75  # SQLite FTS5's bm25() defaults, so the in-Python index ranks alike


class TermIndex:
    """An inverted index of one session's search documents with BM25 ranking: the memory store's
    search, the same ranking function as SQLite FTS5's bm25()."""

    def __init__(self) -> None:
        self.docs: dict[int, SearchDoc] = {}
        self.counts: dict[int, dict[str, int]] = {}  # message index -> term -> occurrences
        self.lengths: dict[int, int] = {}
        self.postings: dict[str, set[int]] = {}
        self.total_terms = 0

    def add(self, doc: SearchDoc) -> None:
        self.remove(doc.message_index)
        counts: dict[str, int] = {}
        for term in doc.terms.split():
            counts[term] = counts.get(term, 0) + 1
        i = doc.message_index
        self.docs[i], self.counts[i], self.lengths[i] = doc, counts, sum(counts.values())
        for term in counts:
            self.postings.setdefault(term, set()).add(i)
        self.total_terms += self.lengths[i]

    def remove(self, index: int) -> None:
        counts = self.counts.pop(index, None)
        if counts is None:
            return
        del self.docs[index]
        for term in counts:
            self.postings[term].discard(index)
        self.total_terms -= self.lengths.pop(index)

    def search(self, terms: list[str], where: SearchFilter, limit: int) -> list[tuple[int, float]]:
        n = len(self.docs)
        if not n:
            return []
        average = self.total_terms / n
        admitted: dict[int, bool] = {}
        scores: dict[int, float] = {}
        for term in dict.fromkeys(terms):
            hits = self.postings.get(term, ())
            if not hits:
                continue
            idf = math.log(1 + (n - len(hits) + 0.5) / (len(hits) + 0.5))
            for i in hits:
                ok = admitted.get(i)
                if ok is None:
                    ok = admitted[i] = where.admits(self.docs[i])
                if ok:
                    tf = self.counts[i][term]
                    scores[i] = scores.get(i, 0.0) + idf * tf * (BM25_K1 + 1) / (
                        tf + BM25_K1 * (1 - BM25_B + BM25_B * self.lengths[i] / average))
        return heapq.nsmallest(limit, ((i, s) for i, s in scores.items()), key=lambda x: (-x[1], -x[0]))


def derived_text(body: dict[str, Any]) -> str:
    """The text a store keeps for a derived row (`Store.put_derived`): one serialisation for every
    store, so a digest taken over it when the row is written (`sealed`) is checked over the very
    bytes read back (`Store.raw_derived`), without serialising the parsed row again. A `Sealed`
    body brings the text its seal was taken over (a summary stage or snapshot is not written out twice)."""
    return body.text if type(body) is Sealed else json.dumps(body, ensure_ascii=False)


class Sealed(dict):  # type: ignore[type-arg]
    """What `sealed` returns: the body with its seal, and `text`, its `derived_text` (the JSON
    `json.dumps` writes for this dict, made once: the seal is a digest of all but its last bytes).
    Read-only, so the text cannot go stale."""

    __slots__ = ("text",)

    def __init__(self, body: dict[str, Any], seal: str, text: str):
        super().__init__(body)
        dict.__setitem__(self, "seal", seal)
        self.text = text

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a sealed body is read-only (its stored text is made with it)")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _read_only  # type: ignore[assignment]


# A sealed row's text ends with its seal, the last key: `, "seal": "<32 hex digits>"}`.
_SEAL_OPEN, SEAL_HEX = b', "seal": "', 32
_SEAL_TAIL = len(_SEAL_OPEN) + SEAL_HEX + 2
UNSEALED = "it has no seal (written by an older version)"


def _seal(data: bytes | memoryview, owner: tuple[str, ...], key: bytes) -> str:
    """The digest of a row's text (its seal left out) and its owner: SHA-256, which OpenSSL runs
    with the CPU's own instructions here (2x faster than BLAKE2b over a 61 KB snapshot, ~50 µs),
    as an HMAC under `key` when the store has a signing key (`Store.seal_key`)."""
    start = "/".join((*owner, "")).encode("utf-8", "surrogatepass")
    h = hmac.new(key, start, hashlib.sha256) if key else hashlib.sha256(start)
    h.update(data)
    h.update(b"}")
    return h.hexdigest()[:SEAL_HEX]


def sealed(body: dict[str, Any], *owner: str, key: bytes = b"") -> Sealed:
    """`body` with a digest of its stored text and of `owner` (what it belongs to: session, kind,
    key, so a row moved elsewhere does not hold) added as its last key, `seal`. With `key` (the
    store's `seal_key`) the digest is keyed: only a holder of the signing key can make a seal that
    holds. Without one it catches a row corrupted or edited by hand, not a forger who recomputes it."""
    if "seal" in body:
        raise ValueError("sealed: the body already has a key 'seal'")
    text = json.dumps(body, ensure_ascii=False)[:-1]  # '{"a": 1' ... : the seal is written after it
    seal = _seal(text.encode("utf-8", "surrogatepass"), owner, key)
    # json.dumps of the sealed dict, spelled out: the body's text, then `, "seal": "<hex>"}`
    # (an empty body has no item before the seal: written by json.dumps).
    return Sealed(body, seal, f'{text}, "seal": "{seal}"}}' if body else json.dumps({"seal": seal}))


def unsealed(data: bytes, *owner: str, key: bytes = b"") -> tuple[dict[str, Any] | None, str]:
    """The body `sealed(body, *owner, key=key)` stored, from its stored bytes (`Store.raw_derived`),
    if they are as written: the digest is taken over them before they are parsed, without a copy.
    Else None and why: no seal (written before rows were sealed), or one that does not match
    (altered in the store, a row of another owner, or sealed under another key)."""
    cut = len(data) - _SEAL_TAIL
    if cut < 1 or not data.startswith(_SEAL_OPEN, cut) or not data.endswith(b'"}'):
        return None, UNSEALED
    if data[cut + len(_SEAL_OPEN):-2] != _seal(memoryview(data)[:cut], owner, key).encode("ascii"):
        return None, "its seal does not match what it holds (altered in the store, or sealed under another signing key)"
    body: dict[str, Any] = json.loads(data)
    del body["seal"]
    return body, ""


@dataclass(frozen=True, slots=True)
class Usage:
    """A session's token account (`Store.add_usage`): renders, the context tokens they sent, the
    raw-window tokens they stood for, and how many were out of the compaction band. Counts, not
    part of the record: kept in integer columns, so a render adds to them in one statement."""

    renders: int = 0
    context_tokens: int = 0
    source_tokens: int = 0
    out_of_band: int = 0

    def plus(self, other: Usage) -> Usage:
        return Usage(*(a + b for a, b in zip(self.row(), other.row())))

    def row(self) -> tuple[int, int, int, int]:
        return (self.renders, self.context_tokens, self.source_tokens, self.out_of_band)


USAGE_COLUMNS = "renders, context_tokens, source_tokens, out_of_band"


def add_usage_sql(mark: str) -> str:
    """`Store.add_usage` in SQL (`mark`: the driver's placeholder): one upsert that adds to the
    row's columns, atomic in the database whichever process renders."""
    columns = USAGE_COLUMNS.split(", ")
    sums = ", ".join(f"{c} = usage.{c} + excluded.{c}" for c in columns)
    return f"INSERT INTO usage VALUES ({', '.join([mark] * (len(columns) + 1))}) ON CONFLICT (session) DO UPDATE SET {sums}"


class Store(ABC):
    """Abstract store. Implementations: MemoryStore, SQLiteStore (and PostgreSQL)."""

    url: str = ""
    signer: Signer | None = None  # signs each new session head; set by open_store from the environment

    @property
    def seal_key(self) -> bytes:
        """What keys the seals of this store's derived rows: the signer's `seal_key`, or none."""
        return self.signer.seal_key if self.signer is not None else b""

    @abstractmethod
    def put_domain(self, version_hash: str, name: str, source: dict[str, Any]) -> None:
        """Remember a domain document by its version hash (idempotent), keeping its key order."""

    @abstractmethod
    def get_domain(self, version_hash: str) -> dict[str, Any] | None:
        """The domain document stored under this hash."""

    @abstractmethod
    def session(self, session: str) -> SessionInfo | None:
        """What is known about a session, or None if it has no message yet."""

    @abstractmethod
    def data_version(self) -> tuple[int, ...] | None:
        """A mark of the sessions as this store sees them, cheaper to take than a session's head:
        it is the same as a mark taken before only if no append, records append or erase went
        through this store, and nothing was committed by another connection or process, in
        between (writes of derived data and usage through this store leave it). A reader that
        cached what it read under a mark reads again only when the mark moved. None: the store
        cannot tell cheaply, read again."""

    def after_own_write(self, mark: tuple[int, ...]) -> tuple[int, ...] | None:
        """What `data_version()` returns after one append or records append through this store
        on this thread, committed, if nothing else was committed since `mark` was taken (no I/O):
        a reader whose cache was current at `mark` and took in its own write is current there.
        None where the store cannot say (and inside a batch: nothing is committed yet)."""
        return None

    def require_session(self, session: str) -> SessionInfo:
        """What is known about a session; the one "no session" error (Errors.NO_SESSION) if it has none."""
        info = self.session(session)
        if info is None:
            raise Errors.NO_SESSION(session=session, store=self.url, known=", ".join(self.sessions()[:10]) or "none yet")
        return info

    @abstractmethod
    def append(self, domain: str, domain_version: str, message: Message, edits: list[Edit]) -> None:
        """Commit one message and its edits atomically. Raises StoreError on a conflict."""

    def batch(self, deferred: bool = True) -> AbstractContextManager[None]:
        """A bulk load: the appends inside commit together when the block ends (one commit for
        many messages), or none of them if it raises. Each append stays whole: a reader sees a
        message with all its edits or not at all. Stores without transactions commit each
        append at once (the default). `deferred`: the store may hold the appends back and send
        them together (PostgreSQL: one statement for many messages); an append whose session
        another writer moved meanwhile is then refused only when they are sent, so the block
        raises StoreConflictError at its end with nothing of it written. Without it, each append
        is checked (and a lost race refused, the rest kept) as it is made."""
        return nullcontext()

    @abstractmethod
    def append_records(self, session: str, edits: list[Edit]) -> None:
        """Append edits that belong to the session's last message but were made after it (a
        render's recorded model answers), atomically, on the same hash chain and head. Raises
        StoreError on a conflict (a message or edit was appended since the caller read the head)."""

    @abstractmethod
    def messages(self, session: str, since_round: int | None = None) -> list[Message]:
        """Messages in index order (those with round >= since_round when given)."""

    @abstractmethod
    def edits(self, session: str, since_seq: int | None = None) -> list[Edit]:
        """The edit log of a session in seq order (those with seq > since_seq when given)."""

    @abstractmethod
    def known_message_ids(self, session: str, ids: list[str]) -> set[str]:
        """Which of these caller-given message ids the session already holds (idempotent ingest)."""

    @abstractmethod
    def put_key(self, key: KeyRecord) -> None:
        """Store a new API key record."""

    @abstractmethod
    def get_key(self, key_hash: str) -> KeyRecord | None:
        """The key record with this secret hash (revoked ones included), or None."""

    @abstractmethod
    def keys(self) -> list[KeyRecord]:
        """Every key record, by key id."""

    @abstractmethod
    def revoke_key(self, key_id: str, when: str) -> bool:
        """Mark a key revoked at `when`; False if there is no such unrevoked key."""

    @abstractmethod
    def sessions(self) -> list[str]:
        """All session ids, sorted."""

    @abstractmethod
    def session_keys(self, after: str | None = None, upto: str | None = None, limit: int | None = None) -> list[str]:
        """Session ids in the key range (`after`, `upto`]: greater than `after`, at most `upto` (no bound
        where None), in code-point order, at most `limit`. How a batch job pages through a store and
        splits it into key ranges without listing it whole."""

    @abstractmethod
    def read_sessions(self, keys: list[str]) -> list[StoredSession]:
        """A batch read: these sessions with their messages and edits, in the order given (ids
        without a session are left out), in a fixed number of queries whatever the batch size."""

    @abstractmethod
    def raw_rows(self, session: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """Rows exactly as stored, for `audit verify`: messages as (index, round, body, hash) and
        edits as (seq, round, message_index, body, hash), each in storage order of its key."""

    @abstractmethod
    def raw_sessions(self, after: str | None = None, upto: str | None = None) -> dict[str, tuple[Any, ...] | None]:
        """For `audit verify`: every session id found in any table (in the key range (`after`,
        `upto`] when given, as in `session_keys`), mapped to its sessions row as stored, (domain,
        domain_version, messages, edits, head, signature), or to None when messages or edits
        exist for a session the sessions table does not list."""

    @abstractmethod
    def raw_domains(self) -> dict[str, tuple[Any, ...]]:
        """For `audit verify`: every domains row as stored, version id -> (name, source text, sha256)."""

    @abstractmethod
    def raw_payloads(self, session: str) -> dict[tuple[str, int], tuple[Any, Any]]:
        """For `audit verify`: (kind, position) -> (salt, payload text) as stored, for every
        message ("message", index), edit ("edit", seq) and replaced value ("before", seq) that
        has a column of the pair filled."""

    @abstractmethod
    def erasures(self, session: str) -> list[tuple[str, int, str, str | None]]:
        """The session's tombstones as stored: (kind, position, canonical text, signature), by
        kind and position."""

    @abstractmethod
    def erase(self, tombstones: list[Tombstone], forget: Forget | None = None) -> None:
        """In one transaction: empty the salt and payload of each tombstone's part (ERASABLE), store the
        (signed) tombstones, drop the sessions' derived data (it was built from the text: snapshots,
        summaries) and their search index, and delete each user memory event that
        `forget[(tenant, user)]` returns True for. The token account (`usage`) holds no text: kept."""

    def sign(self, head: Head) -> tuple[str, str | None]:
        """The head and signature columns of a session."""
        text = head.text()
        return text, (self.signer.sign(text) if self.signer else None)

    @abstractmethod
    def put_derived(self, session: str, kind: str, key: int, body: dict[str, Any]) -> None:
        """Store (or replace) one item of derived data, e.g. a summary-zone stage."""

    @abstractmethod
    def add_usage(self, session: str, usage: Usage) -> None:
        """Add a render's counts to the session's token account (created with them when absent),
        as one atomic step: writers in other processes lose nothing. Its own statement, not part
        of any message's transaction."""

    @abstractmethod
    def usage(self, session: str) -> Usage:
        """The session's token account (all zero when it has none)."""

    @abstractmethod
    def raw_derived(self, session: str, kind: str, keys: tuple[int, int] | None = None) -> dict[int, bytes]:
        """Every item of one kind of derived data of a session, by key (in key order), as stored:
        the UTF-8 bytes of the `derived_text` that `put_derived` stored, byte for byte (a reader
        checks a `sealed` row's digest over them before it parses them). With `keys` (lo, hi), only
        those with lo <= key <= hi (a long session's latest summary stages)."""

    def derived(self, session: str, kind: str, keys: tuple[int, int] | None = None) -> dict[int, dict[str, Any]]:
        """`raw_derived`, parsed."""
        return {k: json.loads(t) for k, t in self.raw_derived(session, kind, keys).items()}

    @abstractmethod
    def drop_derived(self, session: str, kind: str) -> None:
        """Forget one kind of derived data (it is rebuilt from the log on next use)."""

    @abstractmethod
    def append_user_memory(self, tenant: str, user: str, events: list[dict[str, Any]]) -> None:
        """Append events to one user's memory (memory/user.py), atomically and in order."""

    @abstractmethod
    def user_memory(self, tenant: str, user: str) -> list[dict[str, Any]]:
        """One user's memory events in the order they were appended; only this tenant's user's."""

    @abstractmethod
    def replace_user_memory(self, tenant: str, user: str, events: list[dict[str, Any]]) -> None:
        """Replace one user's memory events with `events`, atomically (a rebuild from the logs)."""
    # ------------------------------------------------------------------ search (derived data)
    @abstractmethod
    def index_search(self, session: str, docs: list[SearchDoc]) -> None:
        """Add (or replace, by message index) messages to the session's search index."""

    @abstractmethod
    def search(self, session: str, terms: list[str], where: SearchFilter, limit: int) -> list[tuple[int, float]]:
        """The messages matching any of `terms` that `where` admits, as (message index, score),
        best first (ties: newest first); a score only orders one result list."""

    @abstractmethod
    def search_indexed(self, session: str) -> int:
        """The highest message index in the session's search index (-1: none), to catch up from."""

    @abstractmethod
    def drop_search(self, session: str) -> None:
        """Forget the session's search index (rebuilt from the log on next use)."""

    @abstractmethod
    def messages_at(self, session: str, indexes: list[int]) -> list[Message]:
        """The messages with these indexes, in index order (unknown indexes are skipped)."""

    def close(self) -> None:
        """Release connections (no-op where there are none)."""
