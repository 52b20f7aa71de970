"""SQLite store: the embedded default (WAL, one transaction per message).

Edits are stored as their canonical JSON body plus hash, so `audit verify` recomputes hashes
from exactly the bytes that were written; `seq`, `round` and `message_index` are also columns
for indexed reads and are cross-checked against the body.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import Errors
from ..model import GENESIS_HASH, Edit, Message, SearchDoc, SearchFilter, canonical_json
from . import migrations
from .base import (EDIT_COLUMNS, ERASABLE, KEY_COLUMNS, RETRY_FIX, ROW_COLUMNS, Head, KeyRecord, KnownHeads, SessionInfo, Store, StoredSession, Tombstone, Forget, USAGE_COLUMNS, Usage, add_usage_sql, payload_rows,
                   astuple_key, check_batch, check_records, derived_text, domain_text, edit_from_row, edit_row, head_hashes,
                   message_from_row, message_row, new_head, key_range, parse_domain_row, raw_session_rows, records_head,
                   stored_sessions)


def search_session_term(session: str) -> str:
    """A term only the session's documents carry (a query intersects with it first)."""
    return "sess" + hashlib.sha256(session.encode("utf-8")).hexdigest()[:24]


def search_terms_query(session: str, terms: list[str]) -> str | None:
    """An FTS5 query: the session's term and any of `terms` (each quoted: never query syntax)."""
    quoted = [f'"{t.replace(chr(34), chr(34) * 2)}"' for t in dict.fromkeys(terms) if t.strip()]
    return f'"{search_session_term(session)}" AND ({" OR ".join(quoted)})' if quoted else None

_ADD_USAGE = add_usage_sql("?")


class SQLiteStore(Store):
    def __init__(self, path: str | Path, create: bool = True):
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        if not create and not (self.path == ":memory:" or Path(self.path).is_file()):
            raise Errors.NO_STORE(path=self.path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()  # per thread: its connection, the connection's serial and writes (`data_version`)
        self._serials = itertools.count()
        self._shas: dict[str, str] = {}  # domain version -> sha256 of its stored document
        self._heads = KnownHeads()  # lets an append skip reading the session's head
        c = self._conn()
        try:
            if self._schema_version(c) != (True, migrations.SCHEMA_VERSION):
                # One transaction for the tables, every migration step and the version stamp:
                # a kill or a failing step in between leaves the store as it was.
                c.execute("BEGIN IMMEDIATE")
                has_tables, version = self._schema_version(c)
                if (has_tables, version) != (True, migrations.SCHEMA_VERSION):
                    migrations.upgrade(c.execute, version if has_tables else None, self.path, "sqlite", sqlite3.Error)
                    c.execute(f"PRAGMA user_version = {migrations.SCHEMA_VERSION}")
                c.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise Errors.STORE(problem=f"{self.path} is not a usable SQLite database ({exc})", fix="pass another --store path") from exc
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise

    @staticmethod
    def _schema_version(c: sqlite3.Connection) -> tuple[bool, int]:
        has_tables = c.execute("SELECT count(*) FROM sqlite_master WHERE name = 'messages'").fetchone()[0] > 0
        return has_tables, int(c.execute("PRAGMA user_version").fetchone()[0])

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA busy_timeout=30000")
                conn.execute("PRAGMA secure_delete=ON")  # erased text must not survive in free space
            except sqlite3.Error as exc:
                raise Errors.STORE(problem=f"cannot open SQLite database {self.path}: {exc}",
                                 fix="check the path and its permissions, or pass another --store") from exc
            self._local.conn, self._local.serial, self._local.writes = conn, next(self._serials), 0
        return conn

    def data_version(self) -> tuple[int, ...] | None:
        # PRAGMA data_version moves when another connection (another thread's, another process's)
        # commits; this connection's own appends, records and erasures are counted here. The
        # serial: the values of two connections are not comparable.
        c = self._conn()
        return self._local.serial, c.execute("PRAGMA data_version").fetchone()[0], self._local.writes

    def after_own_write(self, mark: tuple[int, ...]) -> tuple[int, ...] | None:
        # This connection's own commit leaves its PRAGMA data_version as it was; a commit of
        # another connection before or after it moves it (the write's own transaction start sees one).
        serial, version, writes = mark
        return None if self._conn().in_transaction else (serial, version, writes + 1)

    def put_domain(self, version_hash: str, name: str, source: dict[str, Any]) -> None:
        self._conn().execute("INSERT OR IGNORE INTO domains VALUES (?, ?, ?, ?)", (version_hash, name, *domain_text(source)))

    def get_domain(self, version_hash: str) -> dict[str, Any] | None:
        row = self._conn().execute("SELECT source, sha256 FROM domains WHERE version_hash = ?", (version_hash,)).fetchone()
        return parse_domain_row(version_hash, row)

    def session(self, session: str) -> SessionInfo | None:
        row = self._conn().execute(
            "SELECT session, domain, domain_version, messages, edits, "
            "(SELECT count(*) FROM erasures e WHERE e.session = s.session) FROM sessions s WHERE session = ?",
            (session,)).fetchone()
        return SessionInfo(*row) if row else None

    @contextmanager
    def batch(self, deferred: bool = True) -> Iterator[None]:
        # Each append is written at once (`deferred` changes nothing): SQLite has no round trips to save.
        c = self._conn()
        if c.in_transaction:  # already in a batch: the outer one commits
            yield
            return
        c.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            c.execute("ROLLBACK")
            raise
        c.execute("COMMIT")

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One atomic write: its own transaction, or a savepoint inside a batch."""
        c = self._conn()
        nested = self._begin(c)
        try:
            yield c
        except BaseException:
            self._abort(c, nested)
            raise
        c.execute("RELEASE ce_write" if nested else "COMMIT")

    @staticmethod
    def _begin(c: sqlite3.Connection) -> bool:
        """Start one atomic write (`_write`): True if it is a savepoint inside a batch."""
        nested = c.in_transaction
        c.execute("SAVEPOINT ce_write" if nested else "BEGIN IMMEDIATE")
        return nested

    @staticmethod
    def _abort(c: sqlite3.Connection, nested: bool) -> None:
        if nested:
            c.execute("ROLLBACK TO ce_write")
            c.execute("RELEASE ce_write")
        elif c.in_transaction:
            c.execute("ROLLBACK")

    def append(self, domain: str, domain_version: str, message: Message, edits: list[Edit]) -> None:
        # `_write` spelled out: this runs once per message, a generator-based context costs more
        # than the statements it wraps.
        c = self._conn()
        self._local.writes += 1
        nested = self._begin(c)
        try:
            expected = self._heads.expected(message, edits)
            head = self._append_known(c, domain, domain_version, message, edits, *expected) if expected else None
            if head is None:
                head = self._append(c, domain, domain_version, message, edits)
            c.execute("RELEASE ce_write" if nested else "COMMIT")
        except sqlite3.IntegrityError as exc:
            self._abort(c, nested)
            raise Errors.STORE_CONFLICT(problem=f"session {message.session!r}: {exc}", fix=RETRY_FIX) from exc
        except BaseException:
            self._abort(c, nested)
            raise
        # Inside a batch this may run ahead of a rollback: a stale head only costs `_append`.
        self._heads.remember(message.session, head)

    def _append_known(self, c: sqlite3.Connection, domain: str, domain_version: str, message: Message, edits: list[Edit],
                      n_edits: int, last_edit: str) -> Head | None:
        """The append when this store knows where the session stands (`KnownHeads`): the sessions
        row is moved on condition that its head is the one the batch goes on from (`message.index`
        messages and `n_edits` edits ending in the hashes the batch links to, of this domain
        version: the head text is compared whole, no JSON read in SQL), so no read comes first;
        then the message and its edits are inserted. None, with nothing written, if the row is not
        there (or holds another head: an upgrade, a head written before heads were stored, another
        writer; the reading path tells them apart)."""
        s, n_msgs = message.session, message.index
        check_batch(message, edits, n_msgs, n_edits, last_edit, message.prev_hash)
        sha = self._domain_sha(domain_version)
        head = new_head(domain, domain_version, sha, message, edits, n_msgs, n_edits, last_edit if n_edits else None)
        text, signature = self.sign(head)
        if n_msgs == 0:
            cur = c.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session) DO NOTHING",
                            (s, domain, domain_version, head.messages, head.edits, text, signature))
        else:
            before = Head(s, domain, domain_version, sha, n_msgs, n_edits, message.prev_hash, last_edit).text()
            cur = c.execute("UPDATE sessions SET domain = ?, domain_version = ?, messages = ?, edits = ?, head = ?, signature = ? "
                            "WHERE session = ? AND head = ?",
                            (domain, domain_version, head.messages, head.edits, text, signature, s, before))
        if cur.rowcount != 1:
            return None
        c.execute("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)", message_row(message))
        if edits:
            c.executemany("INSERT INTO edits VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [edit_row(e) for e in edits])
        return head

    def _append(self, c: sqlite3.Connection, domain: str, domain_version: str, message: Message,
                edits: list[Edit]) -> Head:
        """The append that reads the session's counters and chain ends first."""
        s = message.session
        # One read: the counters and, from the head, the hashes the batch must link to.
        row = c.execute("SELECT messages, edits, head FROM sessions WHERE session = ?", (s,)).fetchone()
        n_msgs, n_edits, head_text = row if row else (0, 0, "")
        hashes = head_hashes(head_text)
        if hashes is None and row is not None:  # a row without a head: read the chain ends
            last = c.execute("SELECT hash FROM edits WHERE session = ? AND seq = ?", (s, n_edits - 1)).fetchone()
            last_msg = c.execute("SELECT hash FROM messages WHERE session = ? AND idx = ?", (s, n_msgs - 1)).fetchone()
            hashes = (last_msg[0] if last_msg else GENESIS_HASH, last[0] if last else GENESIS_HASH)
        last_msg_hash, last_hash = hashes or (GENESIS_HASH, GENESIS_HASH)
        check_batch(message, edits, n_msgs, n_edits, last_hash, last_msg_hash)
        c.execute("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)", message_row(message))
        if edits:
            c.executemany("INSERT INTO edits VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [edit_row(e) for e in edits])
        head = new_head(domain, domain_version, self._domain_sha(domain_version), message, edits, n_msgs, n_edits,
                        last_hash if n_edits else None)
        c.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session) DO UPDATE SET "
            "domain = excluded.domain, domain_version = excluded.domain_version, messages = excluded.messages, "
            "edits = excluded.edits, head = excluded.head, signature = excluded.signature",
            (s, domain, domain_version, head.messages, head.edits, *self.sign(head)))
        return head

    def _domain_sha(self, version_hash: str) -> str | None:
        """The SHA-256 of a stored domain document (a row never changes once written: kept)."""
        sha = self._shas.get(version_hash)
        if sha is None:
            row = self._conn().execute("SELECT sha256 FROM domains WHERE version_hash = ?", (version_hash,)).fetchone()
            sha = row[0] if row else None
            if sha is not None:
                self._shas[version_hash] = sha
        return sha

    def append_records(self, session: str, edits: list[Edit]) -> None:
        c = self._conn()
        self._local.writes += 1
        try:
            c.execute("BEGIN IMMEDIATE")
            row = c.execute("SELECT session, domain, domain_version, messages, edits FROM sessions WHERE session = ?",
                            (session,)).fetchone()
            info = SessionInfo(*row) if row else SessionInfo(session, "", "", 0, 0)
            last = c.execute("SELECT hash FROM edits WHERE session = ? AND seq = ?", (session, info.edits - 1)).fetchone()
            check_records(session, edits, info.messages, info.edits, last[0] if last else GENESIS_HASH)
            if edits:
                last_msg = c.execute("SELECT hash FROM messages WHERE session = ? AND idx = ?",
                                     (session, info.messages - 1)).fetchone()
                c.executemany("INSERT INTO edits VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [edit_row(e) for e in edits])
                sha = c.execute("SELECT sha256 FROM domains WHERE version_hash = ?", (info.domain_version,)).fetchone()
                head = records_head(info, sha[0] if sha else None, last_msg[0], edits)
                c.execute("UPDATE sessions SET edits = ?, head = ?, signature = ? WHERE session = ?",
                          (head.edits, *self.sign(head), session))
            c.execute("COMMIT")
        except sqlite3.IntegrityError as exc:
            c.execute("ROLLBACK")
            raise Errors.STORE_CONFLICT(problem=f"session {session!r}: {exc}", fix=RETRY_FIX) from exc
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise

    def messages(self, session: str, since_round: int | None = None) -> list[Message]:
        rows = self._conn().execute(
            f"SELECT {ROW_COLUMNS} FROM messages WHERE session = ? AND round >= ? ORDER BY idx",
            (session, since_round if since_round is not None else -1)).fetchall()
        return [message_from_row(*r) for r in rows]

    def edits(self, session: str, since_seq: int | None = None) -> list[Edit]:
        rows = self._conn().execute(f"SELECT {EDIT_COLUMNS} FROM edits WHERE session = ? AND seq > ? ORDER BY seq",
                                    (session, since_seq if since_seq is not None else -1)).fetchall()
        return [edit_from_row(*r) for r in rows]

    def known_message_ids(self, session: str, ids: list[str]) -> set[str]:
        if not ids:
            return set()
        rows = self._conn().execute(
            "SELECT json_extract(body, '$.id') FROM messages WHERE session = ? AND json_extract(body, '$.id') IN "
            f"({', '.join('?' * len(ids))})", (session, *ids)).fetchall()
        return {r[0] for r in rows}

    def put_key(self, key: KeyRecord) -> None:
        self._conn().execute("INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?)", astuple_key(key))

    def get_key(self, key_hash: str) -> KeyRecord | None:
        row = self._conn().execute(f"SELECT {KEY_COLUMNS} FROM api_keys WHERE key_hash = ?", (key_hash,)).fetchone()
        return KeyRecord(*row) if row else None

    def keys(self) -> list[KeyRecord]:
        return [KeyRecord(*r) for r in self._conn().execute(f"SELECT {KEY_COLUMNS} FROM api_keys ORDER BY key_id")]

    def revoke_key(self, key_id: str, when: str) -> bool:
        cur = self._conn().execute("UPDATE api_keys SET revoked = ? WHERE key_id = ? AND revoked IS NULL", (when, key_id))
        return cur.rowcount == 1

    def sessions(self) -> list[str]:
        return [r[0] for r in self._conn().execute("SELECT session FROM sessions ORDER BY session")]

    def session_keys(self, after: str | None = None, upto: str | None = None, limit: int | None = None) -> list[str]:
        # BINARY collation compares UTF-8 bytes: code-point order, served by the primary key.
        where, params = key_range(after, upto, "session", "?")
        rows = self._conn().execute(f"SELECT session FROM sessions WHERE {where} ORDER BY session LIMIT ?",
                                    (*params, -1 if limit is None else limit))
        return [r[0] for r in rows]

    def read_sessions(self, keys: list[str]) -> list[StoredSession]:
        c, wanted = self._conn(), json.dumps(keys)
        # json_each keeps one bound parameter whatever the batch size (SQLite caps their number).
        infos = c.execute("SELECT session, domain, domain_version, messages, edits FROM sessions "
                          "WHERE session IN (SELECT value FROM json_each(?))", (wanted,)).fetchall()
        msgs = c.execute(f"SELECT session, {ROW_COLUMNS} FROM messages WHERE session IN (SELECT value FROM json_each(?)) "
                         "ORDER BY session, idx", (wanted,)).fetchall()
        edits = c.execute(f"SELECT session, {EDIT_COLUMNS} FROM edits WHERE session IN (SELECT value FROM json_each(?)) "
                          "ORDER BY session, seq", (wanted,)).fetchall()
        return stored_sessions(keys, infos, msgs, edits)

    def raw_rows(self, session: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        c = self._conn()
        msgs = c.execute("SELECT idx, round, body, hash FROM messages WHERE session = ? ORDER BY idx", (session,)).fetchall()
        edits = c.execute("SELECT seq, round, message_index, body, hash FROM edits WHERE session = ? ORDER BY seq",
                          (session,)).fetchall()
        return msgs, edits

    def raw_payloads(self, session: str) -> dict[tuple[str, int], tuple[Any, Any]]:
        c = self._conn()
        out = payload_rows("message", c.execute("SELECT idx, salt, payload FROM messages WHERE session = ?", (session,)))
        out.update(payload_rows("edit", c.execute(
            "SELECT seq, salt, payload, before_salt, before_payload FROM edits WHERE session = ?", (session,))))
        return out

    def erasures(self, session: str) -> list[tuple[str, int, str, str | None]]:
        return [(r[0], r[1], r[2], r[3]) for r in self._conn().execute(
            "SELECT kind, pos, tombstone, signature FROM erasures WHERE session = ? ORDER BY kind, pos", (session,))]

    def erase(self, tombstones: list[Tombstone], forget: Forget | None = None) -> None:
        sessions = sorted({t.session for t in tombstones})
        with self._write() as c:
            self._local.writes += 1
            for t in tombstones:
                table, key, salt, payload = ERASABLE[t.kind]
                c.execute(f"UPDATE {table} SET {salt} = NULL, {payload} = NULL WHERE session = ? AND {key} = ?",
                          (t.session, t.pos))
                c.execute("INSERT OR REPLACE INTO erasures VALUES (?, ?, ?, ?, ?)",
                          (t.session, t.kind, t.pos, t.text(), self.signer.sign(t.text()) if self.signer else None))
            for session in sessions:
                c.execute("DELETE FROM derived WHERE session = ?", (session,))
                self.drop_search(session)  # the text's terms: derived, rebuilt from the log on next use
            for (tenant, user), test in (forget or {}).items():
                rows = c.execute("SELECT seq, body FROM user_memory WHERE tenant = ? AND user_id = ?", (tenant, user))
                gone = [(tenant, user, seq) for seq, body in rows.fetchall() if test(json.loads(body))]
                c.executemany("DELETE FROM user_memory WHERE tenant = ? AND user_id = ? AND seq = ?", gone)
        if c.in_transaction:
            return  # inside a caller's batch: it commits, and the clean-up below waits for that
        # 'optimize' merges FTS5's segments, so no deleted term stays behind in an older one;
        # secure_delete zeroed the freed bytes of the database pages, and a truncating checkpoint
        # removes the old page images from the write-ahead log.
        c.execute("INSERT INTO search_terms(search_terms) VALUES ('optimize')")
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def raw_sessions(self, after: str | None = None, upto: str | None = None) -> dict[str, tuple[Any, ...] | None]:
        return raw_session_rows(self._conn().execute, *key_range(after, upto, "session", "?"))

    def raw_domains(self) -> dict[str, tuple[Any, ...]]:
        return {r[0]: tuple(r[1:]) for r in self._conn().execute("SELECT version_hash, name, source, sha256 FROM domains")}

    def put_derived(self, session: str, kind: str, key: int, body: dict[str, Any]) -> None:
        self._conn().execute("INSERT OR REPLACE INTO derived VALUES (?, ?, ?, ?)",
                             (session, kind, key, derived_text(body)))

    def add_usage(self, session: str, usage: Usage) -> None:
        self._conn().execute(_ADD_USAGE, (session, *usage.row()))

    def usage(self, session: str) -> Usage:
        row = self._conn().execute(f"SELECT {USAGE_COLUMNS} FROM usage WHERE session = ?", (session,)).fetchone()
        return Usage(*row) if row else Usage()

    def raw_derived(self, session: str, kind: str, keys: tuple[int, int] | None = None) -> dict[int, bytes]:
        lo, hi = keys if keys is not None else (-2**63, 2**63 - 1)
        # As a BLOB: the text's UTF-8 bytes as stored, not decoded into a str only to be encoded again.
        return dict(self._conn().execute("SELECT key, CAST(body AS BLOB) FROM derived WHERE session = ? AND kind = ? "
                                         "AND key BETWEEN ? AND ? ORDER BY key", (session, kind, lo, hi)).fetchall())

    def append_user_memory(self, tenant: str, user: str, events: list[dict[str, Any]]) -> None:
        self._write_user_memory(tenant, user, events, replace=False)

    def replace_user_memory(self, tenant: str, user: str, events: list[dict[str, Any]]) -> None:
        self._write_user_memory(tenant, user, events, replace=True)

    def _write_user_memory(self, tenant: str, user: str, events: list[dict[str, Any]], replace: bool) -> None:
        c = self._conn()
        try:
            c.execute("BEGIN IMMEDIATE")
            if replace:
                c.execute("DELETE FROM user_memory WHERE tenant = ? AND user_id = ?", (tenant, user))
            start = c.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM user_memory WHERE tenant = ? AND user_id = ?",
                              (tenant, user)).fetchone()[0]
            c.executemany("INSERT INTO user_memory VALUES (?, ?, ?, ?)",
                          [(tenant, user, start + i, canonical_json(ev)) for i, ev in enumerate(events)])
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise

    def user_memory(self, tenant: str, user: str) -> list[dict[str, Any]]:
        rows = self._conn().execute("SELECT body FROM user_memory WHERE tenant = ? AND user_id = ? ORDER BY seq",
                                    (tenant, user)).fetchall()
        return [json.loads(b) for (b,) in rows]

    def drop_derived(self, session: str, kind: str) -> None:
        self._conn().execute("DELETE FROM derived WHERE session = ? AND kind = ?", (session, kind))

    def index_search(self, session: str, docs: list[SearchDoc]) -> None:
        with self._write() as c:
            for d in docs:
                old = c.execute("SELECT rowid FROM search_docs WHERE session = ? AND message_index = ?",
                                (session, d.message_index)).fetchone()
                if old:
                    c.execute("DELETE FROM search_terms WHERE rowid = ?", old)
                    c.execute("DELETE FROM search_docs WHERE rowid = ?", old)
                rowid = c.execute("INSERT INTO search_docs VALUES (?, ?, ?, ?, ?, ?)",
                                  (session, d.message_index, d.round, d.role, d.tool, f" {' '.join(d.fields)} ")).lastrowid
                c.execute("INSERT INTO search_terms (rowid, terms) VALUES (?, ?)",
                          (rowid, f"{search_session_term(session)} {d.terms}"))

    def search(self, session: str, terms: list[str], where: SearchFilter, limit: int) -> list[tuple[int, float]]:
        query = search_terms_query(session, terms)
        if query is None:
            return []
        sql = ["SELECT d.message_index, bm25(search_terms) AS rank FROM search_terms JOIN search_docs d "
               "ON d.rowid = search_terms.rowid WHERE search_terms MATCH ? AND d.session = ?"]
        args: list[Any] = [query, session]
        if where.roles is not None:
            sql.append(f"AND d.role IN ({', '.join('?' * len(where.roles))})")
            args += where.roles
        if where.rounds is not None:
            sql.append("AND d.round BETWEEN ? AND ?")
            args += where.rounds
        if where.tools is not None:
            sql.append(f"AND d.tool IN ({', '.join('?' * len(where.tools))})")
            args += where.tools
        if where.fields is not None:
            sql.append(f"AND ({' OR '.join(['instr(d.fields, ?) > 0'] * len(where.fields)) or '0'})")
            args += [f" {f} " for f in where.fields]
        sql.append("ORDER BY rank, d.message_index DESC LIMIT ?")
        rows = self._conn().execute(" ".join(sql), (*args, limit)).fetchall()
        return [(i, -rank) for i, rank in rows]

    def search_indexed(self, session: str) -> int:
        row = self._conn().execute("SELECT max(message_index) FROM search_docs WHERE session = ?", (session,)).fetchone()
        return -1 if row is None or row[0] is None else int(row[0])

    def drop_search(self, session: str) -> None:
        with self._write() as c:
            c.execute("DELETE FROM search_terms WHERE rowid IN (SELECT rowid FROM search_docs WHERE session = ?)", (session,))
            c.execute("DELETE FROM search_docs WHERE session = ?", (session,))

    def messages_at(self, session: str, indexes: list[int]) -> list[Message]:
        wanted = sorted(set(indexes))
        if not wanted:
            return []
        rows = self._conn().execute(
            f"SELECT {ROW_COLUMNS} FROM messages WHERE session = ? AND idx IN ({', '.join('?' * len(wanted))}) ORDER BY idx",
            (session, *wanted)).fetchall()
        return [message_from_row(*r) for r in rows]

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

