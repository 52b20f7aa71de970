"""Erasure that keeps the proof (issue 12): text and values are committed through salted hashes,
so erasing them leaves every hash chain verifiable, the reads show `[erased]`, replay names the
edits it can no longer derive, and no erased text is left in the store's bytes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from context_editor import ContextEditor
from context_editor.audit import erase, replay, sessions_of_user, verify_store
from context_editor.errors import AuditError
from context_editor.model import ERASED, session_key
from context_editor.store import open_store

TS = "2024-05-01T10:00:00+08:00"
# Text only the erased message and the erased user said (the domain document holds neither).
SECRET_MESSAGE = "我下周五想从乌鲁木齐飞三亚，护照号E11223344，电话13912345678"
USER_SECRETS = ("bob-private-17 lives at 42 Zebra Lane", "bob says budget 7777 dollars", "from Reykjavik to Lima")


def _conversations() -> dict[str, list[dict[str, str]]]:
    alice = [{"role": "user", "content": SECRET_MESSAGE, "timestamp": TS},
             {"role": "assistant", "content": "好的，几位出行？预算多少？", "timestamp": TS},
             {"role": "user", "content": "两个人，预算五千元", "timestamp": TS},
             {"role": "user", "content": "改成从北京出发", "timestamp": TS}]
    bob = [{"role": "user", "content": f"I want to fly {USER_SECRETS[2]} next Friday, {USER_SECRETS[0]}", "timestamp": TS},
           {"role": "user", "content": f"{USER_SECRETS[1]}, 2 people", "timestamp": TS}]
    return {session_key("trip", user="alice"): alice, session_key("trip", user="bob"): bob,
            session_key("trip2", user="bob"): bob[:1]}


def _fill(url: str) -> ContextEditor:
    editor = ContextEditor("travel", url)
    for key, messages in _conversations().items():
        editor.ingest(key, messages)
    return editor


def _erase_one_message_and_one_user(url: str) -> tuple[ContextEditor, dict[str, list[int]]]:
    editor = _fill(url)
    store = editor.store
    alice = session_key("trip", user="alice")
    erase(store, [alice], actor="dpo@example.com", reason="GDPR art. 17 request 118", message=0)
    bobs = sessions_of_user(store, "bob")
    assert bobs == [session_key("trip", user="bob"), session_key("trip2", user="bob")]
    erase(store, bobs, actor="dpo@example.com", reason="PIPL art. 47 request 9")
    return editor, {s: replay(store, s).not_rederivable for s in [alice, *bobs]}


def _check_reads(url: str, not_rederivable: dict[str, list[int]]) -> None:
    store = open_store(url)
    report = verify_store(store)
    assert report.ok, [v.problems for v in report.sessions]
    summaries = {v.session: v.erasure_summary() for v in report.sessions}
    alice, bob = session_key("trip", user="alice"), session_key("trip", user="bob")
    assert summaries[alice] == [f"1 message, {len(not_rederivable[alice])} edits erased (on "
                                f"{summaries[alice][0].split('(on ')[1][:10]}, by dpo@example.com, GDPR art. 17 request 118)"]
    assert summaries[bob][0].startswith("2 messages, ") and "PIPL art. 47 request 9" in summaries[bob][0]
    # Replay names exactly the edits whose message or values were erased, and every other edit re-derives.
    edits = store.edits(alice)
    gone = [e.seq for e in edits if e.after == ERASED or e.message_index == 0 and e.op not in ("transition", "upgrade")]
    assert not_rederivable[alice] == gone and gone
    assert replay(store, alice).identical
    assert not_rederivable[bob] == [e.seq for e in store.edits(bob) if e.op not in ("transition", "upgrade")]
    editor = ContextEditor("travel", url)
    assert store.messages(alice)[0].content == ERASED
    assert editor.state(alice).get("origin") == ERASED
    assert editor.why(alice, "origin")["history"][0]["value"] == ERASED
    xml = editor.render(alice, "book_flight").xml
    assert "乌鲁木齐" not in xml and ERASED in xml
    assert editor.state(alice).get("budget_max") == {"amount": 5000, "currency": "CNY"}  # untouched messages stay


def _assert_no_secret(data: bytes) -> None:
    # Place names are in the domain document's gazetteers too, so the phrases around them are what is looked for.
    for text in ("想从乌鲁木齐飞", "E11223344", "13912345678", *USER_SECRETS, "Zebra"):
        assert text.encode("utf-8") not in data, text


def test_erase_a_message_and_a_user_on_sqlite(tmp_path):
    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    _, not_rederivable = _erase_one_message_and_one_user(url)
    _check_reads(url, not_rederivable)
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("store.db"))
    _assert_no_secret(data)
    assert "改成从北京出发".encode() in data  # the rest of the conversation is still there


def test_erase_a_message_and_a_user_on_postgres(pg_url, pg_schema_url):
    from pg_server import find_bindir

    _, not_rederivable = _erase_one_message_and_one_user(pg_schema_url)
    _check_reads(pg_schema_url, not_rederivable)
    schema = parse_qs(urlparse(pg_schema_url).query)["options"][0].split("=")[1]
    bindir = find_bindir()
    assert bindir is not None
    dump = subprocess.run([str(bindir / "pg_dump"), "--data-only", "--schema", schema, pg_url],
                          capture_output=True, check=True).stdout
    assert "改成从北京出发".encode() in dump and b"erasures" in dump
    _assert_no_secret(dump)


def test_tampering_with_an_erasure_is_caught(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    editor = _fill(url)
    alice = session_key("trip", user="alice")
    import sqlite3

    con = sqlite3.connect(tmp_path / "s.db")
    # Text removed without a tombstone: an erasure nobody recorded.
    con.execute("UPDATE messages SET salt = NULL, payload = NULL WHERE session = ? AND idx = 2", (alice,))
    con.commit()
    report = verify_store(editor.store)
    assert not report.ok and "without an erasure tombstone" in " ".join(report.sessions[0].problems)
    # A payload changed under its commitment.
    con.execute("UPDATE messages SET payload = replace(payload, '五千', '五万') WHERE session = ? AND idx = 2", (alice,))
    con.commit()
    assert not verify_store(editor.store).ok
    # Erasing a row with no actor/reason, or a message that does not exist, changes nothing.
    with pytest.raises(AuditError):
        erase(editor.store, [alice], actor=" ", reason="x", message=0)
    with pytest.raises(AuditError):
        erase(editor.store, [alice], actor="a", reason="x", message=99)
