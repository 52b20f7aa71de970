"""Several editors over one store (service processes, CLI runs) never serve or build on a stale state.

Each editor caches a session's fold; every read checks it against the store's head and folds in
what the other writer appended, and an append that loses a race is recomputed and retried.
Run on one SQLite file and on a real PostgreSQL server.
"""

from __future__ import annotations

import threading

import pytest

from context_editor import ContextEditor, audit
from context_editor.store import open_store

TS = "2024-05-01T10:00:00+08:00"


@pytest.fixture(params=["sqlite", "postgres"])
def shared_store_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    return request.getfixturevalue("pg_schema_url")


def user(text: str, **kw) -> dict:
    return {"role": "user", "content": text, "timestamp": TS, **kw}


def test_second_editor_sees_the_other_writers_turns_and_appends_after_them(shared_store_url):
    a = ContextEditor("ecommerce", open_store(shared_store_url))
    b = ContextEditor("ecommerce", open_store(shared_store_url))
    a.add("s", user("我想买耳机，要黑色"))
    assert b.state("s").get("color") == "black"  # b caches the fold here
    a.add("s", user("改成红色"))
    assert b.state("s").get("color") == "red"  # ... and must not serve it stale
    assert "红色" in b.render("s", "place_order").xml
    b.add("s", user("预算2000以内"))  # was CE500: b built on its stale head
    a.add("s", user("还是黑色吧"))
    for editor in (a, b):
        state = editor.state("s")
        assert state.get("color") == "black" and state.get("budget_max") == {"amount": 2000, "currency": "CNY"}
        assert state.message_index == 3 and state.round == 4
    assert all(v.ok for v in audit.verify(open_store(shared_store_url)))


def test_editors_sharing_one_store_object_see_each_others_turns(store_url):
    """Two editors over one store instance (one connection per thread: the other's appends are
    not another connection's commits): a render after the other's turn shows it, and a render
    with nothing new (the store's `data_version` unchanged, the head not read) is the same."""
    store = open_store(store_url)
    a, b = ContextEditor("ecommerce", store), ContextEditor("ecommerce", store)
    a.add("s", user("我想买耳机，要黑色"))
    first = b.render("s", "place_order").xml
    assert "黑色" in first and b.render("s", "place_order").xml == first
    a.add("s", user("改成红色"))
    assert "红色" in b.render("s", "place_order").xml and b.state("s").get("color") == "red"
    other = ContextEditor("ecommerce", open_store(store_url)) if store_url != "memory://" else a
    other.add("s", user("预算2000以内"))  # another instance: another connection's commit
    assert b.state("s").get("budget_max") == {"amount": 2000, "currency": "CNY"}


def test_an_editor_that_appends_after_another_writers_records_still_sees_them(shared_store_url):
    """A message that brings no edit is appended on the message chain alone, so it goes in after
    records another writer appended meanwhile (a render's model answers); the appending editor
    must not take its state, which lacks them, for the store's from then on."""
    a = ContextEditor("ecommerce", open_store(shared_store_url))
    b = ContextEditor("ecommerce", open_store(shared_store_url))
    a.add("s", user("我想买耳机，要黑色"))
    a.render("s", "place_order")  # a checks its state against the store here
    b.record("s", [{"prompt_hash": "p" * 64, "kind": "score", "result": {"m0": 1}}])
    a.add("s", user("嗯"))
    assert "p" * 64 in a.state("s").llm and a.state("s").last_seq == b.state("s").last_seq


def test_racing_writers_on_one_session_lose_nothing_and_keep_one_chain(shared_store_url):
    editors = [ContextEditor("ecommerce", open_store(shared_store_url)) for _ in range(2)]
    errors: list[BaseException] = []

    def write(k: int) -> None:
        try:
            for i in range(12):
                editors[k].add("race", user(f"writer {k} message {i}", id=f"w{k}-{i}"))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    store = open_store(shared_store_url)
    stored = [m.id for m in store.messages("race")]
    assert sorted(stored) == sorted(f"w{k}-{i}" for k in range(2) for i in range(12))
    assert [m.index for m in store.messages("race")] == list(range(24))
    assert all(v.ok for v in audit.verify(store, "race"))


def test_idempotent_ingest_skips_message_ids_already_stored(shared_store_url):
    a = ContextEditor("ecommerce", open_store(shared_store_url))
    b = ContextEditor("ecommerce", open_store(shared_store_url))
    batch = [user("我想买耳机，要黑色", id="m1"), user("改成红色", id="m2")]
    a.ingest("s", batch, idempotent=True)
    state = b.ingest("s", [*batch, user("预算2000以内", id="m3")], idempotent=True)  # a retried, longer request
    assert [m.id for m in b.store.messages("s")] == ["m1", "m2", "m3"] and state.get("color") == "red"


def test_state_cache_is_bounded_lru():
    editor = ContextEditor("ecommerce", "memory://", cache_sessions=2)
    for s in ("a", "b", "c"):
        editor.add(s, user("要黑色"))
    editor.state("b")
    editor.state("d")
    assert list(editor._states) == ["b", "d"]
    assert editor.state("a").get("color") == "black"  # evicted sessions are rebuilt from the store
