"""PostgreSQL store: the same tables and guarantees as SQLiteStore, for many concurrent writers.

`append` locks only its own session's row (created if missing, then `SELECT ... FOR UPDATE`),
so writers of different sessions never wait for each other; two writers of the same session
are serialised on that row and the loser sees the winner's counts and gets a StoreError.
Bodies are TEXT holding canonical JSON, so hashes are verified on exactly the stored text.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from ..errors import Errors
from ..model import GENESIS_HASH, Edit, Message, canonical_json
from .base import RETRY_FIX, SCHEMA, SessionInfo, Store, check_batch, edit_from_row, edit_row




@contextmanager
def _database_errors(action: str) -> Iterator[None]:
    """Turn driver errors into StoreErrors that say what failed and how to fix it."""
    try:
        yield
    except psycopg.errors.IntegrityError as exc:
        raise Errors.STORE(problem=f"{action}: rejected by the database: {exc.diag.message_primary or exc}",
                         fix=RETRY_FIX) from exc
    except psycopg.Error as exc:
        raise Errors.STORE(problem=f"{action}: PostgreSQL error: {exc}",
                         fix="check that the server is running and the store URL "
                             "(postgresql://user[:password]@host[:port]/database) is right") from exc


class PostgresStore(Store):
    def __init__(self, url: str):
        self.url = url
        self._local = threading.local()  # one connection per thread: a transaction is per connection
        self._opened: list[psycopg.Connection] = []
        with _database_errors("creating the schema"), self._conn().transaction():
            # CREATE TABLE IF NOT EXISTS is not safe against itself: two processes opening a new
            # database at once can both try to create a table. The lock makes them take turns.
            self._conn().execute("SELECT pg_advisory_xact_lock(hashtext('context_editor.schema'))")
            self._conn().execute(SCHEMA)

    def _conn(self) -> psycopg.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            try:
                conn = psycopg.connect(self.url, autocommit=True)
            except psycopg.Error as exc:
                raise Errors.STORE(problem=f"cannot connect to PostgreSQL: {exc}",
                                 fix="start the server, check host, port, user and password in the URL, "
                                     "and create the database (createdb NAME) if it does not exist") from exc
            self._local.conn = conn
            self._opened.append(conn)
        return conn

    def put_domain(self, version_hash: str, name: str, source: dict[str, Any]) -> None:
        with _database_errors(f"storing domain {version_hash}"):
            self._conn().execute("INSERT INTO domains VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                                 (version_hash, name, canonical_json(source)))

    def get_domain(self, version_hash: str) -> dict[str, Any] | None:
        with _database_errors(f"reading domain {version_hash}"):
            row = self._conn().execute("SELECT source FROM domains WHERE version_hash = %s", (version_hash,)).fetchone()
        return json.loads(row[0]) if row else None

    def session(self, session: str) -> SessionInfo | None:
        with _database_errors(f"reading session {session!r}"):
            row = self._conn().execute(
                "SELECT session, domain, domain_version, messages, edits FROM sessions WHERE session = %s",
                (session,)).fetchone()
        return SessionInfo(*row) if row else None

    def append(self, domain: str, domain_version: str, message: Message, edits: list[Edit]) -> None:
        c, s = self._conn(), message.session
        with _database_errors(f"appending message {message.index} to session {s!r}"), c.transaction():
            # The session row is this session's lock. A writer racing on a new session waits on
            # the INSERT until the first one commits, then reads its counts like any other loser.
            c.execute("INSERT INTO sessions (session, domain, domain_version) VALUES (%s, %s, %s) "
                      "ON CONFLICT DO NOTHING", (s, domain, domain_version))
            locked = c.execute(
                "SELECT messages, edits, (SELECT hash FROM edits e WHERE e.session = s.session AND e.seq = s.edits - 1) "
                "FROM sessions s WHERE session = %s FOR UPDATE", (s,)).fetchone()
            assert locked is not None  # the INSERT above made the row or found it
            n_msgs, n_edits, last_hash = locked
            check_batch(message, edits, n_msgs, n_edits, last_hash or GENESIS_HASH)
            c.execute("INSERT INTO messages VALUES (%s, %s, %s, %s, %s)",
                      (s, message.index, message.round, canonical_json(message.body()), message.hash))
            with c.cursor() as cur:
                cur.executemany("INSERT INTO edits VALUES (%s, %s, %s, %s, %s, %s)", [edit_row(e) for e in edits])
            c.execute("UPDATE sessions SET domain = %s, domain_version = %s, messages = %s, edits = %s "
                      "WHERE session = %s", (domain, domain_version, n_msgs + 1, n_edits + len(edits), s))

    def messages(self, session: str, since_round: int | None = None) -> list[Message]:
        with _database_errors(f"reading messages of session {session!r}"):
            rows = self._conn().execute(
                "SELECT body, hash FROM messages WHERE session = %s AND round >= %s ORDER BY idx",
                (session, since_round if since_round is not None else -1)).fetchall()
        return [Message.from_dict({**json.loads(b), "hash": h}) for b, h in rows]

    def edits(self, session: str) -> list[Edit]:
        with _database_errors(f"reading edits of session {session!r}"):
            rows = self._conn().execute("SELECT body, hash FROM edits WHERE session = %s ORDER BY seq",
                                        (session,)).fetchall()
        return [edit_from_row(b, h) for b, h in rows]

    def sessions(self) -> list[str]:
        # COLLATE "C" sorts by code point, like sorted() in the other stores, whatever the database locale.
        with _database_errors("listing sessions"):
            return [r[0] for r in self._conn().execute('SELECT session FROM sessions ORDER BY session COLLATE "C"')]

    def raw_rows(self, session: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        with _database_errors(f"reading rows of session {session!r}"):
            c = self._conn()
            msgs = c.execute("SELECT idx, body, hash FROM messages WHERE session = %s ORDER BY idx", (session,)).fetchall()
            edits = c.execute("SELECT seq, round, message_index, body, hash FROM edits WHERE session = %s ORDER BY seq",
                              (session,)).fetchall()
        return msgs, edits

    def put_derived(self, session: str, kind: str, key: int, body: dict[str, Any]) -> None:
        with _database_errors(f"storing derived {kind} of session {session!r}"):
            self._conn().execute("INSERT INTO derived VALUES (%s, %s, %s, %s) ON CONFLICT (session, kind, key) "
                                 "DO UPDATE SET body = excluded.body",
                                 (session, kind, key, json.dumps(body, ensure_ascii=False)))

    def derived(self, session: str, kind: str) -> dict[int, dict[str, Any]]:
        with _database_errors(f"reading derived {kind} of session {session!r}"):
            rows = self._conn().execute("SELECT key, body FROM derived WHERE session = %s AND kind = %s ORDER BY key",
                                        (session, kind)).fetchall()
        return {k: json.loads(b) for k, b in rows}

    def drop_derived(self, session: str, kind: str) -> None:
        with _database_errors(f"dropping derived {kind} of session {session!r}"):
            self._conn().execute("DELETE FROM derived WHERE session = %s AND kind = %s", (session, kind))

    def close(self) -> None:
        for conn in self._opened:
            conn.close()
        self._opened.clear()

