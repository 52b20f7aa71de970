"""Erasure that keeps the proof (issue 12): text and values are committed through salted hashes,
so erasing them leaves every hash chain verifiable, the reads show `[erased]`, replay names the
edits it can no longer derive, and no erased text is left anywhere in the store: not in its
rows, its search index, its snapshots and summaries, a user's memory, nor (SQLite) in free pages
or the write-ahead log, nor (PostgreSQL) in a dump. Retention (`retention: {messages: 180d}`)
erases the same way, by age."""

from __future__ import annotations

import sqlite3
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from context_editor import ContextEditor, load_domain, pipeline
from context_editor.audit import apply_retention, erase, replay, retention_plan, sessions_of_user, verify_store
from context_editor.cli import main
from context_editor.errors import AuditError, DomainError
from context_editor.model import ERASED, session_key
from context_editor.store import Store, open_store

TS = "2024-05-01T10:00:00+08:00"
# Text only the erased message and the erased user said (the domain document holds neither).
SECRET_MESSAGE = "我下周五想从乌鲁木齐飞三亚，座位要靠窗，护照号E11223344，电话13912345678"
USER_SECRETS = ("bob-private-17 lives at 42 Zebra Lane", "bob says budget 7777 dollars", "from Reykjavik to Lima")
ALICE, BOB, BOB2 = session_key("trip", user="alice"), session_key("trip", user="bob"), session_key("trip2", user="bob")


def _conversations() -> dict[str, list[dict[str, str]]]:
    alice = [{"role": "user", "content": SECRET_MESSAGE, "timestamp": TS},
             {"role": "assistant", "content": "好的，几位出行？预算多少？", "timestamp": TS},
             {"role": "user", "content": "两个人，预算五千元", "timestamp": TS},
             {"role": "user", "content": "改成从北京出发", "timestamp": TS}]
    bob = [{"role": "user", "content": f"I want to fly {USER_SECRETS[2]} next Friday, window seat, {USER_SECRETS[0]}",
            "timestamp": TS},
           {"role": "user", "content": f"{USER_SECRETS[1]}, 2 people", "timestamp": TS}]
    return {ALICE: alice, BOB: bob, BOB2: bob[:1]}


def _fill(store: Store) -> ContextEditor:
    # Every kind of derived data is written: the search index, a snapshot every 2 messages, the
    # summary zone; and the users' memory (seat_preference is `scope: user` in travel).
    editor = ContextEditor("travel", store, retrieval=True)
    for key, messages in _conversations().items():
        editor.ingest(key, messages)
        editor.render(key, "book_flight")
    return editor


def _erase_one_message_and_one_user(store: Store) -> dict[str, list[int]]:
    erase(store, [ALICE], actor="dpo@example.com", reason="GDPR art. 17 request 118", messages=[0])
    bobs = sessions_of_user(store, "bob")
    assert bobs == [BOB, BOB2]
    erase(store, bobs, actor="dpo@example.com", reason="PIPL art. 47 request 9")
    return {s: replay(store, s).not_rederivable for s in [ALICE, *bobs]}


def _check_reads(store: Store, url: str, not_rederivable: dict[str, list[int]]) -> None:
    report = verify_store(store)
    assert report.ok, [v.problems for v in report.sessions]
    summaries = {v.session: v.erasure_summary() for v in report.sessions}
    day = datetime.now(timezone.utc).date().isoformat()
    edits = store.edits(ALICE)
    erased = [e.seq for e in edits if e.after == ERASED]
    replaced = [e.seq for e in edits if e.before == ERASED and e.after != ERASED]
    assert erased and replaced  # origin: 乌鲁木齐 (erased) -> 北京 keeps 北京, its `before` goes
    assert summaries[ALICE] == [f"1 message, {len(erased)} edits, 1 replaced value erased "
                                f"(on {day}, by dpo@example.com, GDPR art. 17 request 118)"]
    assert summaries[BOB][0].startswith("2 messages, ") and "PIPL art. 47 request 9" in summaries[BOB][0]
    # Replay names exactly the edits whose message, values or replaced value were erased, and
    # every other edit re-derives.
    gone = [e.seq for e in edits if e.after == ERASED or e.before == ERASED
            or e.message_index == 0 and e.op not in ("transition", "upgrade", "resolve")]
    assert not_rederivable[ALICE] == gone == sorted(erased + replaced)
    assert replay(store, ALICE).identical
    assert not_rederivable[BOB] == [e.seq for e in store.edits(BOB) if e.op not in ("transition", "upgrade", "resolve")]
    editor = ContextEditor("travel", store, retrieval=True)
    assert store.messages(ALICE)[0].content == ERASED
    assert editor.state(ALICE).get("origin") == "北京"  # said later: kept
    assert editor.state(ALICE).get("destination") == ERASED
    assert editor.why(ALICE, "origin")["history"][0]["value"] == ERASED
    xml = editor.render(ALICE, "book_flight").xml
    assert "乌鲁木齐" not in xml and ERASED in xml
    assert editor.state(ALICE).get("budget_max") == {"amount": 5000, "currency": "CNY"}  # untouched messages stay
    # The users' memory lost what was erased: alice's window seat came from her erased message.
    assert store.user_memory("", "bob") == [] and store.user_memory("", "alice") == []
    assert store.usage(ALICE).renders == 2  # the token account has no text: kept (a render before, one after)


# Also as the search index holds them: lower-cased words.
SECRETS = ("想从乌鲁木齐飞", "E11223344", "13912345678", *USER_SECRETS, "Zebra", "Reykjavik", "zebra", "reykjavik",
           "e11223344")


def _assert_no_secret(data: bytes) -> None:
    # Place names are in the domain document's gazetteers too, so the phrases around them are what is looked for.
    for text in SECRETS:
        assert text.encode("utf-8") not in data, text


def _everything_readable(store: Store) -> bytes:
    """What every read of the store returns, for the store that has no file."""
    parts = [repr(store.messages(s)) + repr(store.edits(s)) + repr(store.raw_rows(s)) + repr(store.raw_payloads(s))
             + repr({k: store.derived(s, k) for k in (pipeline.SNAPSHOT_KIND, "summary")}) + repr(store.usage(s))
             + repr(store.search(s, ["reykjavik", "zebra", "乌鲁"], _no_filter(), 10)) for s in store.sessions()]
    parts += [repr(store.user_memory("", u)) for u in ("alice", "bob")]
    parts.append(repr(vars(store) if hasattr(store, "__dict__") else ""))
    return "".join(parts).encode("utf-8")


def _no_filter():  # type: ignore[no-untyped-def]
    from context_editor.model import SearchFilter

    return SearchFilter()


def test_erase_one_message_and_one_user_across_three_sessions(store_url, tmp_path, monkeypatch, request):
    monkeypatch.setattr(pipeline, "SNAPSHOT_EVERY", 2)
    store = open_store(store_url)
    _fill(store)
    before = _everything_readable(store)
    assert all(text.encode() in before for text in ("Zebra", "E11223344"))  # the check below can fail
    if store_url.startswith("sqlite"):  # the search index (FTS5) holds the lower-cased words
        assert b"reykjavik" in b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("store.db"))
    assert store.derived(ALICE, pipeline.SNAPSHOT_KIND) and store.user_memory("", "bob")
    not_rederivable = _erase_one_message_and_one_user(store)
    _check_reads(store, store_url, not_rederivable)
    _assert_no_secret(_everything_readable(store))
    if store_url.startswith("sqlite"):
        store.close()
        files = [p for p in tmp_path.iterdir() if p.name.startswith("store.db")]
        data = b"".join(p.read_bytes() for p in files)  # the database, its WAL and shared memory, free pages included
        _assert_no_secret(data)
        assert "改成从北京出发".encode() in data  # the rest of the conversation is still there
    elif store_url.startswith("postgres"):
        from pg_server import find_bindir

        bindir = find_bindir()
        assert bindir is not None
        schema = parse_qs(urlparse(store_url).query)["options"][0].split("=")[1]
        base = request.getfixturevalue("pg_url")
        dump = subprocess.run([str(bindir / "pg_dump"), "--data-only", "--schema", schema, base],
                              capture_output=True, check=True).stdout
        assert "改成从北京出发".encode() in dump and b"erasures" in dump
        _assert_no_secret(dump)


def test_tampering_with_an_erasure_is_caught(tmp_path):
    from context_editor.signing import Signer

    signer = Signer.generate()
    editor = ContextEditor("travel", open_store(f"sqlite:///{tmp_path / 's.db'}", signer=signer))
    editor.ingest(ALICE, _conversations()[ALICE])
    erase(editor.store, [ALICE], actor="dpo", reason="request 1", messages=[1])
    con = sqlite3.connect(tmp_path / "s.db")
    # Text removed without a tombstone: an erasure nobody recorded.
    con.execute("UPDATE messages SET salt = NULL, payload = NULL WHERE session = ? AND idx = 2", (ALICE,))
    con.commit()
    report = verify_store(editor.store)
    assert not report.ok and "without an erasure tombstone" in " ".join(report.sessions[0].problems)
    # A payload changed under its commitment.
    con.execute("UPDATE messages SET payload = replace(payload, '北京', '上海') WHERE session = ? AND idx = 3", (ALICE,))
    con.commit()
    assert "do not match the commitment" in " ".join(verify_store(editor.store).sessions[0].problems)
    # A tombstone's actor rewritten: without a key only a stated limit; its signature catches it.
    assert "cannot be trusted" not in " ".join(verify_store(editor.store, pubkey=signer.public_hex).sessions[0].problems)
    con.execute("UPDATE erasures SET tombstone = replace(tombstone, '\"dpo\"', '\"ceo\"')")
    con.commit()
    assert "rewritten erasure tombstone" in " ".join(verify_store(editor.store).limits)
    problems = " ".join(verify_store(editor.store, pubkey=signer.public_hex).sessions[0].problems)
    assert "erasure tombstone cannot be trusted" in problems


def test_bad_erasure_targets_are_refused_with_a_fix_and_change_nothing(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 's.db'}"
    editor = ContextEditor("travel", url)
    editor.ingest(ALICE, _conversations()[ALICE])
    rows = editor.store.raw_rows(ALICE), editor.store.raw_payloads(ALICE)
    with pytest.raises(AuditError, match="actor and a reason"):
        erase(editor.store, [ALICE], actor=" ", reason="x", messages=[0])
    with pytest.raises(AuditError, match=r"no message 99 .*numbered 0 to 3"):
        erase(editor.store, [ALICE], actor="a", reason="x", messages=[99])
    with pytest.raises(AuditError, match="pass one of its fields: .*origin"):
        erase(editor.store, [ALICE], actor="a", reason="x", field_name="colour")
    cases = [
        (["erase", "--session", "trip", "--user", "alice", "--message", "7"], "CE522", "no message 7"),
        (["erase", "--session", "nope"], "CE501", "nope"),
        (["erase", "--user", "carol"], "CE522", "no stored session belongs to user 'carol'"),
        (["erase", "--session", "trip", "--user", "alice", "--message", "0", "--field", "origin"], "CE522", "one at a time"),
        (["erase"], "CE522", "nothing to erase"),
    ]
    for argv, code, words in cases:
        assert main([*argv, "--store", url, "--actor", "dpo", "--reason", "r"]) == 2, argv
        err = capsys.readouterr().err
        assert code in err and words in err and "fix:" in err and "Traceback" not in err, err
    assert (editor.store.raw_rows(ALICE), editor.store.raw_payloads(ALICE)) == rows  # nothing changed
    # The command line erases a field of one session, and says what it did.
    assert main(["erase", "--store", url, "--user", "alice", "--session", "trip", "--field", "origin",
                 "--actor", "dpo", "--reason", "request 7"]) == 0
    out = capsys.readouterr().out
    assert "erased  alice/trip: 0 messages, 2 edits, 1 replaced value (by dpo: request 7)" in out
    assert main(["audit", "verify", "--store", url]) == 0
    assert "2 edits, 1 replaced value erased (on " in capsys.readouterr().out


# ----------------------------------------------------------------------------- retention
def _retention_domain(tmp_path: Path, days: str = "180d") -> Path:
    text = Path(load_domain("travel").path).read_text(encoding="utf-8")
    path = tmp_path / "travel.yaml"
    path.write_text(text.replace("default_currency:", f"retention: {{messages: {days}}}\ndefault_currency:", 1),
                    encoding="utf-8")
    return path


def test_retention_erases_what_is_older_with_signed_tombstones_and_verify_passes(store_url, tmp_path):
    from context_editor.signing import Signer

    signer = Signer.generate()
    store = open_store(store_url, signer=signer)
    editor = ContextEditor(_retention_domain(tmp_path), store)
    old, recent = "2024-01-02T09:00:00+00:00", "2024-06-20T09:00:00+00:00"
    editor.ingest("s1", [{"role": "user", "content": "从乌鲁木齐飞三亚，电话13912345678", "timestamp": old},
                         {"role": "user", "content": "两个人", "timestamp": recent}])
    editor.ingest("s2", [{"role": "user", "content": "I fly from Reykjavik to Lima", "timestamp": recent}])
    editor.ingest("s3", [{"role": "user", "content": "from Oslo to Lima, 2 people", "timestamp": old}])
    now = datetime(2024, 7, 1, tzinfo=timezone.utc)  # 181 days after the old messages, 11 after the recent ones
    plan = retention_plan(store, now)
    assert [(p.session, p.messages, p.days) for p in plan] == [("s1", (0,), 180), ("s3", (0,), 180)]
    assert apply_retention(store, now, dry_run=True) == plan and store.messages("s1")[0].content != ERASED
    done = apply_retention(store, now)  # both sessions in one store transaction
    assert len(done) == 2 and done[0].tombstones and {t.kind for t in done[0].tombstones} == {"message", "edit"}
    assert store.messages("s3")[0].content == ERASED and editor.state("s3").get("travelers") == ERASED
    assert store.messages("s1")[0].content == ERASED and store.messages("s1")[1].content == "两个人"
    assert editor.state("s1").get("travelers") == 2 and store.messages("s2")[0].content.startswith("I fly")
    report = verify_store(store, pubkey=signer.public_hex)
    assert report.ok, [v.problems for v in report.sessions]
    assert [v.erasure_summary() for v in report.sessions if v.session == "s1"] == [
        [f"1 message, {len(done[0].tombstones) - 1} edits erased (on {datetime.now(timezone.utc).date()}, by retention, "
         "retention: messages 180d (domain travel))"]]
    assert apply_retention(store, now) == []  # nothing left to erase: no second tombstone
    assert "13912345678" not in repr(store.raw_payloads("s1")) + repr(store.edits("s1"))


def test_retention_apply_on_the_command_line(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 's.db'}"
    domain = _retention_domain(tmp_path, "30d")
    editor = ContextEditor(domain, url)
    editor.ingest("s1", [{"role": "user", "content": "从乌鲁木齐飞三亚", "timestamp": "2024-01-02T09:00:00+00:00"},
                         {"role": "user", "content": "两个人", "timestamp": "2024-03-01T09:00:00+00:00"}])
    editor.store.close()
    assert main(["retention", "apply", "--store", url, "--now", "2024-03-05", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would erase  s1: 1 message older than 30 days (before 2024-02-04" in out and "dry run" in out
    assert main(["retention", "apply", "--store", url, "--now", "2024-03-05"]) == 0
    out = capsys.readouterr().out
    assert "erased  s1: 1 message" in out
    assert main(["audit", "verify", "--store", url]) == 0
    assert "by retention, retention: messages 30d (domain travel)" in capsys.readouterr().out
    assert main(["retention", "apply", "--store", url, "--now", "yesterday"]) == 2
    assert "CE001" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["retention", "apply", "--help"])
    helptext = capsys.readouterr().out
    assert "retention: {messages: 180d}" in helptext and "--dry-run" in helptext and "tombstone" in helptext


@pytest.mark.parametrize("bad", ["180", "0d", "6m", "-3d"])
def test_lint_refuses_a_retention_that_is_not_days(tmp_path, bad):
    with pytest.raises(DomainError) as refused:
        load_domain(_retention_domain(tmp_path, bad))
    said = str(refused.value)
    assert "travel.yaml:8: [CE104] `messages`" in said and ("e.g. 180d" in said or "must be text" in said), said
