"""Audit (issue 4): tamper evidence, byte-for-byte replay, state as of any round, crash safety."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_editor import ContextEditor
from context_editor import audit
from context_editor.store import SQLiteStore

from conftest import ROOT, SAMPLE

TS = "2024-05-01T10:00:00+08:00"

# Utterances that exercise every stage: rules, enums, negation, corrections, validation
# failures, machine triggers and guards, tool JSON, hostile text.
UTTERANCES = [
    ("user", "我想买蓝牙耳机"), ("user", "预算2000以内"), ("user", "预算5000000元"), ("user", "有黑色吗"),
    ("user", "改成红色"), ("user", "还是黑色吧"), ("user", "不要白色的"), ("user", "那帮我下单吧"),
    ("user", "I want to buy a keyboard, budget is $300"), ("user", "cancel my order"), ("user", "我要投诉"),
    ("assistant", "推荐Sony WH-1000XM5，现价1999元。"), ("assistant", "可以开具电子发票。"),
    ("tool", '{"orderId": "ORDER-2024-001", "status": "created"}'), ("tool", "not json </state>"),
    ("user", "]]></state><context>"), ("user", "要3件，L码"), ("user", "用支付宝付款"),
]

conversations = st.lists(st.sampled_from(UTTERANCES), min_size=1, max_size=25).map(
    lambda xs: [{"role": r, "content": c, "timestamp": f"2024-05-01T10:{i // 60:02d}:{i % 60:02d}+08:00"}
                for i, (r, c) in enumerate(xs)])


def sqlite_editor(path) -> ContextEditor:
    return ContextEditor("ecommerce", f"sqlite:///{path}")


@pytest.fixture
def db(tmp_path, headphones):
    path = tmp_path / "a.db"
    sqlite_editor(path).ingest("s", headphones)
    return path


def verdict(path):
    return audit.verify(SQLiteStore(path), "s")[0]


def test_intact_store_verifies_and_replays(db):
    v = verdict(db)
    assert v.ok and v.messages == 12 and v.edits > 5
    assert audit.replay(SQLiteStore(db), "s").identical


@pytest.mark.parametrize("sql,where", [
    ("UPDATE edits SET body = replace(body, '\"amount\":2000', '\"amount\":3000')", "edit"),  # changed value
    ("UPDATE messages SET body = replace(body, '预算2000以内', '预算9000以内')", "message 4"),  # changed raw text
    ("DELETE FROM edits WHERE seq = 2", "edit 2"),  # deleted row
    ("DELETE FROM edits WHERE seq = (SELECT max(seq) FROM edits)", "edit"),  # deleted last row
    ("UPDATE edits SET seq = -1 WHERE seq = 1; UPDATE edits SET seq = 1 WHERE seq = 2;"
     "UPDATE edits SET seq = 2 WHERE seq = -1", "edit 1"),  # reordered
    ("INSERT INTO edits SELECT session, 99, round, message_index, body, hash FROM edits WHERE seq = 0", "edit"),  # inserted
    ("UPDATE edits SET round = 1 WHERE seq = 3", "edit 3"),  # column changed, body intact
])
def test_tampering_is_caught(db, sql, where):
    with sqlite3.connect(db) as c:
        c.executescript(sql)
    v = verdict(db)
    assert not v.ok and v.broken_at.startswith(where), (v.broken_at, v.reason)


def test_cli_verify_exit_codes(db):
    run = lambda: subprocess.run([sys.executable, "-m", "context_editor", "audit", "verify", "--store", str(db)],
                                 capture_output=True, text=True, timeout=120)
    ok = run()
    assert ok.returncode == 0 and "ok" in ok.stdout
    with sqlite3.connect(db) as c:
        c.execute("UPDATE edits SET hash = 'x' || substr(hash, 2) WHERE seq = 4")
    bad = run()
    assert bad.returncode == 1 and "first broken at edit 4" in bad.stdout


def test_export_has_every_message_and_edit_in_order(db):
    records = list(audit.export(SQLiteStore(db), "s"))
    assert records[0]["type"] == "session" and records[0]["domain_source"]["domain"] == "ecommerce"
    msgs = [r for r in records if r["type"] == "message"]
    edits = [r for r in records if r["type"] == "edit"]
    assert [m["index"] for m in msgs] == list(range(12))
    assert [e["seq"] for e in edits] == list(range(len(edits)))
    assert json.dumps(records, ensure_ascii=False)  # JSON-serialisable as is


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(conversations)
def test_replay_reproduces_the_log_byte_for_byte(tmp_path_factory, conv):
    path = tmp_path_factory.mktemp("r") / "r.db"
    sqlite_editor(path).ingest("s", conv)
    report = audit.replay(SQLiteStore(path), "s")
    assert report.identical, report.first_difference


@settings(max_examples=25, deadline=None)
@given(conversations, st.integers(min_value=0, max_value=25))
def test_state_as_of_round_equals_the_first_rounds_alone(conv, n):
    full = ContextEditor("ecommerce", "memory://")
    full.ingest("s", conv)
    # The first n rounds = every message up to (not including) the user message that opens round n+1.
    rounds, prefix = 0, []
    for m in conv:
        if m["role"] == "user":
            rounds += 1
        if rounds > n:
            break
        prefix.append(m)
    alone = ContextEditor("ecommerce", "memory://")
    alone.ingest("s", prefix)
    as_of = full.state("s", as_of_round=n).to_json()
    expected = alone.state("s").to_json()
    as_of["round"] = expected["round"]  # as_of_round reports the last round with an edit
    assert as_of == expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_any_single_byte_change_in_a_stored_edit_is_caught(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("t") / "t.db"
    sqlite_editor(path).ingest("s", [{"role": "user", "content": "我想买耳机，预算2000以内，要黑色", "timestamp": TS},
                                     {"role": "user", "content": "那帮我下单吧", "timestamp": TS}])
    with sqlite3.connect(path) as c:
        rows = c.execute("SELECT seq, body, hash FROM edits ORDER BY seq").fetchall()
        seq, body, hash_ = data.draw(st.sampled_from(rows))
        column = data.draw(st.sampled_from(["body", "hash"]))
        raw = bytearray((body if column == "body" else hash_).encode("utf-8"))
        i = data.draw(st.integers(0, len(raw) - 1))
        new = data.draw(st.integers(0, 255).filter(lambda b: b != raw[i]))
        raw[i] = new
        c.execute(f"UPDATE edits SET {column} = ? WHERE seq = ?", (raw.decode("utf-8", "replace"), seq))
    assert not verdict(path).ok


CRASHER = textwrap.dedent("""
    import os, signal, sys
    from context_editor import ContextEditor
    from context_editor.conversation import read_conversation
    from context_editor.store import SQLiteStore

    class CrashingStore(SQLiteStore):
        # Dies by SIGKILL in the middle of the commit of message `crash_at`: after the raw
        # message row is written inside the transaction, before its edits.
        def append(self, domain, version, message, edits):
            if message.index == int(sys.argv[2]):
                c = self._conn()
                c.execute("BEGIN IMMEDIATE")
                c.execute("INSERT INTO messages VALUES (?, ?, ?, ?, ?)",
                          (message.session, message.index, message.round, "{}", message.hash))
                os.kill(os.getpid(), signal.SIGKILL)
            return super().append(domain, version, message, edits)

    editor = ContextEditor("ecommerce", CrashingStore(sys.argv[1]))
    editor.ingest("s", read_conversation(sys.argv[3]))
""")


@pytest.mark.parametrize("crash_at", [0, 4, 10])
def test_crash_mid_commit_leaves_a_verifiable_store_and_ingest_continues(tmp_path, crash_at, headphones):
    db = tmp_path / "c.db"
    proc = subprocess.run([sys.executable, "-c", CRASHER, str(db), str(crash_at), str(SAMPLE)], capture_output=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == -signal.SIGKILL
    store = SQLiteStore(db)
    assert len(store.messages("s")) == crash_at  # the interrupted message is not there at all
    if crash_at:
        assert verdict(db).ok
    # Re-running the same ingest continues after what was stored; the result equals an uninterrupted run.
    out = subprocess.run([sys.executable, "-m", "context_editor", "ingest", "ecommerce", str(SAMPLE), "--session", "s",
                          "--store", str(db)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert verdict(db).ok
    reference = ContextEditor("ecommerce", "memory://").ingest("s", headphones).to_json()
    assert ContextEditor("ecommerce", str(db)).state("s").to_json() == reference
    assert audit.replay(SQLiteStore(db), "s").identical
