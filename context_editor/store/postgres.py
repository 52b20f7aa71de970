"""PostgreSQL store: the same tables and guarantees as SQLiteStore, for many concurrent writers.

`append` is one statement that moves the session's row only if it still stands where the
message expects (the head this store last wrote, or what the message's own links say), and
writes the message's rows only then; otherwise it locks only its own session's row (created if
missing, then `SELECT ... FOR UPDATE`), so writers of different sessions never wait for each
other; two writers of the same session are serialised on that row and the loser sees the
winner's counts and gets a StoreError. In a deferred `batch` the appends are held back and sent
together in that same statement (one round trip for many messages), before any other statement
of the connection and before the commit.
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
from ..model import GENESIS_HASH, Edit, Message, SearchDoc, SearchFilter, canonical_json
from . import migrations
from .base import (EDIT_COLUMNS, ERASABLE, KEY_COLUMNS, RETRY_FIX, ROW_COLUMNS, Head, KeyRecord, KnownHeads, SessionInfo, Store, StoredSession, Tombstone, Forget, USAGE_COLUMNS, Usage, add_usage_sql, payload_rows,
                   astuple_key, check_batch, check_records, derived_text, domain_text, edit_from_row, edit_row, message_from_row,
                   message_row, new_head, key_range, parse_domain_row, raw_session_rows, records_head, redacted,
                   stored_sessions)


@contextmanager
def _database_errors(action: str) -> Iterator[None]:
    """Turn driver errors into StoreErrors that say what failed and how to fix it."""
    try:
        yield
    except psycopg.errors.IntegrityError as exc:
        raise Errors.STORE_CONFLICT(problem=f"{action}: rejected by the database: {exc.diag.message_primary or exc}",
                         fix=RETRY_FIX) from exc
    except psycopg.Error as exc:
        raise Errors.STORE(problem=f"{action}: PostgreSQL error: {exc}",
                         fix="check that the server is running and the store URL "
                             "(postgresql://user[:password]@host[:port]/database) is right") from exc


def _key_range(after: str | None, upto: str | None) -> tuple[str, tuple[str, ...]]:
    # COLLATE "C" is code-point order whatever the database locale; index sessions_key_range serves it.
    return key_range(after, upto, 'session COLLATE "C"', "%s")


def _one(cursor: psycopg.Cursor[Any]) -> tuple[Any, ...]:
    """The single row an aggregate query always returns."""
    row = cursor.fetchone()
    assert row is not None
    return tuple(row)


def _lexeme(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def _tsvector(terms: str) -> str:
    """A tsvector literal of the terms with their positions (1-based, capped as PostgreSQL caps them)."""
    positions: dict[str, list[int]] = {}
    for i, term in enumerate(terms.split()[:16383], 1):
        positions.setdefault(term, []).append(i)
    return " ".join(f"{_lexeme(t)}:{','.join(map(str, p[:256]))}" for t, p in positions.items())


class _Held:
    """Appends not sent yet: their rows, and per session where it must stand before them (the
    condition the statement checks) and its head after them."""

    def __init__(self) -> None:
        self.before: dict[str, tuple[int, int, str, str]] = {}  # session -> (messages, edits, last message hash, last edit hash)
        self.after: dict[str, Head] = {}
        self.messages: list[tuple[Any, ...]] = []
        self.edits: list[tuple[Any, ...]] = []
        self.conflicts: list[str] = []  # sessions a deferred batch found moved on by another writer

    def add(self, domain: str, domain_version: str, sha: str | None, message: Message, edits: list[Edit],
            known: KnownHeads) -> bool:
        """Hold one append back; False (nothing held) if where its session stands is not known."""
        s = message.session
        head = self.after.get(s)
        if head is not None:  # the session has appends held here: it continues from their head
            start = (head.messages, head.edits, head.last_message_hash, head.last_edit_hash)
        else:
            expected = known.expected(message, edits)
            if expected is None:
                return False
            start = (message.index, expected[0], message.prev_hash, expected[1])
        n_msgs, n_edits, last_msg, last_edit = start
        check_batch(message, edits, n_msgs, n_edits, last_edit, last_msg)
        row, rows = message_row(message), [edit_row(e) for e in edits]  # all that can fail, before anything is held
        self.before.setdefault(s, start)
        self.after[s] = new_head(domain, domain_version, sha, message, edits, n_msgs, n_edits, last_edit if n_edits else None)
        self.messages.append(row)
        self.edits.extend(rows)
        return True

    def take(self) -> _Held:
        """The appends held so far (this object is emptied; its conflicts stay)."""
        out = _Held()
        out.before, out.after, out.messages, out.edits = self.before, self.after, self.messages, self.edits
        self.before, self.after, self.messages, self.edits = {}, {}, [], []
        return out


def _columns(rows: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Rows as one list per column (a statement takes each column as an array)."""
    return [list(c) for c in zip(*rows)] if rows else [[] for _ in range(width)]


# The append of any number of messages in one statement. `v`: one row per session, where it must
# stand (n_msgs, n_edits and the chain ends) and its new head. A session moves only if its row
# still holds exactly that (UPDATE re-checks its condition on the row as the winner of a race left
# it; a new session is one INSERT that a racing one makes do nothing), and only the messages and
# edits of sessions that moved are written. Returns the sessions that moved. The arrays go in
# binary (%b): the text form escapes every element with a regular expression, the larger cost.
_APPEND = (
    "WITH v AS (SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::integer[], %b::integer[], %b::text[], "
    "%b::text[], %b::integer[], %b::integer[], %b::text[], %b::text[]) AS v(session, domain, domain_version, messages, "
    "edits, head, signature, n_msgs, n_edits, last_msg, last_edit)), "
    "moved AS (UPDATE sessions s SET domain = v.domain, domain_version = v.domain_version, messages = v.messages, "
    "edits = v.edits, head = v.head, signature = v.signature FROM v WHERE v.n_msgs > 0 AND s.session = v.session "
    "AND s.messages = v.n_msgs AND s.edits = v.n_edits AND CASE WHEN s.head <> '' THEN "
    "s.head::json->>'last_message_hash' = v.last_msg AND s.head::json->>'last_edit_hash' = v.last_edit END "
    "RETURNING s.session), "
    "made AS (INSERT INTO sessions SELECT session, domain, domain_version, messages, edits, head, signature FROM v "
    "WHERE n_msgs = 0 ON CONFLICT DO NOTHING RETURNING session), "
    "ok AS (SELECT session FROM moved UNION ALL SELECT session FROM made), "
    "m AS (INSERT INTO messages SELECT t.* FROM unnest(%b::text[], %b::integer[], %b::integer[], %b::text[], %b::text[], "
    "%b::text[], %b::text[]) AS t(session, idx, round, body, hash, salt, payload) WHERE t.session IN (SELECT session FROM ok)), "
    "e AS (INSERT INTO edits SELECT t.* FROM unnest(%b::text[], %b::integer[], %b::integer[], %b::integer[], %b::text[], "
    "%b::text[], %b::text[], %b::text[], %b::text[], %b::text[]) AS t(session, seq, round, message_index, body, hash, salt, "
    "payload, before_salt, before_payload) WHERE t.session IN (SELECT session FROM ok)) "
    "SELECT session FROM ok")

_ADD_USAGE = add_usage_sql("%s")


class PostgresStore(Store):
    def __init__(self, url: str):
        self.url = url
        self._local = threading.local()  # one connection per thread: a transaction is per connection
        self._opened: list[psycopg.Connection] = []
        self._shas: dict[str, str] = {}  # domain version -> sha256 of its stored document
        self._heads = KnownHeads()  # lets an append go in one statement
        with _database_errors("creating or upgrading the schema"), self._conn().transaction():
            # CREATE TABLE IF NOT EXISTS is not safe against itself: two processes opening a new
            # database at once can both try to create a table. The lock makes them take turns.
            # Tables, every migration step and the version stamp commit together or not at all.
            c = self._conn()
            c.execute("SELECT pg_advisory_xact_lock(hashtext('context_editor.schema'))")
            c.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            version, has_tables = _one(c.execute(
                "SELECT (SELECT max(version) FROM schema_version), to_regclass('messages') IS NOT NULL"))
            if (has_tables, version) != (True, migrations.SCHEMA_VERSION):
                migrations.upgrade(c.execute, (version or 1) if has_tables else None, redacted(url), "postgres",
                                   psycopg.Error)
                c.execute("DELETE FROM schema_version")
                c.execute("INSERT INTO schema_version VALUES (%s)", (migrations.SCHEMA_VERSION,))

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
        held = getattr(self._local, "held", None)
        if held is not None and held.messages:  # a deferred batch: what it holds goes before anything else
            self._send(conn, held.take(), held)
        return conn

    def put_domain(self, version_hash: str, name: str, source: dict[str, Any]) -> None:
        with _database_errors(f"storing domain {version_hash}"):
            # The text keeps the author's key order (replay reproduces the field order), as in SQLite.
            self._conn().execute("INSERT INTO domains VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                                 (version_hash, name, *domain_text(source)))

    def get_domain(self, version_hash: str) -> dict[str, Any] | None:
        with _database_errors(f"reading domain {version_hash}"):
            row = self._conn().execute("SELECT source, sha256 FROM domains WHERE version_hash = %s",
                                       (version_hash,)).fetchone()
        return parse_domain_row(version_hash, row)

    def session(self, session: str) -> SessionInfo | None:
        with _database_errors(f"reading session {session!r}"):
            row = self._conn().execute(
                "SELECT session, domain, domain_version, messages, edits, "
                "(SELECT count(*) FROM erasures e WHERE e.session = s.session) FROM sessions s WHERE session = %s",
                (session,)).fetchone()
        return SessionInfo(*row) if row else None

    def data_version(self) -> tuple[int, ...] | None:
        # Nothing tells a connection that another one committed without a round trip, which is
        # what reading the session's head costs: read the head.
        return None

    @contextmanager
    def batch(self, deferred: bool = True) -> Iterator[None]:
        # Appends inside run in this transaction (a lost race's locking path in a savepoint of it).
        # Deferred: held back and sent together (`_send`) before the connection's next statement
        # and before the commit. A session another writer moved meanwhile gets none of its rows
        # written, and the batch then raises a conflict and is rolled back whole.
        c = self._conn()
        if getattr(self._local, "held", None) is not None:  # inside a deferred batch: the outer one sends and commits
            yield
            return
        with c.transaction():
            if not deferred:
                yield
                return
            held = self._local.held = _Held()
            try:
                yield
                self._send(c, held.take(), held)
            finally:
                self._local.held = None
            if held.conflicts:
                raise Errors.STORE_CONFLICT(
                    problem=f"a batch of appends: another writer moved session(s) {', '.join(map(repr, held.conflicts[:5]))} "
                            "on since this process read them; nothing of the batch was written", fix=RETRY_FIX)

    def append(self, domain: str, domain_version: str, message: Message, edits: list[Edit]) -> None:
        # One round trip when this store knows where the session stands (it wrote its head, or the
        # batch says it: the message's index and prev hash, the first edit's seq and prev hash):
        # a single statement that writes only if the session is still there. Anything else (a
        # session another writer moved on, one this process has not written yet) takes the
        # locking path, which tells a lost race from a stale expectation.
        sha = self._domain_sha(domain_version)
        held = getattr(self._local, "held", None)
        if held is not None:  # a deferred batch: sent later with the others
            if held.add(domain, domain_version, sha, message, edits, self._heads):
                return
        else:
            one = _Held()
            if one.add(domain, domain_version, sha, message, edits, self._heads) and self._send(self._conn(), one):
                return
        self._append_locked(domain, domain_version, message, edits)

    def _send(self, c: psycopg.Connection, held: _Held, batch: _Held | None = None) -> bool:
        """Write held appends in one statement (`_APPEND`): each session only if it still stands
        where its first held append expected. True if every session moved; the sessions that did
        not are added to `batch.conflicts` (a deferred batch), their rows not written."""
        if not held.after:
            return True
        sessions = [(s, held.before[s], h, *self.sign(h)) for s, h in held.after.items()]
        columns = [[s for s, *_ in sessions], [h.domain for _, _, h, *_ in sessions],
                   [h.domain_version for _, _, h, *_ in sessions], [h.messages for _, _, h, *_ in sessions],
                   [h.edits for _, _, h, *_ in sessions], [t for *_, t, _ in sessions], [g for *_, g in sessions],
                   *([b[i] for _, b, *_ in sessions] for i in range(4))]
        first = held.messages[0]
        with _database_errors(f"appending message {first[1]} to session {first[0]!r}" if len(held.messages) == 1
                              else f"appending a batch of {len(held.messages)} messages"):
            moved = {r[0] for r in c.execute(_APPEND, [*columns, *_columns(held.messages, 7), *_columns(held.edits, 10)])}
        for s, head in held.after.items():
            if s in moved:
                self._heads.remember(s, head)
            elif batch is not None:
                batch.conflicts.append(s)
        return len(moved) == len(held.after)

    def _domain_sha(self, version_hash: str) -> str | None:
        """The SHA-256 of a stored domain document (a row never changes once written: kept)."""
        sha = self._shas.get(version_hash)
        if sha is None:
            with _database_errors(f"reading domain {version_hash}"):
                row = self._conn().execute("SELECT sha256 FROM domains WHERE version_hash = %s", (version_hash,)).fetchone()
            sha = row[0] if row else None
            if sha is not None:
                self._shas[version_hash] = sha
        return sha

    def _append_locked(self, domain: str, domain_version: str, message: Message, edits: list[Edit]) -> None:
        """The append that reads and locks the session's row first (several round trips)."""
        c, s = self._conn(), message.session
        with _database_errors(f"appending message {message.index} to session {s!r}"), c.transaction():
            # The session row is this session's lock. A writer racing on a new session waits on
            # the INSERT until the first one commits, then reads its counts like any other loser.
            c.execute("INSERT INTO sessions (session, domain, domain_version) VALUES (%s, %s, %s) "
                      "ON CONFLICT DO NOTHING", (s, domain, domain_version))
            locked = c.execute(
                "SELECT messages, edits, (SELECT hash FROM edits e WHERE e.session = s.session AND e.seq = s.edits - 1), "
                "(SELECT hash FROM messages m WHERE m.session = s.session AND m.idx = s.messages - 1), "
                "(SELECT sha256 FROM domains d WHERE d.version_hash = %s) "
                "FROM sessions s WHERE session = %s FOR UPDATE", (domain_version, s)).fetchone()
            assert locked is not None  # the INSERT above made the row or found it
            n_msgs, n_edits, last_hash, last_msg, sha = locked
            check_batch(message, edits, n_msgs, n_edits, last_hash or GENESIS_HASH, last_msg or GENESIS_HASH)
            c.execute("INSERT INTO messages VALUES (%s, %s, %s, %s, %s, %s, %s)", message_row(message))
            with c.cursor() as cur:
                cur.executemany("INSERT INTO edits VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", [edit_row(e) for e in edits])
            head = new_head(domain, domain_version, sha, message, edits, n_msgs, n_edits, last_hash)
            c.execute("UPDATE sessions SET domain = %s, domain_version = %s, messages = %s, edits = %s, head = %s, "
                      "signature = %s WHERE session = %s",
                      (domain, domain_version, head.messages, head.edits, *self.sign(head), s))
        self._heads.remember(s, head)

    def append_records(self, session: str, edits: list[Edit]) -> None:
        c = self._conn()
        with _database_errors(f"appending records to session {session!r}"), c.transaction():
            locked = c.execute(
                "SELECT session, domain, domain_version, messages, edits, "
                "(SELECT hash FROM edits e WHERE e.session = s.session AND e.seq = s.edits - 1), "
                "(SELECT hash FROM messages m WHERE m.session = s.session AND m.idx = s.messages - 1), "
                "(SELECT sha256 FROM domains d WHERE d.version_hash = s.domain_version) "
                "FROM sessions s WHERE session = %s FOR UPDATE", (session,)).fetchone()
            info = SessionInfo(*locked[:5]) if locked else SessionInfo(session, "", "", 0, 0)
            last_hash, last_msg, sha = locked[5:] if locked else (None, None, None)
            check_records(session, edits, info.messages, info.edits, last_hash or GENESIS_HASH)
            if edits:
                with c.cursor() as cur:
                    cur.executemany("INSERT INTO edits VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", [edit_row(e) for e in edits])
                head = records_head(info, sha, last_msg, edits)
                c.execute("UPDATE sessions SET edits = %s, head = %s, signature = %s WHERE session = %s",
                          (head.edits, *self.sign(head), session))

    def messages(self, session: str, since_round: int | None = None) -> list[Message]:
        with _database_errors(f"reading messages of session {session!r}"):
            rows = self._conn().execute(
                f"SELECT {ROW_COLUMNS} FROM messages WHERE session = %s AND round >= %s ORDER BY idx",
                (session, since_round if since_round is not None else -1)).fetchall()
        return [message_from_row(*r) for r in rows]

    def edits(self, session: str, since_seq: int | None = None) -> list[Edit]:
        with _database_errors(f"reading edits of session {session!r}"):
            rows = self._conn().execute(f"SELECT {EDIT_COLUMNS} FROM edits WHERE session = %s AND seq > %s ORDER BY seq",
                                        (session, since_seq if since_seq is not None else -1)).fetchall()
        return [edit_from_row(*r) for r in rows]

    def known_message_ids(self, session: str, ids: list[str]) -> set[str]:
        if not ids:
            return set()
        with _database_errors(f"reading message ids of session {session!r}"):
            rows = self._conn().execute(
                "SELECT body::json->>'id' FROM messages WHERE session = %s AND body::json->>'id' = ANY(%s)",
                (session, list(ids))).fetchall()
        return {r[0] for r in rows}

    def put_key(self, key: KeyRecord) -> None:
        with _database_errors(f"storing key {key.key_id}"):
            self._conn().execute("INSERT INTO api_keys VALUES (%s, %s, %s, %s, %s, %s)", astuple_key(key))

    def get_key(self, key_hash: str) -> KeyRecord | None:
        with _database_errors("reading a key"):
            row = self._conn().execute(f"SELECT {KEY_COLUMNS} FROM api_keys WHERE key_hash = %s", (key_hash,)).fetchone()
        return KeyRecord(*row) if row else None

    def keys(self) -> list[KeyRecord]:
        with _database_errors("listing keys"):
            rows = self._conn().execute(f'SELECT {KEY_COLUMNS} FROM api_keys ORDER BY key_id COLLATE "C"').fetchall()
        return [KeyRecord(*r) for r in rows]

    def revoke_key(self, key_id: str, when: str) -> bool:
        with _database_errors(f"revoking key {key_id}"):
            cur = self._conn().execute("UPDATE api_keys SET revoked = %s WHERE key_id = %s AND revoked IS NULL",
                                       (when, key_id))
        return cur.rowcount == 1

    def sessions(self) -> list[str]:
        # COLLATE "C" sorts by code point, like sorted() in the other stores, whatever the database locale.
        with _database_errors("listing sessions"):
            return [r[0] for r in self._conn().execute('SELECT session FROM sessions ORDER BY session COLLATE "C"')]

    def session_keys(self, after: str | None = None, upto: str | None = None, limit: int | None = None) -> list[str]:
        where, params = _key_range(after, upto)
        with _database_errors("listing session keys"):
            rows = self._conn().execute(f'SELECT session FROM sessions WHERE {where} ORDER BY session COLLATE "C" LIMIT %s',
                                        (*params, limit)).fetchall()
        return [r[0] for r in rows]

    def read_sessions(self, keys: list[str]) -> list[StoredSession]:
        with _database_errors(f"reading a batch of {len(keys)} sessions"):
            c = self._conn()
            infos = c.execute("SELECT session, domain, domain_version, messages, edits FROM sessions "
                              "WHERE session = ANY(%s)", (keys,)).fetchall()
            msgs = c.execute(f"SELECT session, {ROW_COLUMNS} FROM messages WHERE session = ANY(%s) ORDER BY session, idx",
                             (keys,)).fetchall()
            edits = c.execute(f"SELECT session, {EDIT_COLUMNS} FROM edits WHERE session = ANY(%s) ORDER BY session, seq",
                              (keys,)).fetchall()
        return stored_sessions(keys, infos, msgs, edits)

    def raw_rows(self, session: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        with _database_errors(f"reading rows of session {session!r}"):
            c = self._conn()
            msgs = c.execute("SELECT idx, round, body, hash FROM messages WHERE session = %s ORDER BY idx", (session,)).fetchall()
            edits = c.execute("SELECT seq, round, message_index, body, hash FROM edits WHERE session = %s ORDER BY seq",
                              (session,)).fetchall()
        return msgs, edits

    def raw_payloads(self, session: str) -> dict[tuple[str, int], tuple[Any, Any]]:
        with _database_errors(f"reading payloads of session {session!r}"):
            c = self._conn()
            out = payload_rows("message", c.execute("SELECT idx, salt, payload FROM messages WHERE session = %s",
                                                    (session,)).fetchall())
            out.update(payload_rows("edit", c.execute(
                "SELECT seq, salt, payload, before_salt, before_payload FROM edits WHERE session = %s", (session,)).fetchall()))
        return out

    def erasures(self, session: str) -> list[tuple[str, int, str, str | None]]:
        with _database_errors(f"reading erasures of session {session!r}"):
            return [(r[0], r[1], r[2], r[3]) for r in self._conn().execute(
                "SELECT kind, pos, tombstone, signature FROM erasures WHERE session = %s ORDER BY kind, pos",
                (session,)).fetchall()]

    def erase(self, tombstones: list[Tombstone], forget: Forget | None = None) -> None:
        c = self._conn()
        with _database_errors("erasing"), c.transaction():
            for t in tombstones:
                table, key, salt, payload = ERASABLE[t.kind]
                c.execute(f"UPDATE {table} SET {salt} = NULL, {payload} = NULL WHERE session = %s AND {key} = %s",
                          (t.session, t.pos))
                c.execute("INSERT INTO erasures VALUES (%s, %s, %s, %s, %s) ON CONFLICT (session, kind, pos) DO UPDATE "
                          "SET tombstone = excluded.tombstone, signature = excluded.signature",
                          (t.session, t.kind, t.pos, t.text(), self.signer.sign(t.text()) if self.signer else None))
            for session in sorted({t.session for t in tombstones}):
                c.execute("DELETE FROM derived WHERE session = %s", (session,))
                c.execute("DELETE FROM search_docs WHERE session = %s", (session,))  # the text's terms (derived)
            for (tenant, user), test in (forget or {}).items():
                rows = c.execute("SELECT seq, body FROM user_memory WHERE tenant = %s AND user_id = %s FOR UPDATE",
                                 (tenant, user)).fetchall()
                gone = [seq for seq, body in rows if test(json.loads(body))]
                c.execute("DELETE FROM user_memory WHERE tenant = %s AND user_id = %s AND seq = ANY(%s)", (tenant, user, gone))

    def raw_sessions(self, after: str | None = None, upto: str | None = None) -> dict[str, tuple[Any, ...] | None]:
        where, params = _key_range(after, upto)
        with _database_errors("listing every stored session"):
            return raw_session_rows(lambda sql, p: self._conn().execute(sql, p).fetchall(), where, params)

    def raw_domains(self) -> dict[str, tuple[Any, ...]]:
        with _database_errors("reading the domains table"):
            rows = self._conn().execute("SELECT version_hash, name, source, sha256 FROM domains").fetchall()
        return {r[0]: tuple(r[1:]) for r in rows}

    def put_derived(self, session: str, kind: str, key: int, body: dict[str, Any]) -> None:
        with _database_errors(f"storing derived {kind} of session {session!r}"):
            self._conn().execute("INSERT INTO derived VALUES (%s, %s, %s, %s) ON CONFLICT (session, kind, key) "
                                 "DO UPDATE SET body = excluded.body",
                                 (session, kind, key, derived_text(body)))

    def add_usage(self, session: str, usage: Usage) -> None:
        with _database_errors(f"adding to the token account of session {session!r}"):
            self._conn().execute(_ADD_USAGE, (session, *usage.row()))

    def usage(self, session: str) -> Usage:
        with _database_errors(f"reading the token account of session {session!r}"):
            row = self._conn().execute(f"SELECT {USAGE_COLUMNS} FROM usage WHERE session = %s", (session,)).fetchone()
        return Usage(*row) if row else Usage()

    def raw_derived(self, session: str, kind: str, keys: tuple[int, int] | None = None) -> dict[int, bytes]:
        lo, hi = keys if keys is not None else (-2**63, 2**63 - 1)
        with _database_errors(f"reading derived {kind} of session {session!r}"):
            return dict(self._conn().execute("SELECT key, convert_to(body, 'UTF8') FROM derived WHERE session = %s "
                                             "AND kind = %s AND key BETWEEN %s AND %s ORDER BY key", (session, kind, lo, hi)).fetchall())

    def append_user_memory(self, tenant: str, user: str, events: list[dict[str, Any]]) -> None:
        self._write_user_memory(tenant, user, events, replace=False)

    def replace_user_memory(self, tenant: str, user: str, events: list[dict[str, Any]]) -> None:
        self._write_user_memory(tenant, user, events, replace=True)

    def _write_user_memory(self, tenant: str, user: str, events: list[dict[str, Any]], replace: bool) -> None:
        c = self._conn()
        with _database_errors(f"writing the memory of user {user!r}"), c.transaction():
            # One writer per user at a time: the lock lives as long as the transaction.
            c.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{tenant}/{user}",))
            if replace:
                c.execute("DELETE FROM user_memory WHERE tenant = %s AND user_id = %s", (tenant, user))
            start = _one(c.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM user_memory WHERE tenant = %s AND user_id = %s",
                                   (tenant, user)))[0]
            with c.cursor() as cur:
                cur.executemany("INSERT INTO user_memory VALUES (%s, %s, %s, %s)",
                                [(tenant, user, start + i, canonical_json(ev)) for i, ev in enumerate(events)])

    def user_memory(self, tenant: str, user: str) -> list[dict[str, Any]]:
        with _database_errors(f"reading the memory of user {user!r}"):
            rows = self._conn().execute("SELECT body FROM user_memory WHERE tenant = %s AND user_id = %s ORDER BY seq",
                                        (tenant, user)).fetchall()
        return [json.loads(b) for (b,) in rows]

    def drop_derived(self, session: str, kind: str) -> None:
        with _database_errors(f"dropping derived {kind} of session {session!r}"):
            self._conn().execute("DELETE FROM derived WHERE session = %s AND kind = %s", (session, kind))

    def index_search(self, session: str, docs: list[SearchDoc]) -> None:
        c = self._conn()
        with _database_errors(f"indexing messages of session {session!r}"), c.transaction():
            for d in docs:
                c.execute("INSERT INTO search_docs VALUES (%s, %s, %s, %s, %s, %s, %s::tsvector) "
                          "ON CONFLICT (session, message_index) DO UPDATE SET round = EXCLUDED.round, role = EXCLUDED.role, "
                          "tool = EXCLUDED.tool, fields = EXCLUDED.fields, terms = EXCLUDED.terms",
                          (session, d.message_index, d.round, d.role, d.tool, list(d.fields), _tsvector(d.terms)))

    def search(self, session: str, terms: list[str], where: SearchFilter, limit: int) -> list[tuple[int, float]]:
        lexemes = [_lexeme(t) for t in dict.fromkeys(terms) if t.strip()]
        if not lexemes:
            return []
        sql = ["SELECT message_index, ts_rank(terms, q) AS rank FROM search_docs, CAST(%s AS tsquery) q "
               "WHERE session = %s AND terms @@ q"]
        args: list[Any] = [" | ".join(lexemes), session]
        if where.roles is not None:
            sql.append("AND role = ANY(%s)")
            args.append(list(where.roles))
        if where.rounds is not None:
            sql.append("AND round BETWEEN %s AND %s")
            args += where.rounds
        if where.tools is not None:
            sql.append("AND tool = ANY(%s)")
            args.append(list(where.tools))
        if where.fields is not None:
            sql.append("AND fields && %s::text[]")
            args.append(list(where.fields))
        sql.append("ORDER BY rank DESC, message_index DESC LIMIT %s")
        with _database_errors(f"searching session {session!r}"):
            rows = self._conn().execute(" ".join(sql), (*args, limit)).fetchall()
        return [(int(i), float(rank)) for i, rank in rows]

    def search_indexed(self, session: str) -> int:
        with _database_errors(f"reading the search index of session {session!r}"):
            value = _one(self._conn().execute("SELECT max(message_index) FROM search_docs WHERE session = %s", (session,)))[0]
        return -1 if value is None else int(value)

    def drop_search(self, session: str) -> None:
        with _database_errors(f"dropping the search index of session {session!r}"):
            self._conn().execute("DELETE FROM search_docs WHERE session = %s", (session,))

    def messages_at(self, session: str, indexes: list[int]) -> list[Message]:
        with _database_errors(f"reading messages of session {session!r}"):
            rows = self._conn().execute(f"SELECT {ROW_COLUMNS} FROM messages WHERE session = %s AND idx = ANY(%s) ORDER BY idx",
                                        (session, sorted(set(indexes)))).fetchall()
        return [message_from_row(*r) for r in rows]

    def close(self) -> None:
        for conn in self._opened:
            conn.close()
        self._opened.clear()

