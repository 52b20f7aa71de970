"""Stores: where messages and the edit log live. `open_store(url)` picks the backend."""

from __future__ import annotations

import os

from .. import registry
from ..errors import Errors
from ..signing import Signer
from .base import KeyRecord, SessionInfo, Store, StoredSession
from .memory import MemoryStore
from .sqlite import SQLiteStore

DEFAULT_STORE = "./context_editor.db"


def scheme_of(url: str) -> str:
    """`postgresql://…` -> 'postgresql'; a plain path is SQLite ('file'); `:memory:` is memory."""
    if url == ":memory:":
        return "memory"
    return url.split("://", 1)[0].lower() if "://" in url else "file"


def open_store(url: str | None = None, create: bool = True, signer: Signer | None = None) -> Store:
    """Open the store a URL names, through the factory registered for its scheme.

    Built-ins: `memory://`, `sqlite:///path.db`, a plain path (SQLite), `postgresql://…`.
    Other schemes come from packages registering `context_editor.stores` entry points.
    Default: $CONTEXT_EDITOR_STORE, else ./context_editor.db. With `create=False` (read-only
    commands) a store that does not exist is an error, never created. Session heads are signed
    with `signer`, else with the key the environment names (see context_editor.signing), if any."""
    url = url or os.environ.get("CONTEXT_EDITOR_STORE") or DEFAULT_STORE
    scheme = scheme_of(url)
    if scheme not in registry.stores:
        raise Errors.STORE(problem=f"unknown store URL scheme in {url!r} (registered: {', '.join(registry.stores.names())})",
                         fix="use memory://, sqlite:///path.db, a file path, or postgresql://user@host/db, or install "
                             "the package that registers this scheme (entry-point group context_editor.stores)")
    store: Store = registry.stores.get(scheme)(url, create=create)
    store.signer = signer or Signer.from_env()
    return store


__all__ = ["open_store", "scheme_of", "Store", "SessionInfo", "KeyRecord", "StoredSession", "MemoryStore", "SQLiteStore",
           "DEFAULT_STORE"]
