"""The built-in stores' factories, registered by URL scheme in pyproject.toml (see
`registry.stores`): `(url, create=True) -> Store`. A third-party store registers the same way."""

from __future__ import annotations

from ..errors import MissingExtraError
from .base import Store
from .memory import MemoryStore
from .sqlite import SQLiteStore


def memory(url: str, create: bool = True) -> Store:
    """`memory://`: nothing persists."""
    return MemoryStore()


def sqlite(url: str, create: bool = True) -> Store:
    """`sqlite:///path.db`, or a plain path (scheme `file`)."""
    return SQLiteStore(url[len("sqlite:///"):] if url.startswith("sqlite:///") else url, create=create)


def postgresql(url: str, create: bool = True) -> Store:
    """`postgresql://…` / `postgres://…`; psycopg is imported only here (the [postgres] extra)."""
    try:
        from .postgres import PostgresStore
    except ImportError as exc:
        raise MissingExtraError("psycopg", "postgres", f"the PostgreSQL store {url.split('@')[-1]!r}") from exc
    return PostgresStore(url)
