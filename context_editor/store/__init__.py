"""Stores: where messages and the edit log live. `open_store(url)` picks the backend."""

from __future__ import annotations

import os

from ..errors import StoreError
from ..signing import Signer
from .base import SessionInfo, Store
from .memory import MemoryStore
from .sqlite import SQLiteStore

DEFAULT_STORE = "./context_editor.db"


def open_store(url: str | None = None, signer: Signer | None = None) -> Store:
    """`memory://`, `sqlite:///path.db`, a plain path (SQLite), or postgresql://…
    Default: $CONTEXT_EDITOR_STORE, else ./context_editor.db. Session heads are signed with
    `signer`, else with the key the environment names (see context_editor.signing), if any."""
    store = _open(url or os.environ.get("CONTEXT_EDITOR_STORE") or DEFAULT_STORE)
    store.signer = signer or Signer.from_env()
    return store


def _open(url: str) -> Store:
    if url in ("memory://", ":memory:"):
        return MemoryStore()
    if url.startswith("sqlite:///"):
        return SQLiteStore(url[len("sqlite:///"):])
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore  # imported lazily: psycopg is only needed here

        return PostgresStore(url)
    if "://" in url:
        raise StoreError(f"unknown store URL scheme in {url!r}",
                         fix="use memory://, sqlite:///path.db, a file path, or postgresql://user@host/db")
    return SQLiteStore(url)


__all__ = ["open_store", "Store", "SessionInfo", "MemoryStore", "SQLiteStore", "DEFAULT_STORE"]
