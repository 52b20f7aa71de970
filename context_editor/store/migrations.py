"""Schema migrations: one ordered list of steps, version N -> N+1, shared by the SQL stores.

A store is opened by running every step above its stored version, together with the new
version stamp, in one transaction: a kill or a failing step leaves the store exactly as it was.
A new store is created at BASE_VERSION and walks the same steps, so an upgraded store and a new
one cannot differ.

To change the schema, append one `Step` to STEPS (the next version, why, its SQL; `sqlite=` or
`postgres=` only where the dialects differ). Nothing else changes: SCHEMA_VERSION follows, and
tests/test_migrations.py opens a store written at version 3 on SQLite and PostgreSQL. A step
never edits a message or an edit (they are the record, hashed); derived data may be dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

from ..errors import Errors

Dialect = Literal["sqlite", "postgres"]

# The oldest schema an existing store can be upgraded from, as it was written (both dialects).
# Bodies are TEXT (canonical JSON) so `audit verify` hashes exactly the bytes that were written;
# seq/round/index columns exist for indexed reads. A domain document is kept as written (its key
# order is the author's field order, which replay reproduces) with the SHA-256 of that text. A
# session's `head` is the canonical JSON of session_head(): everything a truncation or a rewrite
# would have to change, optionally signed. `derived` holds data computed from the log (summary
# zone stages …): never part of the record, never hashed, rebuildable at any time.
BASE_VERSION = 3
BASE_SCHEMA = """
CREATE TABLE IF NOT EXISTS domains (
    version_hash TEXT PRIMARY KEY, name TEXT NOT NULL, source TEXT NOT NULL, sha256 TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    session TEXT PRIMARY KEY, domain TEXT NOT NULL, domain_version TEXT NOT NULL,
    messages INTEGER NOT NULL DEFAULT 0, edits INTEGER NOT NULL DEFAULT 0,
    head TEXT NOT NULL DEFAULT '', signature TEXT);
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


@dataclass(frozen=True, slots=True)
class Step:
    """What takes a store from `version - 1` to `version`: `sql` for both dialects unless one
    of them needs its own text (`sqlite` / `postgres`; "" for nothing to do there)."""

    version: int
    why: str
    sql: str
    sqlite: str | None = None
    postgres: str | None = None

    def statements(self, dialect: Dialect) -> list[str]:
        text = {"sqlite": self.sqlite, "postgres": self.postgres}[dialect]
        return [s.strip() for s in (self.sql if text is None else text).split(";") if s.strip()]


STEPS: tuple[Step, ...] = (
    # IF NOT EXISTS: stores written by the service's branch before this step already had the table.
    Step(4, "API keys of the service (issue 14)", """
        CREATE TABLE IF NOT EXISTS api_keys (
            key_id TEXT PRIMARY KEY, key_hash TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL, role TEXT NOT NULL,
            created TEXT NOT NULL, revoked TEXT)"""),
    # Key-range reads (Store.session_keys) walk session ids in code-point order. SQLite's BINARY
    # collation is that order, so its primary key serves them; PostgreSQL compares by the
    # database locale unless told COLLATE "C", which the primary key index cannot serve.
    Step(5, "key-range batch reads of sessions (issue 16)", "", postgres="""
        CREATE INDEX IF NOT EXISTS sessions_key_range ON sessions (session COLLATE "C")"""),
    # The search index: derived data (rebuilt from the log, never part of the record); an
    # upgraded store starts with it empty and the pipeline indexes the log on first use. The
    # documents' terms are made by the pipeline (Latin words, CJK character bigrams), so no
    # database tokenizer decides what a Chinese word is. SQLite: FTS5's unicode61 only splits on
    # the spaces between terms, and each document also carries its session as a term, so a query
    # intersects with one session's postings. PostgreSQL: the terms stored as lexemes as they are
    # (positions kept for ts_rank), matched through a GIN index.
    Step(6, "search index over raw messages (issue 11)", "", sqlite="""
        CREATE TABLE IF NOT EXISTS search_docs (
            session TEXT NOT NULL, message_index INTEGER NOT NULL, round INTEGER NOT NULL, role TEXT NOT NULL,
            tool TEXT, fields TEXT NOT NULL, PRIMARY KEY (session, message_index));
        CREATE VIRTUAL TABLE IF NOT EXISTS search_terms USING fts5(terms, tokenize = 'unicode61 remove_diacritics 0')""",
         postgres="""
        CREATE TABLE IF NOT EXISTS search_docs (
            session TEXT NOT NULL, message_index INTEGER NOT NULL, round INTEGER NOT NULL, role TEXT NOT NULL,
            tool TEXT, fields TEXT[] NOT NULL, terms TSVECTOR NOT NULL, PRIMARY KEY (session, message_index));
        CREATE INDEX IF NOT EXISTS search_docs_terms ON search_docs USING GIN (terms)"""),
    # Append-only memory events per tenant and user (memory/user.py); reads name both.
    Step(7, "a user's memory across sessions (issue 11)", """
        CREATE TABLE IF NOT EXISTS user_memory (
            tenant TEXT NOT NULL, user_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,
            PRIMARY KEY (tenant, user_id, seq))"""),
    # Erasure that keeps the proof (issue 12): a message's text and an edit's value move out of
    # the hashed body into `payload` with its random `salt` (the value an edit replaced into
    # `before_payload`, with its own salt); the body holds their commitments. Erasing empties a
    # pair of columns and leaves a (signed) tombstone in `erasures`. Rows written before keep
    # their text in the body and verify as before (they cannot be erased).
    Step(8, "erasable payloads and erasure tombstones (issue 12)", """
        ALTER TABLE messages ADD COLUMN salt TEXT;
        ALTER TABLE messages ADD COLUMN payload TEXT;
        ALTER TABLE edits ADD COLUMN salt TEXT;
        ALTER TABLE edits ADD COLUMN payload TEXT;
        ALTER TABLE edits ADD COLUMN before_salt TEXT;
        ALTER TABLE edits ADD COLUMN before_payload TEXT;
        CREATE TABLE IF NOT EXISTS erasures (
            session TEXT NOT NULL, kind TEXT NOT NULL, pos INTEGER NOT NULL, tombstone TEXT NOT NULL, signature TEXT,
            PRIMARY KEY (session, kind, pos))"""),
    # A session's token account (Store.add_usage) in integer columns: every render adds to it,
    # and one upsert of four integers costs a fraction of the JSON read-modify-write of a
    # `derived` row that held it before. Those rows move here, counts kept.
    Step(9, "the token account in integer columns (issue 15)", "", sqlite="""
        CREATE TABLE usage (
            session TEXT PRIMARY KEY, renders INTEGER NOT NULL, context_tokens INTEGER NOT NULL,
            source_tokens INTEGER NOT NULL, out_of_band INTEGER NOT NULL);
        INSERT INTO usage SELECT session, coalesce(json_extract(body, '$.renders'), 0),
            coalesce(json_extract(body, '$.context_tokens'), 0), coalesce(json_extract(body, '$.source_tokens'), 0),
            coalesce(json_extract(body, '$.out_of_band'), 0) FROM derived WHERE kind = 'usage' AND key = 0;
        DELETE FROM derived WHERE kind = 'usage'""", postgres="""
        CREATE TABLE usage (
            session TEXT PRIMARY KEY, renders BIGINT NOT NULL, context_tokens BIGINT NOT NULL,
            source_tokens BIGINT NOT NULL, out_of_band BIGINT NOT NULL);
        INSERT INTO usage SELECT session, coalesce((body::jsonb ->> 'renders')::bigint, 0),
            coalesce((body::jsonb ->> 'context_tokens')::bigint, 0), coalesce((body::jsonb ->> 'source_tokens')::bigint, 0),
            coalesce((body::jsonb ->> 'out_of_band')::bigint, 0) FROM derived WHERE kind = 'usage' AND key = 0;
        DELETE FROM derived WHERE kind = 'usage'"""),
)
SCHEMA_VERSION = STEPS[-1].version


def pending(found: int, store: str) -> tuple[Step, ...]:
    """The steps that take a store at schema `found` to SCHEMA_VERSION; a clear error, before
    anything is changed, for a store newer than this package or older than BASE_VERSION."""
    if found > SCHEMA_VERSION:
        raise Errors.SCHEMA_NEWER(store=store, found=found, current=SCHEMA_VERSION)
    if found < BASE_VERSION:
        raise Errors.SCHEMA_TOO_OLD(store=store, found=found, oldest=BASE_VERSION, current=SCHEMA_VERSION)
    return tuple(s for s in STEPS if s.version > found)



def upgrade(execute: Callable[[str], object], found: int | None, store: str, dialect: Dialect,
            db_errors: type[Exception] | tuple[type[Exception], ...]) -> None:
    """Bring a store to SCHEMA_VERSION inside the caller's transaction (the caller stamps the
    version in it too): create the base tables when `found` is None (a new store), then run the
    pending steps. A failing statement is MIGRATION_FAILED; the caller's rollback undoes every step."""
    steps = pending(BASE_VERSION if found is None else found, store)
    if found is None:
        for statement in BASE_SCHEMA.split(";"):
            if statement.strip():
                execute(statement)
    for step in steps:
        for statement in step.statements(dialect):
            try:
                execute(statement)
            except db_errors as exc:
                raise Errors.MIGRATION_FAILED(store=store, found=BASE_VERSION if found is None else found,
                                              current=SCHEMA_VERSION, step=step.version, why=step.why,
                                              detail=str(exc).strip()) from exc
