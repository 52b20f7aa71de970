"""The store contract: raw messages and the edit log, appended one message at a time.

Every backend gives the same guarantees, checked by one contract test suite:
- `append` is atomic: a message and all its edits are committed together or not at all;
- the log is append-only and ordered by `seq`; message indexes are dense per session;
- a concurrent writer that lost the race gets a StoreError, never a corrupted chain;
- the domain document a session was processed with is kept, so replay uses that exact version.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from ..errors import Errors
from ..model import Edit, Message, canonical_json


@dataclass(frozen=True, slots=True)
class SessionInfo:
    session: str
    domain: str
    domain_version: str
    messages: int
    edits: int


# One schema for every SQL backend. Bodies are TEXT (canonical JSON) so `audit verify` hashes
# exactly the bytes that were written; seq/round/index columns exist for indexed reads.
SCHEMA = """
CREATE TABLE IF NOT EXISTS domains (
    version_hash TEXT PRIMARY KEY, name TEXT NOT NULL, source TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    session TEXT PRIMARY KEY, domain TEXT NOT NULL, domain_version TEXT NOT NULL,
    messages INTEGER NOT NULL DEFAULT 0, edits INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS messages (
    session TEXT NOT NULL, idx INTEGER NOT NULL, round INTEGER NOT NULL, body TEXT NOT NULL, hash TEXT NOT NULL,
    PRIMARY KEY (session, idx));
CREATE INDEX IF NOT EXISTS messages_round ON messages (session, round);
CREATE TABLE IF NOT EXISTS edits (
    session TEXT NOT NULL, seq INTEGER NOT NULL, round INTEGER NOT NULL, message_index INTEGER NOT NULL,
    body TEXT NOT NULL, hash TEXT NOT NULL,
    PRIMARY KEY (session, seq));
CREATE TABLE IF NOT EXISTS derived (
    session TEXT NOT NULL, kind TEXT NOT NULL, key INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (session, kind, key));
"""
# `derived` holds data computed from the log (summary-zone stages …): never part of the record,
# never hashed, rebuildable at any time, so it is written outside the message transaction.

def edit_row(e: Edit) -> tuple[Any, ...]:
    """The row of an edit in an SQL store: key columns, canonical body, hash."""
    return (e.session, e.seq, e.round, e.message_index, canonical_json(e.body()), e.hash)


def edit_from_row(body: str, hash_: str) -> Edit:
    return Edit.from_dict({**json.loads(body), "hash": hash_})


RETRY_FIX = "another writer appended to this session; reload its state and retry"


def check_batch(message: Message, edits: list[Edit], n_messages: int, n_edits: int, last_hash: str) -> None:
    """Refuse an append that would not continue the session exactly where it stands.

    The message must take the next index, the edits the next seqs, each linked to the hash
    before it. A writer that lost a race, or a caller that built a bad batch, gets a StoreError
    before anything is written.
    """
    where = f"session {message.session!r}"
    if message.index != n_messages:
        raise Errors.STORE(problem=f"{where}: expected message index {n_messages}, got {message.index}", fix=RETRY_FIX)
    prev, seq = last_hash, n_edits
    for e in edits:
        if e.session != message.session or e.message_index != message.index:
            raise Errors.STORE(problem=f"{where}: edit {e.seq} belongs to {e.session!r} message {e.message_index}",
                             fix="commit each message with its own edits")
        if e.seq != seq or e.prev_hash != prev:
            raise Errors.STORE(problem=f"{where}: edit seq {e.seq} does not continue the chain at seq {seq}", fix=RETRY_FIX)
        prev, seq = e.hash, seq + 1


class Store(ABC):
    """Abstract store. Implementations: MemoryStore, SQLiteStore (and PostgreSQL)."""

    url: str = ""

    @abstractmethod
    def put_domain(self, version_hash: str, name: str, source: dict[str, Any]) -> None:
        """Remember a domain document by its version hash (idempotent), keeping its key order."""

    @abstractmethod
    def get_domain(self, version_hash: str) -> dict[str, Any] | None:
        """The domain document stored under this hash."""

    @abstractmethod
    def session(self, session: str) -> SessionInfo | None:
        """What is known about a session, or None if it has no message yet."""

    def require_session(self, session: str) -> SessionInfo:
        """What is known about a session; the one "no session" error (Errors.NO_SESSION) if it has none."""
        info = self.session(session)
        if info is None:
            raise Errors.NO_SESSION(session=session, store=self.url, known=", ".join(self.sessions()[:10]) or "none yet")
        return info

    @abstractmethod
    def append(self, domain: str, domain_version: str, message: Message, edits: list[Edit]) -> None:
        """Commit one message and its edits atomically. Raises StoreError on a conflict."""

    @abstractmethod
    def messages(self, session: str, since_round: int | None = None) -> list[Message]:
        """Messages in index order (those with round >= since_round when given)."""

    @abstractmethod
    def edits(self, session: str) -> list[Edit]:
        """The whole edit log of a session in seq order."""

    @abstractmethod
    def sessions(self) -> list[str]:
        """All session ids, sorted."""

    @abstractmethod
    def raw_rows(self, session: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """Rows exactly as stored, for `audit verify`: messages as (index, body, hash) and edits
        as (seq, round, message_index, body, hash), each in storage order of its key."""

    @abstractmethod
    def put_derived(self, session: str, kind: str, key: int, body: dict[str, Any]) -> None:
        """Store (or replace) one item of derived data, e.g. a summary-zone stage."""

    @abstractmethod
    def derived(self, session: str, kind: str) -> dict[int, dict[str, Any]]:
        """Every item of one kind of derived data of a session, by key."""

    @abstractmethod
    def drop_derived(self, session: str, kind: str) -> None:
        """Forget one kind of derived data (it is rebuilt from the log on next use)."""

    def close(self) -> None:
        """Release connections (no-op where there are none)."""
