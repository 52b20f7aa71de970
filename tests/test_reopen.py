"""Reopening a long session and a long-running process (issue 15).

- A snapshot of the folded state is stored every SNAPSHOT_EVERY messages (derived data): a
  reopened session folds only the edits after it, and the result equals the fold of the whole
  log. A snapshot that does not belong to the log (its last edit is not the stored one) is
  ignored. Snapshots never touch the record: tests/test_chain_unchanged.py.
- A process cycling through many sessions keeps at most `cache_sessions` of them, with
  everything it holds per session: its memory stays under a ceiling however many it serves.
"""

from __future__ import annotations

import gc
import json
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from context_editor import ContextEditor
from context_editor.inject.compact import SummaryLine
from context_editor.model import ERASED, SNAPSHOT_FORMAT, FieldState, HistoryEntry, Message, Provenance, State, extended, pack_ints, unpack_ints
from context_editor.pipeline import SNAPSHOT_EVERY, SNAPSHOT_KIND
from context_editor.store.base import derived_text, sealed, unsealed

TEXTS = ["我想买耳机，要黑色", "预算2000以内", "I want red headphones", "改成白色", "budget under 300 dollars", "还是黑色吧"]


def turns(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": TEXTS[i % len(TEXTS)],
             "timestamp": f"2024-05-01T10:{i // 60 % 60:02d}:{i % 60:02d}+08:00"} for i in range(n)]


def full_fold(editor: ContextEditor, session: str) -> State:
    """The whole log folded, each field's history held in memory as the editor holds it (its
    `history_cap`; the rest in compact form, the same whichever way it was folded)."""
    state = State.fold(editor.domain.name, editor.domain.version_hash, session, editor.store.edits(session))
    state.capped(editor.history_cap)
    last = editor.store.messages(session)[-1]
    state.round, state.message_index, state.last_message_hash = last.round, last.index, last.hash
    return state


def put_sealed(store, body: dict, session: str = "long") -> None:
    """Store a snapshot as this code writes one (sealed): a spoiled row that passes the seal, so
    the checks after the seal are what is tested."""
    store.put_derived(session, SNAPSHOT_KIND, 0, sealed({k: v for k, v in body.items() if k != "seal"}, session, SNAPSHOT_KIND, "0"))


def test_a_reopened_session_starts_from_its_snapshot_and_equals_the_full_fold(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    writer = ContextEditor("ecommerce", url)
    writer.ingest("long", turns(2 * SNAPSHOT_EVERY + 37))
    snap = writer.store.derived("long", SNAPSHOT_KIND)[0]
    assert snap["message_index"] == 2 * SNAPSHOT_EVERY - 1
    reopened = ContextEditor("ecommerce", url)
    assert reopened.state("long") == full_fold(reopened, "long") == writer.state("long")
    # ... and goes on from there exactly as the writer would have.
    more = turns(2 * SNAPSHOT_EVERY + 40)[-3:]
    reopened.ingest("long", more)
    writer.ingest("other", turns(2 * SNAPSHOT_EVERY + 40))
    assert reopened.state("long").to_json()["fields"] == writer.state("other").to_json()["fields"]


def test_a_snapshot_of_another_log_is_ignored(tmp_path, caplog):
    url = f"sqlite:///{tmp_path / 's.db'}"
    writer = ContextEditor("ecommerce", url)
    writer.ingest("long", turns(SNAPSHOT_EVERY + 5))
    snap = writer.store.derived("long", SNAPSHOT_KIND)[0]
    forged = {**snap, "fields": {}, "last_hash": "0" * 64}
    put_sealed(writer.store, forged)
    reopened = ContextEditor("ecommerce", url)
    assert reopened.state("long") == full_fold(reopened, "long")
    assert reopened.state("long").fields
    assert "[CE509]" in caplog.text and "not in this log" in caplog.text


def test_a_snapshot_that_does_not_parse_is_logged_and_the_log_folded(tmp_path, caplog):
    url = f"sqlite:///{tmp_path / 's.db'}"
    writer = ContextEditor("ecommerce", url)
    writer.ingest("long", turns(SNAPSHOT_EVERY + 5))
    snap = writer.store.derived("long", SNAPSHOT_KIND)[0]
    caplog.set_level("INFO")
    for spoiled in ({**snap, "fields": {"color": {"value": "red"}}}, {"v": 2}, {**snap, "alerts": 7}):
        put_sealed(writer.store, spoiled)
        caplog.clear()
        reopened = ContextEditor("ecommerce", url)
        assert reopened.state("long") == full_fold(reopened, "long") == writer.state("long")
        assert "[CE509]" in caplog.text and "snapshot" in caplog.text


@pytest.mark.parametrize("older", ["unsealed", "v3"])
def test_a_snapshot_stored_by_an_older_version_is_refused_once_and_stored_again(tmp_path, caplog, older):
    """A snapshot row without a seal, or of an older format (v3: history entries as rows), as an
    earlier version wrote it, is not read: the reopen folds the log (logged at INFO, once) and
    stores the snapshot of that fold, sealed, in this format; the next reopen starts from it."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    writer = ContextEditor("ecommerce", url)
    writer.ingest("long", turns(SNAPSHOT_EVERY + 5))
    old = {k: v for k, v in writer.store.derived("long", SNAPSHOT_KIND)[0].items() if k != "seal"}
    if older == "unsealed":
        writer.store.put_derived("long", SNAPSHOT_KIND, 0, old)
    else:
        put_sealed(writer.store, {**old, "v": 3})
    caplog.set_level("INFO")
    reopened = ContextEditor("ecommerce", url)
    assert reopened.state("long") == full_fold(reopened, "long") == writer.state("long")
    refused = [r for r in caplog.records if "[CE509]" in r.message]
    assert len(refused) == 1 and refused[0].levelname == "INFO"
    assert ("no seal" if older == "unsealed" else "another format (3, not 4)") in refused[0].message
    body, _ = unsealed(reopened.store.raw_derived("long", SNAPSHOT_KIND)[0], "long", SNAPSHOT_KIND, "0")
    assert body is not None and body["message_index"] == SNAPSHOT_EVERY + 4, "stored again, sealed, at the fold's end"
    assert body["v"] == SNAPSHOT_FORMAT
    caplog.clear()
    again = ContextEditor("ecommerce", url)
    assert again.state("long") == full_fold(again, "long") and "[CE509]" not in caplog.text


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                     max_leaves=12)


@given(st.dictionaries(st.text(max_size=8).filter(lambda k: k != "seal"), _JSON, min_size=1, max_size=4),
       st.integers(min_value=0), st.characters())
def test_a_sealed_row_opens_as_written_and_not_once_a_character_of_it_changed(body, at, char):
    """`sealed`/`unsealed` over a row's stored text (`derived_text`): any JSON body opens to itself
    for its owner, and to nothing once any one character of the text is another."""
    text = derived_text(sealed(body, "s", "k", "0"))
    assert unsealed(text.encode(), "s", "k", "0") == (body, "")
    i = at % len(text)
    if text[i] != char:
        assert unsealed((text[:i] + char + text[i + 1:]).encode("utf-8", "surrogatepass"), "s", "k", "0")[0] is None


@given(st.dictionaries(st.text(max_size=8).filter(lambda k: k != "seal"), _JSON, max_size=4), st.binary(max_size=4))
def test_a_sealed_body_brings_the_text_json_dumps_writes_for_it(body, key):
    """`sealed` writes the row's text once (the seal is a digest of all but its last bytes): it is
    the text json.dumps makes of the sealed dict, for any body (the empty one too), and the
    sealed dict cannot be changed under it."""
    row = sealed(body, "s", "k", "0", key=key)
    assert derived_text(row) == json.dumps(dict(row), ensure_ascii=False)
    assert derived_text(dict(row)) == derived_text(row)
    with pytest.raises(TypeError):
        row["x"] = 1
    with pytest.raises(TypeError):
        row.update(x=1)


_PROVENANCES = st.none() | st.builds(
    Provenance, message_index=st.integers(0, 2**40), round=st.integers(0, 10**5), role=st.sampled_from(["user", "tool"]),
    span=st.tuples(st.integers(0, 99), st.integers(0, 99)), text=st.text(max_size=6), extractor=st.sampled_from(["rule:a", "llm"]),
    confidence=st.floats(0, 1), domain_version=st.sampled_from(["v1", "v2"]), message_id=st.none() | st.text(max_size=4))
_ENTRIES = st.builds(HistoryEntry, value=st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6)
                     | st.lists(st.integers(), max_size=2), round=st.integers(0, 10**5), status=st.sampled_from(["accepted", "rejected", "cleared"]),
                     source=st.sampled_from(["user", "tool"]), reason=st.none() | st.text(max_size=4), provenance=_PROVENANCES)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), st.lists(_ENTRIES, max_size=8), max_size=3), st.none() | st.integers(1, 3))
def test_a_snapshot_reads_back_as_the_state_it_was_taken_of(histories, cap):
    """`State.snapshot` (history entries column by column, compact-form spans read only when
    needed) read back through JSON is the state it was taken of, and snapshots alike again."""
    import json
    state = State("d", "v1", "s")
    for name, entries in histories.items():
        last = entries[-1] if entries else None
        state.fields[name] = FieldState(last and last.value, last and last.provenance, history=list(entries))
    state.capped(cap)
    text = json.dumps(state.snapshot(), ensure_ascii=False)
    back = State.from_snapshot(json.loads(text))
    assert json.dumps(back.snapshot(), ensure_ascii=False) == text, "spans not read are stored again as they were"
    assert back == state and [fs.earlier and fs.earlier.spans for fs in back.fields.values()] == [
        fs.earlier and fs.earlier.spans for fs in state.fields.values()]


@given(st.lists(st.integers(min_value=-2**40, max_value=2**40)))
def test_packed_integers_read_back_as_written(values):
    stored = pack_ints(values)
    assert unpack_ints(stored).tolist() == values
    assert isinstance(stored, str) == all(-2**31 <= v < 2**31 for v in values)  # a list when one does not fit


@given(st.lists(st.integers(min_value=-2**31, max_value=2**31 - 1)),
       st.tuples(*[st.integers(min_value=-2**40, max_value=2**40)] * 3))
def test_a_read_back_array_extends_with_any_integers(values, more):
    """Packed integers read back 32-bit (`unpack_ints`); extending them with ones that do not fit
    widens the array first, never leaving it half extended."""
    grown = extended(unpack_ints(pack_ints(values)), more)
    assert grown.tolist() == [*values, *more]


@pytest.mark.parametrize("spoiled", ["x", "AAAAAAA=", 7, ["a"]])
def test_packed_integers_that_do_not_parse_raise(spoiled):
    with pytest.raises((TypeError, ValueError)):
        unpack_ints(spoiled)


_TEXT = st.text(max_size=12)
_MESSAGES = st.builds(
    Message, session=_TEXT, index=st.integers(0, 10**6), round=st.integers(0, 10**5),
    role=st.sampled_from(["user", "assistant", "tool", "system"]), content=st.text(max_size=30),
    timestamp=st.none() | _TEXT, id=st.none() | _TEXT, name=st.none() | _TEXT, tool_call_id=st.none() | _TEXT,
    tool_calls=st.lists(st.dictionaries(_TEXT, _TEXT, max_size=2), max_size=2).map(tuple),
    asks=st.lists(_TEXT, max_size=2).map(tuple), domains=st.lists(_TEXT, max_size=2).map(tuple))


@given(_MESSAGES, st.booleans(), st.booleans())
def test_a_stored_message_reads_back_as_written(message, erasable, erased):
    """`Message.from_stored` (built straight from the stored body, one pass) gives the message that
    was sealed: erasable (text in its payload row), erased (text gone, commitment kept) or written
    before erasure existed (text in the body)."""
    import json
    if not erasable:  # a message stored before schema 8: no salt, the text in its body
        plain = Message(**{**message.to_dict(), "tool_calls": message.tool_calls, "asks": message.asks,
                           "domains": message.domains, "hash": "h"})
        assert Message.from_stored(json.loads(plain.body_text()), "h", None) == plain
        return
    sealed = message.sealed("p" * 64, salt="s" * 32)
    body = json.loads(sealed.body_text())
    if not erased:
        assert Message.from_stored(body, sealed.hash, (sealed.salt, sealed.payload())) == sealed
        return
    gone = Message.from_stored(body, sealed.hash, None)
    assert gone.erased and gone.content == ERASED and gone.tool_calls == () and gone.salt is None
    assert gone.commitment == body["commitment"] and gone.hash == sealed.hash and gone.asks == sealed.asks
    assert gone.body_text() == sealed.body_text()  # its hash still checks


@given(st.builds(SummaryLine, text=_TEXT, round=st.integers(0, 10**6), index=st.integers(0, 10**7),
                 role=st.sampled_from(["user", "assistant", "tool"]), kind=st.sampled_from(["fact", "value", "note"]),
                 start=st.integers(-1, 10**4), spans=st.lists(st.tuples(st.integers(0, 99), st.integers(0, 99)), max_size=3).map(tuple),
                 cued=st.booleans(), domains=st.lists(_TEXT, max_size=2).map(tuple)))
def test_a_stored_summary_line_reads_back_as_written(line):
    """`SummaryLine.from_dict` (its fields set in one step, not through the frozen __init__) gives
    the line that was stored, equal and hashing alike; a span that is not a pair does not parse."""
    import json
    back = SummaryLine.from_dict(json.loads(json.dumps(line.to_dict())))
    assert back == line and hash(back) == hash(line) and repr(back) == repr(line)
    with pytest.raises(ValueError):
        SummaryLine.from_dict({**line.to_dict(), "v": [[1, 2, 3]]})


def test_every_message_field_is_read_from_a_dict_and_a_key_of_no_field_is_refused():
    """`Message._made` names each field once (from_dict and from_stored go through it): a field
    added to Message and left out there reads back as its default here; a stored body with a
    key no field has (a newer version's, or altered) is refused with [CE500], not read without it."""
    import dataclasses
    import json
    from context_editor.errors import StoreError
    given_values = {f.name: (("x",) if f.name in ("tool_calls", "asks", "domains") else 7 if f.type == "int" else f"v-{f.name}")
                    for f in dataclasses.fields(Message) if f.init}
    given_values["tool_calls"] = ({"name": "x"},)
    made = Message.from_dict({k: list(v) if isinstance(v, tuple) else v for k, v in given_values.items()})
    assert {name: getattr(made, name) for name in given_values} == given_values
    body = json.loads(Message("s", 0, 0, "user", "hi", prev_hash="p" * 64).body_text())
    with pytest.raises(StoreError, match=r"CE500.*has keys no message field has: mood"):
        Message.from_stored({**body, "mood": "sunny"}, "h", None)
    with pytest.raises(StoreError, match="CE500"):
        Message.from_dict({**body, "mood": "sunny"})


def test_a_process_cycling_through_100_000_sessions_stays_under_its_memory_ceiling(tmp_path):
    """cache_sessions=20 is the configured (small) ceiling. Once the bounded caches are warm
    (3,000 sessions, every fifth rendered), 100,000 more sessions (every 50th given a message,
    every 500th rendered; the others read) add less than 2 MiB in all: about 20 bytes a
    session, the sawtooth of the renderer's bounded memos (inject/render.py MEMO,
    inject/compact.py ZONE_MEMO, inject/tokens.py SEGMENT_CACHE), not a per-session cost."""
    editor = ContextEditor("ecommerce", f"sqlite:///{tmp_path / 'many.db'}", cache_sessions=20)
    message = turns(1)[0]

    def visit(i: int, render_every: int) -> None:
        session = f"s-{i}"
        if i % 50 == 0:
            editor.add(session, message)
            assert editor.state(session).get("color") == "black"
        else:
            editor.state(session)
        if i % render_every == 0:
            editor.render(session, "place_order")

    for i in range(3000):
        visit(i, 5)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(3000, 103_000):
            visit(i, 500)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 2 * 1024 * 1024, f"{grown / 1024:.0f} KiB more after 100,000 sessions"
    held = [editor._states, editor._bound, editor._zones, editor._tails, editor._rendered, editor._priors, editor._indexed]
    assert all(len(cache) <= 21 for cache in held), [len(c) for c in held]
