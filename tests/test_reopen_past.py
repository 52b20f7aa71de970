"""A reopened long session renders what a process that never closed renders (issue 15).

The settled past of the summary zone is stored per action (derived data, `memory.past`), so a
reopened session reads only its latest summary stages. The context must be byte-identical to
the one the writer, which never closed, renders; on every store. A stored past that is stale
(another state, another version), corrupted or missing is not used: the zone is read and scored
from the log, and the past is stored again.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from context_editor import ContextEditor
from context_editor.audit import erase
from context_editor.inject import compact
from context_editor.memory import past
from context_editor.store import open_store

GOLDEN = Path(__file__).parent / "golden" / "ecommerce"
SESSION = "long"


def conversation(n: int) -> list[dict]:
    """n messages cycled from the ecommerce golden conversations (both languages, both roles)."""
    pool = [m for p in sorted(GOLDEN.glob("*.yaml")) for m in yaml.safe_load(p.read_text("utf-8"))["messages"]
            if m["role"] in ("user", "assistant")]
    return [{"role": pool[i % len(pool)]["role"], "content": pool[i % len(pool)]["content"],
             "timestamp": f"2024-05-{1 + i // 1440:02d}T{i // 60 % 24:02d}:{i % 60:02d}:00+08:00"} for i in range(n)]


@pytest.fixture
def small_past(monkeypatch):
    monkeypatch.setattr(past, "MIN_LINES", 8)  # a past worth storing after a few hundred messages


def contexts(editor: ContextEditor) -> dict[str, str]:
    return {action: editor.render(SESSION, action).xml for action in editor.domain.actions}


def reopen(store) -> ContextEditor:
    compact._scores.clear()  # a new process: nothing scored in memory
    compact._zone_memo.clear()
    return ContextEditor("ecommerce", store)


def store_of(url: str):
    """A URL names the same data for every editor, except memory://, which is per store object."""
    return open_store(url) if url == "memory://" else url


def test_a_reopened_session_renders_what_the_writer_renders(store_url, small_past):
    store = store_of(store_url)
    turns = conversation(420)
    writer = ContextEditor("ecommerce", store)
    writer.ingest(SESSION, turns[:400])
    expected = contexts(writer)
    assert writer.store.derived(SESSION, past.KIND), "the writer stored the settled past of its renders"

    reopened = reopen(store)
    assert contexts(reopened) == expected
    zone = reopened._zones[SESSION]
    assert zone.partial and len(zone.stages) < len(writer._zone(SESSION).stages) // 2, "only the latest stages were read"

    # Both go on with the same messages and still agree, message after message.
    for m in turns[400:]:
        writer.add(SESSION, m)
        reopened.add(SESSION, m)
        assert contexts(reopened) == contexts(writer)


def test_a_reopened_render_takes_the_stored_spans_digest_while_no_edit_touched_the_past(tmp_path, small_past, monkeypatch):
    url = f"sqlite:///{tmp_path / 's.db'}"
    turns = conversation(430)
    writer = ContextEditor("ecommerce", url)
    writer.ingest(SESSION, turns[:400])
    contexts(writer)
    writer.ingest(SESSION, turns[400:410])  # edits after the rows' anchor, none on a message the past read
    expected = contexts(writer)
    taken = []
    monkeypatch.setattr(compact, "past_spans", lambda *a, _f=compact.past_spans: taken.append(a) or _f(*a))
    reopened = reopen(url)
    assert contexts(reopened) == expected
    assert not taken, "the stored digest of the read messages' spans held: nothing O(history) taken again"


def test_the_stored_spans_digest_holds_only_for_its_own_log_and_untouched_reads(tmp_path, small_past):
    url = f"sqlite:///{tmp_path / 's.db'}"
    writer = ContextEditor("ecommerce", url)
    writer.ingest(SESSION, conversation(410))
    contexts(writer)
    for body in writer.store.derived(SESSION, past.KIND).values():
        seq, hash_ = past.anchor(body)
        since = writer.store.edits(SESSION, since_seq=seq - 1)
        reads = past.reads_of(body)
        assert (since[0].seq, since[0].hash) == (seq, hash_) and past.kept_spans(body, reads, since) == body["spans"]
        assert past.kept_spans(body, reads, [replace(since[0], hash="0" * 64), *since[1:]]) is None  # another log
        late = next(e for e in writer.store.edits(SESSION) if e.provenance is not None)
        touched = replace(late, seq=since[-1].seq + 1, provenance=replace(late.provenance, message_index=reads[0]))
        assert past.kept_spans(body, reads, [*since, touched]) is None  # a span given to a message the past read
        assert past.kept_spans({**body, "at": "x"}, reads, since) is None


@pytest.mark.parametrize("spoil", ["stale", "corrupt", "missing", "spans", "anchor"])
def test_a_spoiled_stored_past_falls_back_to_the_log(tmp_path, small_past, spoil, caplog):
    url = f"sqlite:///{tmp_path / 's.db'}"
    writer = ContextEditor("ecommerce", url)
    writer.ingest(SESSION, conversation(400))
    expected = contexts(writer)
    rows = writer.store.derived(SESSION, past.KIND)
    key, body = next(iter(rows.items()))
    if spoil == "stale":  # a past scored for another state: its groups say something else
        writer.store.put_derived(SESSION, past.KIND, key, {**body, "fingerprint": "0" * 32, "groups": []})
    elif spoil == "corrupt":
        writer.store.put_derived(SESSION, past.KIND, key, {**body, "groups": [["only", "two"]], "reads": "x"})
    elif spoil == "spans":  # a wrong digest of the read messages' spans: taken again, the row stored anew
        writer.store.put_derived(SESSION, past.KIND, key, {**body, "spans": "0" * 32})
    elif spoil == "anchor":  # an anchor of another log: the spans are taken again from this state
        writer.store.put_derived(SESSION, past.KIND, key, {**body, "at": [body["at"][0], "0" * 64]})
    else:
        writer.store.drop_derived(SESSION, past.KIND)

    reopened = reopen(url)
    assert contexts(reopened) == expected
    if spoil == "corrupt":
        assert "[CE509]" in caplog.text and "summary_past" in caplog.text
    # The spoiled row was rebuilt from the log: the same row the writer stored.
    assert reopened.store.derived(SESSION, past.KIND)[key] == body


def test_the_fingerprint_names_the_domain_version_and_the_state(tmp_path, small_past):
    url = f"sqlite:///{tmp_path / 's.db'}"
    writer = ContextEditor("ecommerce", url)
    writer.ingest(SESSION, conversation(400))
    contexts(writer)
    key, body = next(iter(writer.store.derived(SESSION, past.KIND).items()))
    action = list(writer.domain.actions)[key]
    zone, state = writer._zone(SESSION), writer.state(SESSION)
    vocabulary, hidden, absorbed, _ = writer.renderer.state_view(state, writer.domain.actions[action])
    args = (zone, body["before"], past.reads_of(body), absorbed, hidden)
    assert past.fingerprint(writer.domain, action, *args) == body["fingerprint"]
    assert past.fingerprint(replace(writer.domain, version_hash="another"), action, *args) != body["fingerprint"]
    provenance, texts = absorbed
    assert past.fingerprint(writer.domain, action, zone, body["before"], args[2], (provenance, [*texts, "new value"]),
                            hidden) != body["fingerprint"]


def test_erasure_drops_the_stored_past_and_no_row_brings_the_text_back(tmp_path, small_past):
    url = f"sqlite:///{tmp_path / 's.db'}"
    secret = {"role": "user", "content": "My loyalty card is ZX-99817, I prefer black headphones",
              "timestamp": "2024-04-30T09:00:00+08:00"}
    writer = ContextEditor("ecommerce", url)
    writer.ingest(SESSION, [secret, *conversation(400)])
    assert "ZX-99817" in str(writer.store.derived(SESSION, "summary"))
    contexts(writer)
    assert writer.store.derived(SESSION, past.KIND)
    erase(writer.store, [SESSION], actor="dpo", reason="request 1", messages=[0])
    assert not writer.store.derived(SESSION, past.KIND)
    reopened = reopen(url)
    assert all("ZX-99817" not in xml for xml in contexts(reopened).values())
    assert reopened.store.derived(SESSION, past.KIND), "stored again, from the log as erasure left it"
    for kind in ("summary", past.KIND):
        assert "ZX-99817" not in str(reopened.store.derived(SESSION, kind))
