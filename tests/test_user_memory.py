"""A user's memory across sessions (issue 11): `scope: user` fields outlive the session for the
same tenant and user, decay by `half_life_days` (time comes from the message timestamps: no
sleeping), are refreshed by use, resolve conflicts by policy with the old value superseded, and
never cross a user or a tenant. New sessions see them as `user_memory` edits (`why` explains
them; `audit replay` reproduces them)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_editor import ContextEditor, load_domain
from context_editor.audit import replay, verify
from context_editor.errors import DomainError
from context_editor.memory.user import UserMemory
from context_editor.model import session_key
from context_editor.store import open_store

T0 = datetime(2024, 1, 10, 9, 0, tzinfo=timezone.utc)


def say(editor: ContextEditor, session: str, text: str, days: float) -> None:
    editor.add(session, {"role": "user", "content": text, "timestamp": (T0 + timedelta(days=days)).isoformat()})


@pytest.fixture
def travel(store_url) -> ContextEditor:
    return ContextEditor("travel", store_url)


def seat(editor: ContextEditor, session: str):
    return editor.state(session).get("seat_preference")


def test_a_new_session_of_the_same_user_starts_with_the_remembered_value(travel):
    s1, s2 = session_key("trip1", tenant="acme", user="u1"), session_key("trip2", tenant="acme", user="u1")
    say(travel, s1, "下个月去三亚，座位要靠窗", 0)
    say(travel, s2, "我想订去成都的机票", 10)
    assert seat(travel, s2) == "window"
    fs = travel.state(s2).fields["seat_preference"]
    assert fs.source == "user_memory" and fs.set_round == 1
    why = travel.why(s2, "seat_preference")
    assert why["history"][0]["source"] == "user_memory"
    assert why["history"][0]["reason"] == "USER_MEMORY from session acme/u1/trip1 round 1"
    prov = why["provenance"]
    assert prov["extractor"] == "user_memory" and prov["message_id"] == "acme/u1/trip1#0" and prov["text"] == "靠窗"
    assert prov["message_index"] == -1 and 0.2 < prov["confidence"] < 0.8  # decayed a little in 10 days
    field = ET.fromstring(travel.render(s2, "book_flight").xml).find("state/field[@name='seat_preference']")
    assert field is not None and field.get("source") == "user_memory"
    assert travel.state(s2).get("destination") == "成都"  # the session's own values are untouched


def test_decay_forgets_below_the_threshold_and_use_refreshes(travel):
    """seat_preference: importance 0.8, half-life 180 days, forgotten below 0.2, i.e. after 360 days."""
    u = lambda s: session_key(s, tenant="acme", user="u1")  # noqa: E731
    say(travel, u("a"), "座位要靠过道", 0)
    say(travel, u("b"), "订机票", 359)
    assert seat(travel, u("b")) == "aisle"  # weight just above 0.2; being given it refreshes the clock
    say(travel, u("c"), "订机票", 359 + 300)
    assert seat(travel, u("c")) == "aisle"  # 300 days after its last use: 0.8 * 0.5**(300/180) = 0.25
    other = ContextEditor("travel", "memory://")
    say(other, u("a"), "座位要靠过道", 0)
    say(other, u("c"), "订机票", 361)
    assert seat(other, u("c")) is None  # never used in between: forgotten after 360 days
    weight = other.user_memory("acme", "u1").current["seat_preference"].weight(
        other.domain.fields["seat_preference"], T0 + timedelta(days=180))
    assert weight == pytest.approx(0.4)


def test_a_conflict_resolves_by_policy_and_keeps_the_old_value_as_superseded(travel):
    u = lambda s: session_key(s, tenant="acme", user="u1")  # noqa: E731
    say(travel, u("a"), "座位要靠窗", 0)
    say(travel, u("b"), "这次座位要靠过道", 5)  # given "window", then the user changes it
    history = [(h["value"], h["source"], h["status"]) for h in travel.why(u("b"), "seat_preference")["history"]]
    assert history == [("window", "user_memory", "accepted"), ("aisle", "correction", "accepted")]
    memory = travel.user_memory("acme", "u1").current["seat_preference"]
    assert (memory.value, memory.session, memory.superseded) == ("aisle", u("b"), ("window",))  # policy: latest
    say(travel, u("c"), "订机票", 6)
    assert seat(travel, u("c")) == "aisle"
    assert travel.why(u("c"), "seat_preference")["history"][0]["reason"].endswith(f"session {u('b')} round 1")


def test_memory_never_crosses_users_tenants_or_sessions_without_a_user(travel):
    say(travel, session_key("a", tenant="acme", user="u1"), "座位要靠窗", 0)
    for other in (session_key("b", tenant="acme", user="u2"), session_key("b", tenant="beta", user="u1"),
                  session_key("b", user="u1"), session_key("b", tenant="acme"), "b"):
        say(travel, other, "订机票", 1)
        assert seat(travel, other) is None, other
    assert travel.store.user_memory("beta", "u1") == [] and travel.store.user_memory("", "u1") == []
    say(travel, session_key("c", user="u1"), "座位要靠过道", 2)  # no tenant: its own namespace
    say(travel, session_key("d", user="u1"), "订机票", 3)
    assert seat(travel, session_key("d", user="u1")) == "aisle"
    say(travel, session_key("e", tenant="acme", user="u1"), "订机票", 3)
    assert seat(travel, session_key("e", tenant="acme", user="u1")) == "window"


def test_replay_takes_the_recorded_memory_as_input(tmp_path):
    db = str(tmp_path / "m.db")
    editor = ContextEditor("travel", db)
    u = lambda s: session_key(s, tenant="acme", user="u1")  # noqa: E731
    say(editor, u("a"), "座位要靠窗", 0)
    say(editor, u("b"), "订去成都的机票", 1)
    say(editor, u("c"), "座位要靠过道", 2)  # the memory moves on after b was given "window"
    store = open_store(db)
    assert replay(store, u("b")).identical and all(v.ok for v in verify(store))
    assert seat(ContextEditor("travel", db), u("b")) == "window"


def test_finance_risk_profile_carries_over_to_the_next_consultation():
    editor = ContextEditor("finance", "memory://")
    u = lambda s: session_key(s, tenant="bank", user="c7")  # noqa: E731
    say(editor, u("q1"), "I'm a conservative investor, I can't afford to lose money", 0)
    say(editor, u("q2"), "I have 50000 to invest", 30)
    assert editor.state(u("q2")).get("risk_profile") == "conservative"
    assert editor.state(u("q2")).fields["risk_profile"].source == "user_memory"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["window", "aisle"]), st.integers(0, 400)), min_size=1, max_size=8))
def test_latest_policy_fold_keeps_every_change_as_superseded(said):
    """Whatever the order of sessions, the current value is the last one said and every change
    before it is kept, oldest first."""
    domain = load_domain("travel")
    days = 0
    events = []
    for i, (value, gap) in enumerate(said):
        days += gap
        events.append({"event": "remember", "field": "seat_preference", "value": value, "session": f"s{i}", "round": 1,
                       "message_index": 0, "span": [0, 2], "text": value, "confidence": 0.9,
                       "at": (T0 + timedelta(days=days)).isoformat()})
    item = UserMemory.fold(domain, events).current["seat_preference"]
    changes = [v for k, v in enumerate(said) if k == 0 or v[0] != said[k - 1][0]]
    assert item.value == said[-1][0] and list(item.superseded) == [v for v, _ in changes[:-1]]


def test_memory_settings_need_scope_user(tmp_path):
    text = (Path(load_domain("travel").path).read_text(encoding="utf-8")
            .replace("    scope: user                            # remembered for the same user's next trips\n", ""))
    path = tmp_path / "travel.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DomainError, match="`memory` applies to fields with `scope: user`"):
        load_domain(path)


def test_a_users_memory_is_rebuilt_from_the_session_logs(store_url):
    """The memory events are derived data: lost (a crash after the message's transaction) or
    wiped, `rebuild_user_memory` recomputes exactly what the sessions appended, across domains,
    and touches no other user's or tenant's memory."""
    from context_editor.pipeline import rebuild_user_memory

    travel = ContextEditor("travel", store_url)
    finance = ContextEditor("finance", travel.store)
    u = lambda s, user="u1", tenant="acme": session_key(s, tenant=tenant, user=user)  # noqa: E731
    say(travel, u("t1"), "下个月去三亚，座位要靠窗", 0)
    say(finance, u("f1"), "I'm a conservative investor, I can't afford to lose money", 1)
    say(travel, u("t2"), "我想订去成都的机票", 5)  # given the window seat: a `use`
    say(travel, u("t3"), "This time I'd like an aisle seat", 9)  # the user changes their mind
    say(travel, u("t1", user="u2"), "I prefer a window seat", 2)
    say(travel, u("t1", tenant="other"), "I prefer an aisle seat", 3)
    say(travel, session_key("t1", user="u1"), "I prefer a window seat", 4)  # no tenant: another memory
    store = travel.store
    owners = [("acme", "u1"), ("acme", "u2"), ("other", "u1"), ("", "u1")]
    recorded = {o: store.user_memory(*o) for o in owners}
    assert {e["event"] for e in recorded[("acme", "u1")]} == {"remember", "use"}
    assert {e["field"] for e in recorded[("acme", "u1")]} == {"seat_preference", "risk_profile"}

    assert rebuild_user_memory(store, "acme", "u1") == recorded[("acme", "u1")]  # the same events, same order
    store.replace_user_memory("acme", "u1", [])  # lost
    assert travel.user_memory("acme", "u1").current == {}
    rebuild_user_memory(store, "acme", "u1")
    assert store.user_memory("acme", "u1") == recorded[("acme", "u1")]
    assert {o: store.user_memory(*o) for o in owners} == recorded  # nobody else's memory moved
    say(travel, u("t4"), "去杭州", 12)
    assert seat(travel, u("t4")) == "aisle"
    assert ContextEditor("finance", store).user_memory("acme", "u1").current["risk_profile"].value == "conservative"


def test_memory_rebuild_from_the_cli(tmp_path, capsys):
    from context_editor.cli import main

    url = f"sqlite:///{tmp_path / 's.db'}"
    travel = ContextEditor("travel", url)
    say(travel, session_key("t1", tenant="acme", user="u1"), "座位要靠窗", 0)
    say(travel, session_key("t2", tenant="acme", user="u1"), "去成都", 3)
    recorded = travel.store.user_memory("acme", "u1")
    travel.store.replace_user_memory("acme", "u1", [])
    assert main(["memory", "rebuild", "--store", url, "--tenant", "acme", "--user", "u1"]) == 0
    assert "2 events (1 remembered, 1 used) over fields seat_preference" in capsys.readouterr().out
    assert open_store(url).user_memory("acme", "u1") == recorded
    assert main(["memory", "rebuild", "--store", url, "--user", "a/b"]) == 2
    assert "[CE002]" in capsys.readouterr().err


def test_a_rebuild_does_not_bring_back_an_erased_value(store_url):
    from context_editor.audit import erase
    from context_editor.pipeline import rebuild_user_memory

    travel = ContextEditor("travel", store_url)
    t1, t2 = session_key("t1", tenant="acme", user="u1"), session_key("t2", tenant="acme", user="u1")
    say(travel, t1, "I prefer a window seat", 0)
    say(travel, t2, "Book me a flight to Boston", 5)
    erase(travel.store, [t1], actor="dpo", reason="request 1", messages=[0])
    kept = travel.store.user_memory("acme", "u1")
    assert all(e["value"] != "window" for e in kept if e["event"] == "remember")
    assert all(e["value"] != "[erased]" for e in rebuild_user_memory(travel.store, "acme", "u1"))
    say(travel, session_key("t3", tenant="acme", user="u1"), "去杭州", 9)
    assert seat(travel, session_key("t3", tenant="acme", user="u1")) is None  # never "[erased]", nor the erased value

