"""The store contract: raw messages and the edit log, appended one message at a time.

Every backend gives the same guarantees, checked by one contract test suite:
- `append` is atomic: a message and all its edits are committed together or not at all;
- the log is append-only and ordered by `seq`; message indexes are dense per session;
- a concurrent writer that lost the race gets a StoreError, never a corrupted chain;
- the domain document a session was processed with is kept, so replay uses that exact version.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from ..model import Edit, Message


@dataclass(frozen=True, slots=True)
class SessionInfo:
    session: str
    domain: str
    domain_version: str
    messages: int
    edits: int


class Store(ABC):
    """Abstract store. Implementations: MemoryStore, SQLiteStore (and PostgreSQL)."""

    url: str = ""

    @abstractmethod
    def put_domain(self, version_hash: str, name: str, source: dict) -> None:
        """Remember a domain document by its version hash (idempotent)."""

    @abstractmethod
    def get_domain(self, version_hash: str) -> dict | None:
        """The domain document stored under this hash."""

    @abstractmethod
    def session(self, session: str) -> SessionInfo | None:
        """What is known about a session, or None if it has no message yet."""

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

    def close(self) -> None:
        """Release connections (no-op where there are none)."""
