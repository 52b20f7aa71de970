"""Stores: where messages and the edit log live. `open_store(url)` picks the backend."""

from __future__ import annotations

import os

from ..errors import MissingExtraError, StoreError
from .base import SessionInfo, Store
from .memory import MemoryStore
from .sqlite import SQLiteStore

DEFAULT_STORE = "./context_editor.db"


def open_store(url: str | None = None, create: bool = True) -> Store:
    """`memory://`, `sqlite:///path.db`, a plain path (SQLite), or postgresql://…
    Default: $CONTEXT_EDITOR_STORE, else ./context_editor.db. With `create=False` (read-only
    commands) a store file that does not exist is an error, never created."""
    url = url or os.environ.get("CONTEXT_EDITOR_STORE") or DEFAULT_STORE
    if url in ("memory://", ":memory:"):
        return MemoryStore()
    if url.startswith("sqlite:///"):
        return SQLiteStore(url[len("sqlite:///"):], create=create)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from .postgres import PostgresStore  # imported lazily: psycopg is only needed here
        except ImportError as exc:  # psycopg is the optional [postgres] extra
            raise MissingExtraError("psycopg", "postgres", f"the PostgreSQL store {url.split('@')[-1]!r}") from exc

        return PostgresStore(url)
    if "://" in url:
        raise StoreError(f"unknown store URL scheme in {url!r}",
                         fix="use memory://, sqlite:///path.db, a file path, or postgresql://user@host/db")
    return SQLiteStore(url, create=create)


__all__ = ["open_store", "Store", "SessionInfo", "MemoryStore", "SQLiteStore", "DEFAULT_STORE"]
