"""`ingest_many`: a bulk load commits many messages per store transaction, with exactly the
rows (and so the hash chains) that one `add` per message writes; a message that fails rolls back
its batch whole, never half a message, and the editor goes on from what the store holds.
Run on memory, one SQLite file and a real PostgreSQL server."""

from __future__ import annotations

import pytest

from context_editor import ContextEditor, audit
from context_editor.errors import ContextEditorError
from context_editor.store import open_store
from conftest import seeded_salts

TS = "2024-05-01T10:00:00+08:00"
TEXTS = ["我想买耳机，要黑色", "预算2000以内", "I want red headphones", "改成白色", "budget under 300 dollars", "还是黑色吧"]


def items(n: int, sessions: int = 3) -> list[tuple[str, dict]]:
    return [(f"s{i % sessions}", {"role": "user" if i % 2 == 0 else "assistant", "content": TEXTS[i % len(TEXTS)],
                                  "timestamp": TS}) for i in range(n)]


def test_a_bulk_load_writes_the_rows_one_add_per_message_writes(store_url, tmp_path):
    bulk = ContextEditor("ecommerce", open_store(store_url), salts=seeded_salts("bulk"))
    assert bulk.ingest_many(items(40), batch_size=7) == 40
    one = ContextEditor("ecommerce", f"sqlite:///{tmp_path / 'one.db'}", salts=seeded_salts("bulk"))
    for session, message in items(40):
        one.add(session, message)
    for s in ("s0", "s1", "s2"):
        assert bulk.store.raw_rows(s) == one.store.raw_rows(s)
        assert bulk.store.raw_sessions()[s] == one.store.raw_sessions()[s]  # the same head
        assert bulk.state(s).to_json() == one.state(s).to_json()
    assert all(v.ok for v in audit.verify(bulk.store))


def test_a_failing_message_rolls_back_its_batch_whole_and_the_editor_goes_on(store_url):
    editor = ContextEditor("ecommerce", open_store(store_url))
    good = items(12)
    bad = good[:10] + [("s1", {"role": "robot", "content": "hi"})] + good[10:]  # not a role
    with pytest.raises(ContextEditorError):
        editor.ingest_many(bad, batch_size=4)  # batches of 4: the first two commit
    reader = open_store(store_url)
    if store_url == "memory://":
        reader = editor.store  # one process: the same store
    counts = {s: (reader.session(s).messages if reader.session(s) else 0) for s in ("s0", "s1", "s2")}
    if store_url == "memory://":
        assert sum(counts.values()) == 10  # no transactions: every message before the bad one stays
    else:
        assert sum(counts.values()) == 8  # the third batch (messages 8, 9 and the bad one) is gone whole
    assert all(v.ok for v in audit.verify(reader))
    # The editor's caches were dropped with the batch: it continues from what the store holds.
    done = sum(counts.values())
    assert editor.ingest_many(good[done:], batch_size=4) == 12 - done
    fresh = ContextEditor("ecommerce", reader)  # a second editor, reading the store afresh
    for s in ("s0", "s1", "s2"):
        assert editor.state(s).to_json() == fresh.state(s).to_json()
        assert audit.replay(editor.store, s).identical


def test_a_batch_that_meets_another_writer_is_redone_and_loses_nothing(store_url):
    """PostgreSQL sends a batch's appends together at its end: if another writer moved one of its
    sessions meanwhile, the batch is rolled back and redone message by message on what the store
    holds, so every message lands once, on one valid chain."""
    if store_url == "memory://":
        pytest.skip("memory:// has no storage that a second editor could open")
    editor = ContextEditor("ecommerce", open_store(store_url))
    other = ContextEditor("ecommerce", open_store(store_url))
    editor.add("s0", {"role": "user", "content": "我想买耳机", "timestamp": TS})  # editor now holds s0's fold
    other.add("s0", {"role": "assistant", "content": "好的，预算多少？", "timestamp": TS})  # moved on behind its back
    assert editor.ingest_many(items(9), batch_size=20) == 9
    fresh = ContextEditor("ecommerce", open_store(store_url))
    assert [m.content for m in fresh.store.messages("s0")] == ["我想买耳机", "好的，预算多少？"] + [
        m["content"] for s, m in items(9) if s == "s0"]
    for s in ("s0", "s1", "s2"):
        assert editor.state(s).to_json() == fresh.state(s).to_json()
        assert audit.replay(fresh.store, s).identical
    assert all(v.ok for v in audit.verify(fresh.store))
