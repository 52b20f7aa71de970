"""Schema migrations (context_editor/store/migrations.py) on SQLite and real PostgreSQL.

A store written at version 3 is built here with the DDL that version wrote (copied below as it
was, not taken from the package) and the rows of real sessions; opening it with this package
upgrades it in place, and it keeps verifying, replaying and holding every row. A store newer
than the package, and a step that fails halfway, change nothing.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from conftest import ROOT
from context_editor import ContextEditor, audit
from context_editor.conversation import read_conversation
from context_editor.errors import StoreError
from context_editor.model import GENESIS_HASH, canonical_json
from context_editor.store import KeyRecord, Store, migrations, open_store
from context_editor.store.base import Head, Usage

# What context-editor wrote at schema 3 (before api_keys), on both SQL stores.
VERSION_3_DDL = """
CREATE TABLE domains (
    version_hash TEXT PRIMARY KEY, name TEXT NOT NULL, source TEXT NOT NULL, sha256 TEXT NOT NULL);
CREATE TABLE sessions (
    session TEXT PRIMARY KEY, domain TEXT NOT NULL, domain_version TEXT NOT NULL,
    messages INTEGER NOT NULL DEFAULT 0, edits INTEGER NOT NULL DEFAULT 0,
    head TEXT NOT NULL DEFAULT '', signature TEXT);
CREATE TABLE messages (
    session TEXT NOT NULL, idx INTEGER NOT NULL, round INTEGER NOT NULL, body TEXT NOT NULL, hash TEXT NOT NULL,
    PRIMARY KEY (session, idx));
CREATE INDEX messages_round ON messages (session, round);
CREATE TABLE edits (
    session TEXT NOT NULL, seq INTEGER NOT NULL, round INTEGER NOT NULL, message_index INTEGER NOT NULL,
    body TEXT NOT NULL, hash TEXT NOT NULL,
    PRIMARY KEY (session, seq));
CREATE TABLE derived (
    session TEXT NOT NULL, kind TEXT NOT NULL, key INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (session, kind, key))
"""
SAMPLES = {"travel": "travel_sanya.jsonl", "ecommerce": "ecommerce_headphones.jsonl"}


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'v3.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_schema_url")


@contextmanager
def raw(url: str) -> Iterator[tuple[Callable[..., Any], str]]:
    """A plain connection to the store's database (no context-editor code) and its placeholder."""
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url[len("sqlite:///"):], isolation_level=None)
        try:
            yield conn.execute, "?"
        finally:
            conn.close()
    else:
        with psycopg.connect(url, autocommit=True) as pg:
            yield pg.execute, "%s"


def schema_version(url: str) -> int:
    with raw(url) as (execute, _):
        if url.startswith("sqlite:///"):
            return int(execute("PRAGMA user_version").fetchone()[0])
        return int(execute("SELECT max(version) FROM schema_version").fetchone()[0])


def sessions_of(store: Store) -> dict[str, Any]:
    """Every row a store holds, as its raw views show them."""
    return {"domains": store.raw_domains(), "sessions": store.raw_sessions(),
            "rows": {s: store.raw_rows(s) for s in store.sessions()}, "derived": store.derived("travel", "stage")}


def _as_written_at_version_3(source: Store, session: str, row: tuple[Any, ...]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], str]:
    """The session's rows as schema 3 wrote them: text and values inside the hashed bodies (no
    salt, no commitment), chained and headed accordingly."""
    prev, msgs = GENESIS_HASH, []
    for m in source.messages(session):
        m = replace(m, prev_hash=prev, salt=None, commitment=None, hash="")
        m = replace(m, hash=m.compute_hash())
        msgs.append((m.index, m.round, canonical_json(m.body()), m.hash))
        prev = m.hash
    last_message, prev, edits = prev, GENESIS_HASH, []
    for e in source.edits(session):
        e = replace(e, prev_hash=prev, salt=None, commitment=None, hash="")
        e = replace(e, hash=e.compute_hash())
        edits.append((e.seq, e.round, e.message_index, canonical_json(e.body()), e.hash))
        prev = e.hash
    domain, version, n_msgs, n_edits, head, _ = row
    old = json.loads(head)
    return msgs, edits, Head(session, domain, version, old["domain_sha256"], n_msgs, n_edits, last_message, prev).text()


def write_version_3(url: str) -> dict[str, Any]:
    """A store at schema 3 holding two real sessions and a derived row; returns what it holds."""
    source = open_store("memory://")
    for domain, sample in SAMPLES.items():
        ContextEditor(domain, source).ingest(domain, read_conversation(str(ROOT / "domains" / "samples" / sample)))
    source.put_derived("travel", "stage", 0, {"lines": ["kept through the upgrade"]})
    with raw(url) as (execute, p):
        for statement in VERSION_3_DDL.split(";"):
            execute(statement)
        if url.startswith("sqlite:///"):
            execute("PRAGMA user_version = 3")
        else:
            execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            execute("INSERT INTO schema_version VALUES (3)")

        def insert(table: str, row: tuple[Any, ...]) -> None:
            execute(f"INSERT INTO {table} VALUES ({', '.join([p] * len(row))})", row)

        for version, row in source.raw_domains().items():
            insert("domains", (version, *row))
        written = sessions_of(source)
        for session, row in source.raw_sessions().items():
            assert row is not None
            msgs, edits, head = _as_written_at_version_3(source, session, row)
            insert("sessions", (session, *row[:4], head, None))
            written["sessions"][session] = (*row[:4], head, None)
            written["rows"][session] = (msgs, edits)
            for m in msgs:
                insert("messages", (session, *m))
            for e in edits:
                insert("edits", (session, *e))
        insert("derived", ("travel", "stage", 0, '{"lines": ["kept through the upgrade"]}'))
    return written


def test_steps_are_consecutive_from_the_base_and_say_why():
    assert [s.version for s in migrations.STEPS] == list(range(migrations.BASE_VERSION + 1, migrations.SCHEMA_VERSION + 1))
    assert all(s.why for s in migrations.STEPS)


def test_a_version_3_store_upgrades_in_place_and_keeps_its_data(url):
    before = write_version_3(url)
    store = open_store(url)
    assert schema_version(url) == migrations.SCHEMA_VERSION
    assert sessions_of(store) == before
    report = audit.verify_store(store)
    assert report.ok, report
    for session in SAMPLES:
        assert audit.replay(store, session).identical
    store.put_key(KeyRecord("k1", "h" * 64, "acme", "writer", "2026-01-01T00:00:00Z"))  # the table step 4 added
    assert [k.key_id for k in store.keys()] == ["k1"]
    store.append_user_memory("acme", "u1", [{"event": "remember", "field": "f", "value": 1}])  # the table of step 6
    assert store.user_memory("acme", "u1") == [{"event": "remember", "field": "f", "value": 1}]
    store.close()
    again = open_store(url)  # a second open finds nothing to do
    assert sessions_of(again) == before and schema_version(url) == migrations.SCHEMA_VERSION
    again.close()


def test_token_accounts_move_from_derived_rows_into_their_columns_with_every_count(url):
    """Step 9: the `usage` rows of the derived table (JSON counts) become rows of `usage`
    (integer columns), counts kept (one written before out-of-band renders were counted has 0
    of them); the other derived rows stay, and renders go on adding to the moved account."""
    before = write_version_3(url)
    with raw(url) as (execute, p):
        for session, body in (("travel", '{"renders": 3, "context_tokens": 2400, "source_tokens": 9100, "out_of_band": 1}'),
                              ("ecommerce", '{"renders": 1, "context_tokens": 700, "source_tokens": 800}')):
            execute(f"INSERT INTO derived VALUES ({p}, 'usage', 0, {p})", (session, body))
    store = open_store(url)
    assert store.usage("travel") == Usage(3, 2400, 9100, 1) and store.usage("ecommerce") == Usage(1, 700, 800, 0)
    assert store.derived("travel", "usage") == {} and sessions_of(store) == before
    editor = ContextEditor("travel", store)
    tokens = editor.render("travel", "book_flight").tokens
    assert editor.usage("travel")["renders"] == 4 and editor.usage("travel")["context_tokens"] == 2400 + tokens
    store.close()


def test_rows_written_before_erasable_payloads_are_kept_and_said_so(url, tmp_path):
    """Their hash covers the text itself: `erase` refuses them (CE522, nothing changed) and
    `retention apply` lists them as kept instead of failing."""
    from datetime import datetime, timezone
    from pathlib import Path

    from context_editor import load_domain
    from context_editor.errors import AuditError

    write_version_3(url)
    store = open_store(url)
    rows = store.raw_rows("travel")
    with pytest.raises(AuditError, match="written before erasable payloads"):
        audit.erase(store, ["travel"], "dpo", "GDPR art. 17", messages=[0])
    assert store.raw_rows("travel") == rows and store.erasures("travel") == []
    text = Path(load_domain("travel").path).read_text(encoding="utf-8")
    policy = tmp_path / "travel.yaml"
    policy.write_text(text.replace("default_currency:", "retention: {messages: 30d}\ndefault_currency:", 1), "utf-8")
    steps = audit.apply_retention(store, datetime(2100, 1, 1, tzinfo=timezone.utc), {"travel": load_domain(policy)})
    assert [(s.session, s.messages, len(s.unerasable), s.tombstones) for s in steps] == [("travel", (), len(rows[0]), ())]
    assert store.raw_rows("travel") == rows and audit.verify_store(store).ok
    store.close()


def test_the_cli_verifies_an_upgraded_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'v3.db'}"
    write_version_3(url)
    out = subprocess.run([sys.executable, "-m", "context_editor", "audit", "verify", "--store", url],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert schema_version(url) == migrations.SCHEMA_VERSION


def test_a_store_newer_than_the_package_is_refused_and_left_alone(url):
    open_store(url).close()
    newer = migrations.SCHEMA_VERSION + 1
    with raw(url) as (execute, p):
        execute(f"PRAGMA user_version = {newer}" if url.startswith("sqlite:///") else f"UPDATE schema_version SET version = {newer}")
    with pytest.raises(StoreError, match=rf"\[CE507\] .*schema {newer}, newer than this one's {migrations.SCHEMA_VERSION}"):
        open_store(url)
    assert schema_version(url) == newer


def test_the_cli_refuses_a_newer_store_without_a_traceback(tmp_path):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    open_store(url).close()
    with raw(url) as (execute, _):
        execute("PRAGMA user_version = 99")
    out = subprocess.run([sys.executable, "-m", "context_editor", "audit", "verify", "--store", url],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "[CE507]" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_a_step_that_fails_halfway_changes_nothing(url, monkeypatch):
    before = write_version_3(url)
    broken = migrations.Step(migrations.SCHEMA_VERSION + 1, "a step that fails after its first statement",
                             "CREATE TABLE half_done (x INTEGER); INSERT INTO no_such_table VALUES (1)")
    monkeypatch.setattr(migrations, "STEPS", (*migrations.STEPS, broken))
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", broken.version)
    with pytest.raises(StoreError, match=rf"\[CE508\] .*from schema 3 to {broken.version} failed at step {broken.version}"):
        open_store(url)
    assert schema_version(url) == 3  # steps 4.. ran in the same transaction and were rolled back too
    with raw(url) as (execute, _):
        tables = "SELECT name FROM sqlite_master" if url.startswith("sqlite:///") else \
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        names = {r[0] for r in execute(tables).fetchall()}
    assert "half_done" not in names and "api_keys" not in names
    monkeypatch.undo()
    assert sessions_of(open_store(url)) == before  # the real steps still upgrade it afterwards
