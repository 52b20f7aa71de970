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
from context_editor.memory import open_stage, past, summary
from context_editor.store import open_store
from context_editor.store.base import sealed

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


def written(tmp_path, messages: list[dict]) -> tuple[str, ContextEditor]:
    """A SQLite store's URL, and the editor that wrote `messages` of SESSION to it."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    writer = ContextEditor("ecommerce", url)
    writer.ingest(SESSION, messages)
    return url, writer


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
    turns = conversation(430)
    url, writer = written(tmp_path, turns[:400])
    contexts(writer)
    writer.ingest(SESSION, turns[400:410])  # edits after the rows' anchor, none on a message the past read
    expected = contexts(writer)
    taken = []
    monkeypatch.setattr(compact, "past_spans", lambda *a, _f=compact.past_spans: taken.append(a) or _f(*a))
    reopened = reopen(url)
    assert contexts(reopened) == expected
    assert not taken, "the stored digest of the read messages' spans held: nothing O(history) taken again"


def test_a_reopen_checks_the_stored_pasts_with_the_edits_its_fold_read(tmp_path, small_past, monkeypatch):
    """The edits a reopen folds after the snapshot serve the stored pasts' anchor checks too
    (`_edits_from`): the store's own edits from any seq among them, and the log is read once."""
    turns = conversation(430)
    url, writer = written(tmp_path, turns[:400])
    contexts(writer)
    writer.ingest(SESSION, turns[400:410])
    expected = contexts(writer)
    reopened = reopen(url)
    read = []
    edits = reopened.store.edits
    monkeypatch.setattr(reopened.store, "edits", lambda *a, **k: read.append(a) or edits(*a, **k))
    assert contexts(reopened) == expected
    assert len(read) == 1, "the edits after the snapshot, read once"
    state = reopened.state(SESSION)
    first = reopened._replayed[2][0].seq
    assert first < state.last_seq
    for seq in range(first, state.last_seq + 1):
        assert reopened._edits_from(SESSION, state, seq) == edits(SESSION, since_seq=seq - 1)


def test_the_stored_spans_digest_holds_only_for_its_own_log_and_untouched_reads(tmp_path, small_past):
    url, writer = written(tmp_path, conversation(410))
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


@pytest.mark.parametrize("spoil", ["stale", "corrupt", "missing", "spans", "anchor", "altered"])
def test_a_spoiled_stored_past_falls_back_to_the_log(tmp_path, small_past, spoil, caplog):
    url, writer = written(tmp_path, conversation(400))
    expected = contexts(writer)
    rows = writer.store.derived(SESSION, past.KIND)
    key, body = next(iter(rows.items()))
    if spoil == "stale":  # a past scored for another state: its groups say something else
        put_sealed(writer, past.KIND, {**body, "fingerprint": "0" * 32, "groups": []}, key)
    elif spoil == "corrupt":
        put_sealed(writer, past.KIND, {**body, "groups": [["only", "two"]], "reads": "x"}, key)
    elif spoil == "spans":  # a wrong digest of the read messages' spans: taken again, the row stored anew
        put_sealed(writer, past.KIND, {**body, "spans": "0" * 32}, key)
    elif spoil == "anchor":  # an anchor of another log: the spans are taken again from this state
        put_sealed(writer, past.KIND, {**body, "at": [body["at"][0], "0" * 64]}, key)
    elif spoil == "altered":  # its groups changed in the store (its seal kept): not used, before it is parsed
        writer.store.put_derived(SESSION, past.KIND, key, {**body, "groups": body["groups"][1:]})
    else:
        writer.store.drop_derived(SESSION, past.KIND)

    reopened = reopen(url)
    assert contexts(reopened) == expected
    if spoil in ("corrupt", "altered"):
        assert "[CE509]" in caplog.text and "summary_past" in caplog.text
    if spoil == "altered":
        assert "its seal does not match" in caplog.text
    # The spoiled row was rebuilt from the log: the same row the writer stored.
    assert reopened.store.derived(SESSION, past.KIND)[key] == body


def test_the_fingerprint_names_the_domain_version_and_the_state(tmp_path, small_past):
    url, writer = written(tmp_path, conversation(400))
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
    secret = {"role": "user", "content": "My loyalty card is ZX-99817, I prefer black headphones",
              "timestamp": "2024-04-30T09:00:00+08:00"}
    url, writer = written(tmp_path, [secret, *conversation(400)])
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


# ---------------------------------------------------------------- the open stage (`memory.open_stage`)

def open_row(editor: ContextEditor) -> dict | None:
    return editor.store.derived(SESSION, open_stage.KIND).get(0)


def put_sealed(editor: ContextEditor, kind: str, body: dict, key: int = 0) -> None:
    """Store a derived row as this code writes one (sealed): a spoiled row that passes the seal,
    so the checks after the seal are what is tested."""
    editor.store.put_derived(SESSION, kind, key, sealed({k: v for k, v in body.items() if k != "seal"}, SESSION, kind, str(key)))


def folded(monkeypatch) -> list[int]:
    """The indices of the messages whose summary lines are made from now on."""
    made: list[int] = []
    monkeypatch.setattr(summary, "lines_of", lambda domain, m, _f=summary.lines_of: made.append(m.index) or _f(domain, m))
    return made


def test_a_reopen_takes_the_stored_open_stage_and_makes_only_the_lines_after_it(tmp_path, small_past, monkeypatch):
    turns = conversation(420)
    url, writer = written(tmp_path, turns[:400])
    expected = contexts(writer)  # a warm editor's contexts
    body = open_row(writer)
    stage = writer._zone(SESSION).stages[body["stage"]]
    assert body["stage"] == max(writer._zone(SESSION).stages) and body["last_index"] == stage.last_index == 399
    assert body["lines"] == [line.to_dict() for line in stage.lines] and body["at"][1] == writer.store.messages(SESSION)[-1].hash

    made = folded(monkeypatch)
    reopened = reopen(url)
    assert contexts(reopened) == expected and made == [], "no summary line made again"
    # It goes on as the writer does; it stores the open stage again only every LAG messages.
    puts = []
    monkeypatch.setattr(reopened.store, "put_derived", lambda s, kind, *a, _f=reopened.store.put_derived: (
        puts.append(kind) if kind == open_stage.KIND else None) or _f(s, kind, *a))
    for m in turns[400:400 + 2 * open_stage.LAG]:  # (one store: each reads what the other added)
        writer.add(SESSION, m) if m["role"] == "user" else reopened.add(SESSION, m)
        assert contexts(reopened) == contexts(writer)
    assert 1 <= puts.count(open_stage.KIND) <= 3 < 2 * open_stage.LAG  # (a stage may close on the way)
    # A reopen after messages no render stored makes only theirs; its zone is the log's.
    made.clear()
    writer.ingest(SESSION, turns[400 + 2 * open_stage.LAG:])
    expected = contexts(writer)
    after = open_row(writer)["last_index"]
    again = reopen(url)
    made.clear()
    assert contexts(again) == expected
    assert made == [], "the writer's renders stored the open stage"
    zone = again._zones[SESSION]
    whole = summary.SummaryZone.rebuild(writer.domain, writer.store.messages(SESSION))
    assert all(zone.stages[n].lines == whole.stages[n].lines for n in zone.stages)
    assert after == writer.store.messages(SESSION)[-1].index


def test_a_stage_a_reopen_took_open_is_stored_whole_once_it_closes(tmp_path, small_past):
    turns = conversation(460)
    url, writer = written(tmp_path, turns[:400])
    at = 400  # on to the last message of a stage: the next one (a user turn) begins the next stage
    while not (turns[at]["role"] == "user" and compact.stage_of(writer.state(SESSION).round + 1) > compact.stage_of(writer.state(SESSION).round)):
        writer.add(SESSION, turns[at])
        at += 1
    contexts(writer)
    taken = open_row(writer)["stage"]
    reopened = reopen(url)
    contexts(reopened)
    assert reopened._opens[SESSION][0] == taken
    reopened.ingest(SESSION, turns[at:])  # the only writer now: its first message closes the stage it took open
    whole = summary.SummaryZone.rebuild(reopened.domain, reopened.store.messages(SESSION))
    stored = reopened.store.derived(SESSION, summary.KIND)
    assert max(whole.stages) > taken + 1 and taken in stored
    assert {k: v for k, v in stored[taken].items() if k != "seal"} == whole.stages[taken].body()


def test_a_reopen_folds_the_messages_the_stored_open_stage_lacks(tmp_path, small_past, monkeypatch):
    turns = conversation(404)
    url, writer = written(tmp_path, turns[:400])
    contexts(writer)
    writer.ingest(SESSION, turns[400:])  # no render: the row lags by these
    made = folded(monkeypatch)
    reopened = reopen(url)
    got = contexts(reopened)
    assert made == [400, 401, 402, 403]
    assert got == contexts(writer)


@pytest.mark.parametrize("spoil", ["altered", "anchor", "closed", "version", "corrupt"])
def test_a_spoiled_stored_open_stage_is_logged_and_made_from_the_log(tmp_path, small_past, spoil, caplog, monkeypatch):
    turns = conversation(430)
    url, writer = written(tmp_path, turns[:400])
    contexts(writer)
    body = open_row(writer)
    line = body["lines"][0]
    if spoil == "altered":  # a line's text changed in the store: it must not reach a context
        put = {**body, "lines": [{**line, "t": "INJECTED-TEXT"}, *body["lines"][1:]]}
    elif spoil == "anchor":  # a well-formed row of another log (its last message is not this one)
        stage = writer._zone(SESSION).stages[body["stage"]]
        other = replace(writer.store.messages(SESSION)[-1], hash="0" * 64)
        put = open_stage.row(writer.domain, stage, other)
    elif spoil == "version":
        put = {**body, "version": "another"}
    elif spoil == "corrupt":
        put = {**body, "at": "x"}
    else:  # the stage closed since (no render stored the new open one): stale
        put = body
        for m in turns[400:]:
            writer.add(SESSION, m)
        assert max(writer._zone(SESSION).stages) > body["stage"]
    store = writer.store.put_derived if spoil in ("altered", "closed") else (lambda s, kind, key, b: put_sealed(writer, kind, b, key))
    store(SESSION, open_stage.KIND, 0, put)
    expected = contexts(ContextEditor("ecommerce", url))
    store(SESSION, open_stage.KIND, 0, put)  # (that render stored it again)

    caplog.set_level("INFO")
    made = folded(monkeypatch)
    reopened = reopen(url)
    assert contexts(reopened) == expected
    assert all("INJECTED-TEXT" not in xml for xml in contexts(reopened).values())
    assert made, "the open stage was made from the log"
    assert "[CE509]" in caplog.text and "summary_open" in caplog.text
    level = {r.message.split("]")[0]: r.levelname for r in caplog.records if "summary_open" in r.message}
    assert level == {"[CE509": "INFO" if spoil in ("closed", "version") else "WARNING"}
    assert open_row(reopened) != put, "stored again by the render"


def test_erasure_and_rebuild_drop_the_stored_open_stage(tmp_path, small_past):
    secret = {"role": "user", "content": "My loyalty card is ZX-99817", "timestamp": "2024-06-30T09:00:00+08:00"}
    url, writer = written(tmp_path, [*conversation(397), secret, *conversation(2)])
    contexts(writer)
    assert "ZX-99817" in str(open_row(writer))
    erase(writer.store, [SESSION], actor="dpo", reason="request 1", messages=[397])
    assert open_row(writer) is None
    reopened = reopen(url)
    assert all("ZX-99817" not in xml for xml in contexts(reopened).values())
    assert open_row(reopened) is not None and "ZX-99817" not in str(open_row(reopened))
    reopened.rebuild_memory(SESSION)
    assert open_row(reopened) is None


# ---------------------------------------------------------------- sealed rows (`store.base.sealed`)

def one_byte_changed(text: str, after: str) -> str:
    """`text` with the first ASCII digit after `after` changed to another digit: one byte, still JSON."""
    at = next(i for i in range(text.index(after) + len(after), len(text)) if text[i].isascii() and text[i].isdigit())
    return text[:at] + str((int(text[at]) + 1) % 10) + text[at + 1:]


@pytest.mark.parametrize("kind", ["snapshot", "stage"])
def test_a_derived_row_changed_by_one_byte_is_not_used_and_is_made_again_from_the_log(tmp_path, small_past, kind, caplog):
    """A snapshot or a completed summary stage altered in the store by one byte (the text still
    parses, so only the seal tells) is refused before it is parsed, logged, and made again from
    the log: the reopened contexts are byte for byte those of the untouched store, and the row is
    stored again, sealed (a stage: exactly as it was written)."""
    import sqlite3
    from context_editor.pipeline import SNAPSHOT_KIND
    from context_editor.store.base import unsealed

    url, writer = written(tmp_path, conversation(420))
    contexts(writer)  # (the writer's renders store the pasts and the open stage a reopen takes)
    expected = contexts(reopen(url))
    db = sqlite3.connect(tmp_path / "s.db")
    if kind == "snapshot":
        row_kind, key = SNAPSHOT_KIND, 0
    else:  # the last completed stage: a reopen reads it among its latest stages
        row_kind, key = summary.KIND, max(k for k in writer.store.derived(SESSION, summary.KIND))
        assert key < max(writer._zone(SESSION).stages), "a completed stage"
    (before,) = db.execute("SELECT body FROM derived WHERE session = ? AND kind = ? AND key = ?", (SESSION, row_kind, key)).fetchone()
    spoiled = one_byte_changed(before, '"accepted": {' if kind == "snapshot" else '"t": "')
    assert len(spoiled.encode()) == len(before.encode()) and sum(a != b for a, b in zip(spoiled, before)) == 1
    with db:
        db.execute("UPDATE derived SET body = ? WHERE session = ? AND kind = ? AND key = ?", (spoiled, SESSION, row_kind, key))

    caplog.set_level("INFO")
    reopened = reopen(url)
    assert contexts(reopened) == expected
    # Nothing of the spoiled row was taken: the state is the log's fold, the zone's stages the log's.
    assert reopened.state(SESSION) == writer.state(SESSION)
    whole = summary.SummaryZone.rebuild(writer.domain, writer.store.messages(SESSION))
    zone = reopened._zone(SESSION, latest=True)
    assert all(zone.stages[n].lines == whole.stages[n].lines for n in zone.stages)
    assert "[CE509]" in caplog.text and "its seal does not match" in caplog.text
    (after,) = db.execute("SELECT body FROM derived WHERE session = ? AND kind = ? AND key = ?", (SESSION, row_kind, key)).fetchone()
    assert after != spoiled and unsealed(after.encode(), SESSION, row_kind, str(key))[0] is not None, "stored again, sealed"
    if kind == "stage":
        assert after == before, "the stage made again from the log is the one written"
    caplog.clear()
    assert contexts(reopen(url)) == expected and "[CE509]" not in caplog.text, "the next reopen takes it"
