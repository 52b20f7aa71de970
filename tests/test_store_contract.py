"""One contract, every backend: the guarantees of context_editor.store.base.Store.

Each test runs on memory://, SQLite and PostgreSQL. Messages and edits are built here directly
(edits sealed into a valid hash chain), so the store is tested without the pipeline.
PostgreSQL runs on a private throwaway server (tests/pg_server.py); without one the postgres
cases skip, except under CI, where a missing server must fail the run instead of hiding it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields, replace

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_editor.errors import StoreError
from context_editor.model import GENESIS_HASH, Edit, Message, Provenance, canonical_json
from context_editor.signing import Signer, check_signature
from context_editor.store import KeyRecord, Store, open_store
from context_editor.store.base import UNSEALED, Usage, derived_text, sealed, unsealed

DOMAIN, VERSION = "shop", "v" * 64


@pytest.fixture
def store(store_url):
    s = open_store(store_url)
    yield s
    s.close()


@pytest.fixture
def shared_url(store_url) -> str:
    """A URL that a second store instance can open onto the same data."""
    if store_url == "memory://":
        pytest.skip("memory:// has no storage that a second instance could open")
    return store_url


def next_turn(store: Store, session: str, content: str = "hello", n_edits: int = 2, *,
              role: str = "user", round_: int | None = None) -> tuple[Message, list[Edit]]:
    """The next message of `session` and `n_edits` edits, both chained onto what is stored."""
    msgs, log = store.messages(session), store.edits(session)
    index = len(msgs)
    m = Message(session=session, index=index, round=index if round_ is None else round_, role=role,
                content=content, timestamp=f"2024-05-01T10:{index % 60:02d}:00+08:00", id=f"m{index}",
                tool_calls=({"id": f"call{index}", "name": "lookup", "arguments": {"q": content[:20]}},),
                ).sealed(msgs[-1].hash if msgs else GENESIS_HASH)
    seq, prev = (log[-1].seq + 1, log[-1].hash) if log else (0, GENESIS_HASH)
    edits = []
    for k in range(n_edits):
        prov = Provenance(message_index=index, round=m.round, role=role, span=(0, len(content)), text=content,
                          extractor="test", confidence=0.9, domain_version=VERSION, message_id=m.id)
        e = Edit(session=session, seq=0, message_index=index, round=m.round, stage="extract", op="set",
                 field=f"field_{k}", before=None, after={"value": content, "k": k}, source="initial",
                 reason=content, provenance=prov, domain_version=VERSION, at=m.timestamp).sealed(seq, prev)
        edits.append(e)
        seq, prev = seq + 1, e.hash
    return m, edits


def add(store: Store, session: str, content: str = "hello", n_edits: int = 2, **kw) -> tuple[Message, list[Edit]]:
    m, edits = next_turn(store, session, content, n_edits, **kw)
    store.append(DOMAIN, VERSION, m, edits)
    return m, edits


def snapshot(store: Store, session: str) -> tuple:
    return (store.sessions(), store.session(session),
            [canonical_json(m.to_dict()) for m in store.messages(session)],
            [canonical_json(e.to_dict()) for e in store.edits(session)])


def assert_chains(store: Store, session: str) -> None:
    """Both hash chains of a session recompute from the stored bytes and link from genesis."""
    msg_rows, edit_rows = store.raw_rows(session)
    for rows in ([(idx, body, h) for idx, _, body, h in msg_rows], [(seq, body, h) for seq, _, _, body, h in edit_rows]):
        prev = GENESIS_HASH
        for i, (position, body, stored_hash) in enumerate(rows):
            assert position == i and json.loads(body)["prev_hash"] == prev
            assert hashlib.sha256(body.encode("utf-8")).hexdigest() == stored_hash
            prev = stored_hash


def test_domain_round_trip_is_idempotent(store):
    source = {"name": "shop", "fields": {"颜色": {"type": "enum", "values": ["红", "</state>"]}}}
    assert store.get_domain("h1") is None
    store.put_domain("h1", "shop", source)
    store.put_domain("h1", "shop", source)
    assert store.get_domain("h1") == source
    assert store.get_domain("h2") is None


def test_domain_keeps_key_order_and_refuses_a_changed_document(store, store_url):
    source = {"domain": "shop", "fields": {"z_last": {"type": "text"}, "a_first": {"type": "text"}}, "version": 1}
    store.put_domain("h1", "shop", source)
    assert list(store.get_domain("h1")["fields"]) == ["z_last", "a_first"]  # the author's order, not sorted
    name, text, digest = store.raw_domains()["h1"]
    assert name == "shop" and hashlib.sha256(text.encode()).hexdigest() == digest
    if store_url == "memory://":
        return
    with psycopg.connect(store_url) if store_url.startswith("postgresql") else sqlite3.connect(store_url[10:]) as c:
        c.execute("UPDATE domains SET source = replace(source, 'z_last', 'evil')")
    with pytest.raises(StoreError, match="does not match its SHA-256") as err:
        open_store(store_url).get_domain("h1")
    assert err.value.code == "CE506"


def test_session_head_and_raw_views(store):
    add(store, "s", n_edits=2)
    m, edits = add(store, "s", n_edits=1)
    store.put_domain(VERSION, DOMAIN, {"domain": DOMAIN})
    add(store, "t", n_edits=0)
    rows = store.raw_sessions()
    assert sorted(rows) == ["s", "t"]
    domain, version, n_msgs, n_edits, head, signature = rows["s"]
    assert (domain, version, n_msgs, n_edits, signature) == (DOMAIN, VERSION, 2, 3, None)
    assert json.loads(head) == {"session": "s", "domain": DOMAIN, "domain_version": VERSION, "domain_sha256": None,
                                "messages": 2, "edits": 3, "last_message_hash": m.hash, "last_edit_hash": edits[-1].hash}
    assert json.loads(rows["t"][4])["domain_sha256"] == store.raw_domains()[VERSION][2]
    assert json.loads(rows["t"][4])["last_edit_hash"] == GENESIS_HASH
    assert store.raw_sessions("s") == {"t": rows["t"]} and store.raw_sessions(upto="s") == {"s": rows["s"]}
    assert store.raw_sessions("s", "s") == {} and store.raw_sessions(None, "t") == rows


def test_heads_are_signed_with_the_store_signer(store):
    store.signer = Signer.generate()
    add(store, "s")
    head, signature = store.raw_sessions()["s"][4:]
    assert check_signature(signature, head, store.signer.public_hex) is None
    assert check_signature(signature, head.replace('"messages":1', '"messages":0'), store.signer.public_hex)
    assert check_signature(signature + " ", head)  # same key and signature, rewritten column: caught without a key


def test_a_message_must_link_to_the_last_stored_message(store):
    add(store, "s")
    m, edits = next_turn(store, "s")
    unlinked = Message.from_dict({**m.to_dict(), "hash": ""}).sealed(GENESIS_HASH)
    with pytest.raises(StoreError, match="does not link"):
        store.append(DOMAIN, VERSION, unlinked, [replace(e, message_index=unlinked.index) for e in edits])


def test_session_is_none_before_first_append_then_counts(store):
    assert store.session("s") is None
    add(store, "s", n_edits=3)
    add(store, "s", n_edits=0)
    info = store.session("s")
    assert (info.session, info.domain, info.domain_version, info.messages, info.edits) == ("s", DOMAIN, VERSION, 2, 3)


def test_append_round_trip_is_byte_identical(store):
    written = [add(store, "s", f"message {i}", n_edits=i % 3, role=("user", "assistant", "tool")[i % 3])
               for i in range(6)]
    assert [m.to_dict() for m in store.messages("s")] == [m.to_dict() for m, _ in written]
    assert [e.to_dict() for e in store.edits("s")] == [e.to_dict() for _, es in written for e in es]
    msg_rows, edit_rows = store.raw_rows("s")
    assert msg_rows == [(m.index, m.round, canonical_json(m.body()), m.hash) for m, _ in written]
    assert edit_rows == [(e.seq, e.round, e.message_index, canonical_json(e.body()), e.hash)
                         for _, es in written for e in es]
    assert_chains(store, "s")


def test_messages_since_round(store):
    for r in (0, 0, 1, 2, 2, 3):
        add(store, "s", f"round {r}", round_=r)
    assert [m.round for m in store.messages("s", since_round=2)] == [2, 2, 3]
    assert [m.index for m in store.messages("s", since_round=0)] == [0, 1, 2, 3, 4, 5]
    assert store.messages("s", since_round=4) == []
    assert store.messages("unknown") == [] and store.edits("unknown") == []


def test_sessions_are_sorted(store):
    assert store.sessions() == []
    for s in ("b", "a", "C", "ä", "a-2"):
        add(store, s)
    assert store.sessions() == sorted(["b", "a", "C", "ä", "a-2"])


BAD_BATCHES = ["index ahead", "index repeated", "seq repeated", "seq ahead", "duplicate seq in batch",
               "broken hash link", "edit of another message", "new session starting at seq 1"]


@pytest.mark.parametrize("bad", BAD_BATCHES)
def test_conflicting_append_raises_and_changes_nothing(store, bad):
    add(store, "s")
    m, edits = next_turn(store, "s")
    first, second = edits
    if bad == "index ahead":
        m = Message.from_dict({**m.to_dict(), "index": 5})
    elif bad == "index repeated":
        m = Message.from_dict({**m.to_dict(), "index": 0})
    elif bad == "seq repeated":
        edits = [e.sealed(e.seq - 2, e.prev_hash) for e in edits]
    elif bad == "seq ahead":
        edits = [e.sealed(e.seq + 1, e.prev_hash) for e in edits]
    elif bad == "duplicate seq in batch":
        edits = [first, second.sealed(first.seq, first.hash)]
    elif bad == "broken hash link":
        edits = [first, second.sealed(second.seq, GENESIS_HASH)]
    elif bad == "edit of another message":
        edits = [first, replace(second, message_index=0).sealed(second.seq, first.hash)]
    else:
        m, edits = next_turn(store, "new")
        edits = [e.sealed(e.seq + 1, e.prev_hash) for e in edits]
    before = snapshot(store, m.session)
    with pytest.raises(StoreError):
        store.append(DOMAIN, VERSION, m, edits)
    assert snapshot(store, m.session) == before
    add(store, m.session)  # the refused append left nothing behind that blocks the next one
    assert_chains(store, m.session)


class UnwritableEdit(Edit):
    """Passes every check, then fails when the store serialises it: a write failing midway."""

    __slots__ = ()

    def body(self) -> dict:
        raise RuntimeError("injected write failure")


@pytest.mark.parametrize("session", ["existing", "new"])
def test_append_rolls_back_when_a_write_fails_midway(store, store_url, session):
    if store_url == "memory://":
        pytest.skip("memory:// serialises nothing, so no write can fail after its checks")
    if session == "existing":
        add(store, session)
    m, (first, second) = next_turn(store, session)
    unwritable = UnwritableEdit(**{f.name: getattr(second, f.name) for f in fields(Edit) if f.init})
    before = snapshot(store, session)
    with pytest.raises(RuntimeError, match="injected write failure"):
        store.append(DOMAIN, VERSION, m, [first, unwritable])
    assert snapshot(store, session) == before
    add(store, session)
    assert_chains(store, session)


# A bulk load's appends (session, edits): new and existing sessions interleaved, messages with and
# without edits, several messages of one session in one batch.
BATCH_PLAN = [("old", 2), ("a", 1), ("b", 0), ("a", 0), ("old", 0), ("b", 3), ("a", 2), ("c", 0), ("c", 0), ("old", 1)]


def built_on(scratch: Store, plan: list[tuple[str, int]]) -> list[tuple[Message, list[Edit]]]:
    """The appends of `plan`, each chained onto the one before it in its session (made on `scratch`)."""
    return [add(scratch, s, f"{s} {i}", n) for i, (s, n) in enumerate(plan)]


def append_all(store: Store, turns: list[tuple[Message, list[Edit]]]) -> None:
    for m, edits in turns:
        store.append(DOMAIN, VERSION, m, edits)


@pytest.mark.parametrize("writer", ["same", "another"])
def test_a_batch_writes_what_one_append_at_a_time_writes(store, store_url, writer):
    """`batch()` (a bulk load; PostgreSQL holds the appends back and sends them in one statement)
    leaves the very rows, payloads and heads that the same appends made one at a time leave, and
    the store's own reads inside it see its appends. "another": a store instance that has not
    written these sessions itself, so it cannot know where they stand without reading."""
    if writer == "another" and store_url == "memory://":
        pytest.skip("memory:// has no storage that a second instance could open")
    scratch = open_store("memory://")  # the same appends, one at a time
    store.append(DOMAIN, VERSION, *add(scratch, "old", "before"))
    turns = built_on(scratch, BATCH_PLAN)
    target = store if writer == "same" else open_store(store_url)
    try:
        with target.batch():
            append_all(target, turns[:5])
            assert target.session("a").messages == 2 and len(target.edits("old")) == 4
            append_all(target, turns[5:])
    finally:
        if target is not store:
            target.close()
    for s in ("old", "a", "b", "c"):
        assert store.raw_rows(s) == scratch.raw_rows(s)
        assert store.raw_payloads(s) == scratch.raw_payloads(s)
        assert store.raw_sessions()[s] == scratch.raw_sessions()[s]
        assert_chains(store, s)


@pytest.mark.parametrize("failure", ["another writer", "write fails midway", "bad batch"])
def test_a_batch_that_fails_in_the_middle_writes_nothing(store, store_url, failure):
    """A batch that raises leaves every session as it was (nothing lost, nothing half-written):
    another writer moved one of its sessions after its appends were built (PostgreSQL finds out
    only when it sends them), one append fails to serialise, or one does not continue its chain."""
    if store_url == "memory://":
        pytest.skip("memory:// has no transactions: each append commits at once")
    other = open_store(store_url)
    try:
        scratch = open_store("memory://")
        for s in ("s", "t"):
            store.append(DOMAIN, VERSION, *add(scratch, s))
        turns = built_on(scratch, [("t", 1), ("s", 2), ("u", 1), ("t", 0), ("s", 1)])
        if failure == "another writer":
            add(other, "s", "other")
        elif failure == "write fails midway":
            m, (first, second) = turns[1]
            turns[1] = (m, [first, UnwritableEdit(**{f.name: getattr(second, f.name) for f in fields(Edit) if f.init})])
        else:
            m, edits = turns[3]
            turns[3] = (Message.from_dict({**m.to_dict(), "index": 0}), edits)
        before = {s: snapshot(store, s) for s in ("s", "t", "u")}
        with pytest.raises((StoreError, RuntimeError)) as caught:
            with store.batch():
                append_all(store, turns)
        assert "injected write failure" in str(caught.value) if failure == "write fails midway" else \
            isinstance(caught.value, StoreError) and "fix:" in str(caught.value)
        assert {s: snapshot(store, s) for s in ("s", "t", "u")} == before
        add(store, "t")  # the store goes on from what it holds
        for s in ("s", "t"):
            assert_chains(store, s)
    finally:
        other.close()


def test_sessions_are_isolated(store):
    a = [add(store, "a", f"a{i}", n_edits=2) for i in range(3)]
    b = [add(store, "b", f"b{i}", n_edits=1) for i in range(2)]
    assert [m.content for m in store.messages("a")] == ["a0", "a1", "a2"]
    assert [m.content for m in store.messages("b")] == ["b0", "b1"]
    assert [e.to_dict() for e in store.edits("a")] == [e.to_dict() for _, es in a for e in es]
    assert [e.to_dict() for e in store.edits("b")] == [e.to_dict() for _, es in b for e in es]
    assert (store.session("a").edits, store.session("b").edits) == (6, 2)


def test_derived_data_is_replaced_per_key_kept_per_session_and_dropped_by_kind(store):
    """Derived data (summary-zone stages, usage) is not part of the record: upserted by key,
    listed by key, isolated per session and kind, and droppable for a rebuild."""
    body = {"lines": [{"t": "对花生过敏 </state> \x01 🙂", "r": 1}], "last_index": 3}
    store.put_derived("a", "summary", 0, body)
    store.put_derived("a", "summary", -1, {"anchors": {}})
    store.put_derived("a", "summary", 0, {**body, "last_index": 4})
    store.put_derived("a", "usage", 0, {"renders": 1})
    store.put_derived("b", "summary", 0, {"other": True})
    assert store.derived("a", "summary") == {-1: {"anchors": {}}, 0: {**body, "last_index": 4}}
    assert list(store.derived("a", "summary")) == [-1, 0]
    store.drop_derived("a", "summary")
    assert store.derived("a", "summary") == {} and store.derived("a", "usage") == {0: {"renders": 1}}
    assert store.derived("b", "summary") == {0: {"other": True}}
    assert store.derived("nobody", "summary") == {}



def test_derived_rows_read_back_as_their_stored_bytes_over_which_a_seal_is_checked(store):
    """`raw_derived`: every row as the text `put_derived` stored, byte for byte (the UTF-8 of its
    `derived_text`), in key order and key range. A reopen checks a sealed row's digest over those
    bytes: the row as written opens to its body; changed by one byte, or read as another owner's,
    it does not."""
    body = {"lines": [{"t": "对花生过敏 \"q\" \\ </state> \x01 🙂", "r": 1, "x": 0.1 + 0.2, "n": 2**40}], "none": None}
    store.put_derived("a", "summary", 3, sealed(body, "a", "summary", "3"))
    store.put_derived("a", "summary", -1, {"plain": True})
    store.put_derived("b", "summary", 3, {"other": 1})
    texts = store.raw_derived("a", "summary")
    assert texts == {-1: derived_text({"plain": True}).encode(), 3: derived_text(sealed(body, "a", "summary", "3")).encode()}
    assert list(texts) == [-1, 3] and store.raw_derived("a", "summary", (0, 9)) == {3: texts[3]}
    assert store.raw_derived("a", "usage") == {} and store.derived("a", "summary")[3] == json.loads(texts[3])
    assert unsealed(texts[3], "a", "summary", "3") == (body, "")
    assert unsealed(texts[3], "b", "summary", "3")[0] is None and unsealed(texts[3], "a", "summary", "4")[0] is None
    assert unsealed(texts[-1], "a", "summary", "-1") == (None, UNSEALED)
    spoiled = texts[3].replace(b'"r": 1', b'"r": 2')
    assert len(spoiled) == len(texts[3]) and unsealed(spoiled, "a", "summary", "3")[0] is None


def test_usage_counts_are_added_atomically(store_url):
    """`add_usage` (a session's token account): counts are added to the session's row, created
    when absent, kept per session; concurrent writers (threads, and for a database a second store
    instance, as another process) lose no addition."""
    store = open_store(store_url)
    assert store.usage("a") == Usage()
    store.add_usage("a", Usage(1, 40, 400, 0))
    store.add_usage("a", Usage(1, 2**40, 9, 1))  # a long-lived account passes 2**31
    store.add_usage("b", Usage(1, 7, 70, 1))
    assert store.usage("a") == Usage(2, 2**40 + 40, 409, 1) and store.usage("b") == Usage(1, 7, 70, 1)
    store.put_derived("a", "usage", 0, {"renders": 5})  # derived data of the same name is another thing
    store.drop_derived("a", "usage")
    assert store.usage("a") == Usage(2, 2**40 + 40, 409, 1)
    writers = [store] if store_url == "memory://" else [store, open_store(store_url)]

    def add(i: int) -> None:
        writers[i % len(writers)].add_usage("c", Usage(1, i, 2 * i, i % 2))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(add, range(200)))
    assert store.usage("c") == Usage(200, sum(range(200)), 2 * sum(range(200)), 100)
    for w in writers:
        w.close()


def test_erase_empties_the_parts_keeps_the_commitments_and_cleans_up_in_one_go(store):
    """`Store.erase`: the tombstoned parts lose salt and payload (their commitments stay in the
    hashed bodies), the tombstones are stored signed, the session's derived data and its search
    index go (its token account stays), the user memory events the test picks go; other sessions untouched."""
    from context_editor.model import ERASED, SearchDoc, SearchFilter
    from context_editor.store.base import Tombstone

    signer = Signer.generate()
    store.signer = signer
    for s in ("a", "b"):
        add(store, s, "电话13912345678")
        add(store, s, "second")
        store.put_derived(s, "snapshot", 0, {"v": "电话13912345678"})
        store.add_usage(s, Usage(1, 10, 100, 0))
        store.index_search(s, [SearchDoc(0, 0, "user", None, (), "电话 13912345678")])
    store.append_user_memory("", "amy", [{"event": "remember", "field": "phone", "value": "13912345678", "session": "a"},
                                         {"event": "remember", "field": "city", "value": "Lima", "session": "b"}])
    before = store.raw_rows("a")
    bodies = [json.loads(body) for _, _, _, body, _ in before[1]]
    tombstones = [Tombstone("a", "message", 0, json.loads(before[0][0][2])["commitment"], "2024-06-01", "dpo", "r"),
                  Tombstone("a", "edit", 0, bodies[0]["commitment"], "2024-06-01", "dpo", "r"),
                  Tombstone("a", "before", 2, bodies[2]["before_commitment"], "2024-06-01", "dpo", "r")]
    store.erase(tombstones, {("", "amy"): lambda ev: ev["session"] == "a"})
    assert store.raw_rows("a") == before  # the hashed record is unchanged: both chains verify as they did
    assert_chains(store, "a")
    msgs, edits = store.messages("a"), store.edits("a")
    assert msgs[0].content == ERASED and msgs[0].erased and msgs[1].content == "second"
    assert edits[0].after == ERASED and edits[0].provenance.text == ERASED and edits[1].after == {"value": "电话13912345678", "k": 1}
    assert edits[2].before == ERASED and edits[2].before_erased and edits[2].after == {"value": "second", "k": 0}
    assert set(store.raw_payloads("a")) == {("message", 1), ("edit", 1), ("before", 0), ("before", 1), ("edit", 2),
                                            ("edit", 3), ("before", 3)}
    stored = store.erasures("a")
    assert [(k, p) for k, p, _, _ in stored] == [("before", 2), ("edit", 0), ("message", 0)]
    assert all(check_signature(sig, text, signer.public_hex) is None for _, _, text, sig in stored)
    assert store.derived("a", "snapshot") == {} and store.usage("a") == Usage(1, 10, 100, 0)  # it holds no text
    assert store.search("a", ["13912345678"], SearchFilter(), 10) == []
    assert [ev["field"] for ev in store.user_memory("", "amy")] == ["city"]
    assert store.session("a").erased == 3 and store.session("b").erased == 0
    assert store.messages("b")[0].content == "电话13912345678" and store.derived("b", "snapshot")
    assert store.search("b", ["13912345678"], SearchFilter(), 10) != [] and store.erasures("b") == []


def test_search_ranks_filters_and_isolates_sessions(store):
    """The search index (derived data): any-term match, best first, metadata filters, per session,
    replace by message index, drop for a rebuild; Chinese by character bigrams as given."""
    from context_editor.model import SearchDoc, SearchFilter

    docs = [SearchDoc(0, 1, "user", None, ("allergies",), "我 对花 花生 生过 过敏 i am allergic to peanuts"),
            SearchDoc(1, 1, "assistant", None, (), "noted your peanut allergy"),
            SearchDoc(2, 2, "tool", "search_flights", (), "flight mu5101 shanghai sanya 上海 三亚"),
            SearchDoc(3, 3, "user", None, ("budget_max",), "budget 2000 yuan 预算 算两 两千"),
            SearchDoc(4, 9, "user", None, (), "peanuts peanuts peanuts again")]
    store.index_search("a", docs)
    store.index_search("b", [SearchDoc(0, 1, "user", None, (), "peanuts in session b")])
    assert [i for i, _ in store.search("a", ["peanuts"], SearchFilter(), 10)] == [4, 0]
    assert store.search("a", ["花生", "过敏"], SearchFilter(), 10)[0][0] == 0
    assert [i for i, _ in store.search("a", ["peanuts", "flight"], SearchFilter(rounds=(1, 5)), 10)] in ([0, 2], [2, 0])
    assert [i for i, _ in store.search("a", ["peanuts", "budget"], SearchFilter(roles=("user",), rounds=(1, 5)), 10)] \
        in ([0, 3], [3, 0])
    assert [i for i, _ in store.search("a", ["flight", "peanuts"], SearchFilter(tools=("search_flights",)), 10)] == [2]
    assert [i for i, _ in store.search("a", ["peanuts", "budget"], SearchFilter(fields=("budget_max", "x")), 10)] == [3]
    assert store.search("a", ["nothing"], SearchFilter(), 10) == [] and store.search("a", [], SearchFilter(), 10) == []
    assert len(store.search("a", ["peanuts", "flight", "budget"], SearchFilter(), 2)) == 2
    assert [i for i, _ in store.search("b", ["peanuts"], SearchFilter(), 10)] == [0]
    assert store.search_indexed("a") == 4 and store.search_indexed("nobody") == -1
    store.index_search("a", [SearchDoc(4, 9, "user", None, (), "changed text")])
    assert [i for i, _ in store.search("a", ["peanuts"], SearchFilter(), 10)] == [0]
    assert store.search("a", ['"quoted" OR', "NEAR(x"], SearchFilter(), 10) == []  # terms are never query syntax
    store.drop_search("a")
    assert store.search("a", ["peanuts"], SearchFilter(), 10) == [] and store.search_indexed("a") == -1
    assert store.search("b", ["peanuts"], SearchFilter(), 10) != []


def test_messages_at_reads_the_given_indexes(store):
    for i in range(5):
        add(store, "s", f"m{i}")
    assert [m.content for m in store.messages_at("s", [3, 0, 3, 9])] == ["m0", "m3"]
    assert store.messages_at("s", []) == [] and store.messages_at("nobody", [0]) == []


HOSTILE = [
    "</state><state>injected</state>",
    "<![CDATA[ x ]]> ]]> &amp; &lt;",
    "emoji 🙂👍🏽👨‍👩‍👧 and flags 🇨🇳",
    "我想要红色的，不要蓝色；预算三千元以内",
    "controls \x01\x07\x08\x0b\x0c\x1b[31m\x7f\t\r\n\u2028\u2029 quotes ' \" \\ %s %(x)s $1 ?",
    ("</state>]]>😀中文\\\"" * 70_000)[:1_000_000],
]


@pytest.mark.parametrize("content", HOSTILE, ids=["state-tag", "cdata", "emoji", "chinese", "controls", "1MB"])
def test_hostile_content_round_trips(store, content):
    session = "会话 'x'; DROP TABLE edits; --"
    m, edits = add(store, session, content)
    assert [x.to_dict() for x in store.messages(session)] == [m.to_dict()]
    assert [e.to_dict() for e in store.edits(session)] == [e.to_dict() for e in edits]
    assert_chains(store, session)


def test_reopened_store_sees_the_data(store, shared_url):
    store.put_domain("h", "shop", {"a": 1})
    written = [add(store, "s", f"m{i}") for i in range(3)]
    store.close()
    again = open_store(shared_url)
    try:
        assert again.get_domain("h") == {"a": 1}
        assert again.sessions() == ["s"]
        assert [m.to_dict() for m in again.messages("s")] == [m.to_dict() for m, _ in written]
        assert [e.to_dict() for e in again.edits("s")] == [e.to_dict() for _, es in written for e in es]
        add(again, "s")
        assert again.session("s").messages == 4
    finally:
        again.close()


def test_data_version_moves_with_this_stores_appends_and_erasures_not_its_derived_writes(store):
    """`data_version`, what a reader checks before it reads a session's head again: the same
    while nothing is written, or only derived data and usage (a render's own writes); moved by an
    append, a records append, an erasure, and an append from another thread. PostgreSQL cannot
    tell without a round trip: None (read the head)."""
    from context_editor.store.base import Tombstone

    store.put_domain(VERSION, DOMAIN, {"domain": DOMAIN})
    if store.data_version() is None:
        assert store.url.startswith("postgresql")
        return
    marks = [store.data_version()]
    assert store.data_version() == marks[-1]
    store.add_usage("a", Usage(1, 10, 100, 0))
    store.put_derived("a", "summary", 0, {"lines": []})
    assert store.data_version() == marks[-1]

    def moved() -> bool:
        marks.append(store.data_version())
        return marks[-1] not in marks[:-1]

    add(store, "a", "电话13912345678")
    assert moved()
    store.append_records("a", records_after(store, "a"))
    assert moved()
    body = json.loads(store.raw_rows("a")[0][0][2])
    store.erase([Tombstone("a", "message", 0, body["commitment"], "2024-06-01", "dpo", "r")])
    assert moved()
    writer = threading.Thread(target=add, args=(store, "b"))
    writer.start()
    writer.join()
    assert moved() and store.data_version() == marks[-1]
    add(store, "b")  # a write of this store, this thread, nothing else: the mark `after_own_write` says
    assert moved() and store.after_own_write(marks[-2]) == marks[-1]
    store.append_records("b", records_after(store, "b"))
    assert moved() and store.after_own_write(marks[-2]) == marks[-1]
    with store.batch():
        add(store, "b")
        expected = store.after_own_write(marks[-1])
    assert moved() and expected in (None, marks[-1])  # None inside a batch (SQLite): nothing is committed yet


def test_data_version_moves_when_another_instance_or_process_commits(store, shared_url):
    """What another connection commits (another store instance, another process) moves this
    store's mark, whatever it wrote, and `after_own_write` of a mark taken before it is not the mark."""
    import subprocess
    import sys

    first = store.data_version()
    if first is None:
        return  # PostgreSQL: always read the head
    other = open_store(shared_url)
    add(other, "b")
    other.close()
    second = store.data_version()
    assert second != first
    add(store, "b")  # after another connection's commit: not what `after_own_write` of the older mark says
    assert store.data_version() == store.after_own_write(second) != store.after_own_write(first)
    script = ("import sys; from context_editor.store import open_store; from context_editor.store.base import Usage; "
              "open_store(sys.argv[1]).add_usage('x', Usage(1, 1, 1, 0))")
    subprocess.run([sys.executable, "-c", script, shared_url], check=True)
    assert store.data_version() not in (first, second)


@pytest.mark.parametrize("n_edits", [0, 2])
def test_a_head_another_writer_moved_is_not_written_over(store, shared_url, n_edits):
    """A store appends on the head it last wrote without reading it first (SQL stores): when
    another writer moved the session on since, a message built on the old head is refused and
    changes nothing, and one built on the new head is accepted."""
    other = open_store(shared_url)
    try:
        add(store, "s", n_edits=n_edits)
        add(store, "s", n_edits=n_edits)
        stale = next_turn(store, "s", "stale", n_edits=n_edits)
        add(other, "s", "other", n_edits=n_edits)
        before = snapshot(store, "s")
        with pytest.raises(StoreError):
            store.append(DOMAIN, VERSION, *stale)
        assert snapshot(store, "s") == before
        add(store, "s", "fresh", n_edits=n_edits)
        assert [m.content for m in other.messages("s")] == ["hello", "hello", "other", "fresh"]
    finally:
        other.close()


def test_concurrent_writers_on_one_session_keep_one_valid_chain(store, shared_url):
    """Two store instances race for every message index: exactly one wins each, the loser gets
    a StoreError, and the log is one valid chain of the winners' edits."""
    rounds, barrier = 15, threading.Barrier(2, timeout=60)  # a failing side must not hang the other

    def writer(name: str) -> list[tuple[int, bool]]:
        s, outcomes = open_store(shared_url), []
        try:
            for i in range(rounds):
                barrier.wait()  # the previous round is over on both sides
                m, edits = next_turn(s, "race", f"{name} {i}", n_edits=3)
                assert m.index == i
                barrier.wait()  # both built the same index on the same chain head: now race
                try:
                    s.append(DOMAIN, VERSION, m, edits)
                    outcomes.append((i, True))
                except StoreError:
                    outcomes.append((i, False))
        finally:
            s.close()
        return outcomes

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(writer, ["A", "B"]))
    wins = {i: [name for name, res in zip("AB", results) if dict(res)[i]] for i in range(rounds)}
    assert all(len(w) == 1 for w in wins.values()), wins
    stored = store.messages("race")
    assert [(m.index, m.content) for m in stored] == [(i, f"{wins[i][0]} {i}") for i in range(rounds)]
    assert store.session("race").edits == 3 * rounds
    assert_chains(store, "race")


def test_unreachable_postgres_is_a_store_error_with_a_fix():
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL") as err:
        open_store("postgresql://nobody@127.0.0.1:1/nowhere")
    assert err.value.fix and "start the server" in err.value.fix


turns = st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool", "system"]), st.text(max_size=200),
                           st.integers(0, 1), st.integers(0, 3)), min_size=1, max_size=6)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=turns)
def test_any_sequence_of_appends_round_trips(store, turns):
    session, round_, written = f"p-{uuid.uuid4().hex}", 0, []  # a fresh session per example
    for role, content, round_step, n_edits in turns:
        round_ += round_step
        written.append(add(store, session, content, n_edits, role=role, round_=round_))
    assert [m.to_dict() for m in store.messages(session)] == [m.to_dict() for m, _ in written]
    assert [e.to_dict() for e in store.edits(session)] == [e.to_dict() for _, es in written for e in es]
    assert_chains(store, session)


def test_edits_since_seq_and_known_message_ids(store):
    written = [add(store, "s", f"turn {i}", n_edits=2) for i in range(3)]
    everything = [e.to_dict() for _, es in written for e in es]
    assert [e.to_dict() for e in store.edits("s", since_seq=-1)] == everything
    assert [e.to_dict() for e in store.edits("s", since_seq=3)] == everything[4:]
    assert store.edits("s", since_seq=5) == [] and store.edits("unknown", since_seq=0) == []
    assert store.known_message_ids("s", ["m0", "m2", "m9"]) == {"m0", "m2"}
    assert store.known_message_ids("s", []) == set() and store.known_message_ids("other", ["m0"]) == set()


def test_keys_are_stored_by_hash_listed_and_revoked_once(store):
    a = KeyRecord("k1", "h" * 64, "acme", "writer", "2024-05-01T10:00:00+00:00")
    b = KeyRecord("k0", "g" * 64, "globex", "auditor", "2024-05-01T11:00:00+00:00")
    store.put_key(a)
    store.put_key(b)
    assert store.get_key("h" * 64) == a and store.get_key("x" * 64) is None
    assert [k.key_id for k in store.keys()] == ["k0", "k1"]
    assert store.revoke_key("k1", "2024-05-02T00:00:00+00:00") is True
    assert store.revoke_key("k1", "2024-05-03T00:00:00+00:00") is False and store.revoke_key("nope", "x") is False
    assert store.get_key("h" * 64).revoked == "2024-05-02T00:00:00+00:00"


def records_after(store: Store, session: str, n: int = 1) -> list[Edit]:
    """`n` render-time records (op `llm`) chained onto the session's last message."""
    msgs, log = store.messages(session), store.edits(session)
    seq, prev = (log[-1].seq + 1, log[-1].hash) if log else (0, GENESIS_HASH)
    out = []
    for k in range(n):
        e = Edit(session=session, seq=0, message_index=msgs[-1].index, round=msgs[-1].round, stage="inject", op="llm",
                 field=None, before=None, after={"prompt_hash": f"{k:064x}", "result": {"m0": 4}}, source="llm",
                 reason="LLM_SCORE", provenance=None, domain_version=VERSION).sealed(seq, prev)
        out.append(e)
        seq, prev = seq + 1, e.hash
    return out


def test_records_append_after_the_last_message_on_the_same_chain_and_head(store):
    """A render's recorded model answers join the session's hash chain and head, atomically;
    records that do not continue the chain (a stale head, another message) change nothing."""
    store.put_domain(VERSION, DOMAIN, {"domain": DOMAIN})
    with pytest.raises(StoreError, match="no message"):
        store.append_records("none", [records_after_dummy()])
    add(store, "s", n_edits=2)
    stale = records_after(store, "s", 2)
    store.append_records("s", stale)
    assert store.session("s").edits == 4 and [e.hash for e in store.edits("s", since_seq=1)] == [e.hash for e in stale]
    head = json.loads(store.raw_sessions()["s"][4])
    assert head["edits"] == 4 and head["last_edit_hash"] == stale[-1].hash and head["messages"] == 1
    assert_chains(store, "s")
    before = snapshot(store, "s")
    for bad in (stale, [replace(e, message_index=5) for e in records_after(store, "s")]):
        with pytest.raises(StoreError):
            store.append_records("s", bad)
        assert snapshot(store, "s") == before
    add(store, "s", n_edits=1)  # the next message continues after the records
    late = [replace(e, message_index=0) for e in records_after(store, "s")]
    with pytest.raises(StoreError):
        store.append_records("s", late)  # records of an older message: a writer raced ahead
    assert_chains(store, "s")


def records_after_dummy() -> Edit:
    return Edit(session="none", seq=0, message_index=0, round=0, stage="inject", op="llm", field=None, before=None,
                after={"prompt_hash": "0" * 64}, source="llm", reason="LLM_SCORE", provenance=None,
                domain_version=VERSION).sealed(0, GENESIS_HASH)


def test_user_memory_is_appended_in_order_and_kept_per_tenant_and_user(store, store_url):
    first = [{"event": "remember", "field": "seat", "value": "window", "at": "2024-01-01T00:00:00+00:00"},
             {"event": "use", "field": "seat", "value": "window", "at": "2024-02-01T00:00:00+00:00"}]
    store.append_user_memory("acme", "u1", first)
    store.append_user_memory("acme", "u1", [{"event": "remember", "field": "seat", "value": "过道 </x>", "at": "x"}])
    store.append_user_memory("acme", "u2", [{"event": "remember", "field": "seat", "value": "aisle", "at": "y"}])
    store.append_user_memory("beta", "u1", [{"event": "remember", "field": "seat", "value": "aisle", "at": "z"}])
    assert [e["value"] for e in store.user_memory("acme", "u1")] == ["window", "window", "过道 </x>"]
    assert store.user_memory("acme", "u1")[:2] == first
    assert [e["at"] for e in store.user_memory("acme", "u2")] == ["y"] and store.user_memory("beta", "u2") == []
    assert [e["at"] for e in store.user_memory("beta", "u1")] == ["z"] and store.user_memory("", "u1") == []
    if store_url != "memory://":
        again = open_store(store_url)
        assert again.user_memory("acme", "u1") == store.user_memory("acme", "u1")
        again.close()
def test_key_ranges_walk_sessions_in_code_point_order(store):
    keys = ["acme/u/1", "acme/u/2", "acme/v/1", "acme0", "b", "ä", "中/1", "A"]
    for s in keys:
        add(store, s, n_edits=1)
    ordered = sorted(keys)
    assert store.session_keys() == ordered == store.sessions()
    assert store.session_keys("acme/", "acme/\U0010ffff") == ["acme/u/1", "acme/u/2", "acme/v/1"]  # a tenant
    assert store.session_keys("acme/u/1", "b") == ["acme/u/2", "acme/v/1", "acme0", "b"]  # (after, upto]
    assert store.session_keys(upto="A") == ["A"] and store.session_keys("\uffff") == []
    assert store.session_keys("acme0", limit=2) == ["b", "ä"]
    pages, after = [], None  # paging by key, as a batch driver does, visits each session once
    while page := store.session_keys(after, limit=3):
        pages.append(page)
        after = page[-1]
    assert sum(pages, []) == ordered and [len(p) for p in pages] == [3, 3, 2]


def test_a_batch_read_returns_each_session_as_its_own_reads_do(store):
    for s, turns in (("s2", 3), ("s1", 1), ("中", 2)):
        for i in range(turns):
            add(store, s, f"{s} turn {i} </state>", n_edits=i + 1)
    batch = store.read_sessions(["中", "s1", "missing", "s2"])
    assert [b.info.session for b in batch] == ["中", "s1", "s2"]  # the order asked for; unknown ids left out
    for b in batch:
        assert b.info == store.session(b.info.session)
        assert [m.to_dict() for m in b.messages] == [m.to_dict() for m in store.messages(b.info.session)]
        assert [e.to_dict() for e in b.edits] == [e.to_dict() for e in store.edits(b.info.session)]
    assert store.read_sessions([]) == []
