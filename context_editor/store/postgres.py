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
from ..model import GENESIS_HASH, Edit, Message, SearchDoc, SearchFilter, canonical_json
from . import migrations
from .base import (EDIT_COLUMNS, ERASABLE, KEY_COLUMNS, RETRY_FIX, ROW_COLUMNS, KeyRecord, KnownHeads, SessionInfo, Store, StoredSession, Tombstone, Forget, payload_rows,
                   astuple_key, check_batch, check_records, domain_text, edit_from_row, edit_row, message_from_row,
                   message_row, new_head, payload_text, before_text, key_range, parse_domain_row, raw_session_rows, records_head, redacted,
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

    @contextmanager
    def batch(self) -> Iterator[None]:
        # Appends inside run in this transaction (a lost race's locking path in a savepoint of it).
        with self._conn().transaction():
            yield

    def append(self, domain: str, domain_version: str, message: Message, edits: list[Edit]) -> None:
        # One round trip when this store knows where the session stands (it wrote its head, or the
        # batch says it: the message's index and prev hash, the first edit's seq and prev hash):
        # a single statement that writes only if the session is still there. Anything else (a
        # session another writer moved on, one this process has not written yet) takes the
        # locking path, which tells a lost race from a stale expectation.
        expected = self._heads.expected(message, edits)
        if expected is not None and self._append_one(domain, domain_version, message, edits, *expected):
            return
        self._append_locked(domain, domain_version, message, edits)

    def _append_one(self, domain: str, domain_version: str, message: Message, edits: list[Edit], n_edits: int,
                    last_edit: str) -> bool:
        """The append as one statement, on condition that the session holds `message.index`
        messages and `n_edits` edits ending in the hashes the batch links to. False (nothing
        written) if it does not."""
        s, n_msgs = message.session, message.index
        check_batch(message, edits, n_msgs, n_edits, last_edit, message.prev_hash)
        head = new_head(domain, domain_version, self._domain_sha(domain_version), message, edits, n_msgs, n_edits,
                        last_edit if n_edits else None)
        text, signature = self.sign(head)
        values = {"s": s, "domain": domain, "version": domain_version, "m": head.messages, "e": head.edits,
                  "head": text, "sig": signature, "n_msgs": n_msgs, "n_edits": n_edits,
                  "last_msg": message.prev_hash, "last_edit": last_edit, "idx": message.index, "round": message.round,
                  "body": message.body_text(), "hash": message.hash, "seqs": [e.seq for e in edits],
                  "rounds": [e.round for e in edits], "mis": [e.message_index for e in edits],
                  "bodies": [e.body_text() for e in edits], "hashes": [e.hash for e in edits],
                  "salt": message.salt, "payload": payload_text(message), "salts": [e.salt for e in edits],
                  "payloads": [payload_text(e) for e in edits], "before_salts": [e.before_salt for e in edits],
                  "befores": [before_text(e) for e in edits]}
        session_row = (
            "INSERT INTO sessions VALUES (%(s)s, %(domain)s, %(version)s, %(m)s, %(e)s, %(head)s, %(sig)s) "
            "ON CONFLICT DO NOTHING RETURNING 1" if n_msgs == 0 else
            # UPDATE re-checks its condition on the row as the winner of a race left it.
            "UPDATE sessions SET domain = %(domain)s, domain_version = %(version)s, messages = %(m)s, edits = %(e)s, "
            "head = %(head)s, signature = %(sig)s WHERE session = %(s)s AND messages = %(n_msgs)s "
            "AND edits = %(n_edits)s AND head <> '' AND head::json->>'last_message_hash' = %(last_msg)s "
            "AND head::json->>'last_edit_hash' = %(last_edit)s RETURNING 1")
        with _database_errors(f"appending message {message.index} to session {s!r}"):
            row = self._conn().execute(
                f"WITH head AS ({session_row}), "
                "m AS (INSERT INTO messages SELECT %(s)s, %(idx)s, %(round)s, %(body)s, %(hash)s, %(salt)s, %(payload)s "
                "FROM head RETURNING 1), "
                "e AS (INSERT INTO edits SELECT %(s)s, t.* FROM head, unnest(%(seqs)s::integer[], %(rounds)s::integer[], "
                "%(mis)s::integer[], %(bodies)s::text[], %(hashes)s::text[], %(salts)s::text[], %(payloads)s::text[], %(before_salts)s::text[], "
                "%(befores)s::text[]) AS t "
                "RETURNING 1) "
                "SELECT count(*) FROM head", values).fetchone()
        if not row or not row[0]:
            return False
        self._heads.remember(s, head.messages, head.edits, head.last_edit_hash)
        return True

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
        self._heads.remember(s, head.messages, head.edits, head.last_edit_hash)

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

    def erase(self, tombstones: list[Tombstone], forget: Forget | None = None, keep_derived: tuple[str, ...] = ()) -> None:
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
                c.execute("DELETE FROM derived WHERE session = %s AND NOT kind = ANY(%s)", (session, list(keep_derived)))
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
                                 (session, kind, key, json.dumps(body, ensure_ascii=False)))

    def derived(self, session: str, kind: str, keys: tuple[int, int] | None = None) -> dict[int, dict[str, Any]]:
        lo, hi = keys if keys is not None else (-2**63, 2**63 - 1)
        with _database_errors(f"reading derived {kind} of session {session!r}"):
            rows = self._conn().execute("SELECT key, body FROM derived WHERE session = %s AND kind = %s "
                                        "AND key BETWEEN %s AND %s ORDER BY key", (session, kind, lo, hi)).fetchall()
        return {k: json.loads(b) for k, b in rows}

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

