"""Field history capped in memory, the full history in the store (issue 15, "Memory").

A cached state holds each field's newest `history_cap` entries; what the renderer reads of the
older ones (accepted provenance spans, every entry's spans and values for hiding out-of-scope and
`pii:` values) stays in compact form (`FieldState.earlier`). A capped state renders the same
bytes and commits the same edits as an uncapped one, also after reopening from a snapshot, and
`why` / `history_state` (the CLI's `state`) still give the full history, read from the log."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from context_editor import ContextEditor
from context_editor.domain import load_domain
from conftest import seeded_salts

GOLDEN = Path(__file__).parent / "golden"
TS = "2024-05-01T10:00:00+08:00"


def golden_messages(domain: str) -> list[dict]:
    out = []
    for path in sorted((GOLDEN / domain).glob("*.yaml")):
        doc = yaml.safe_load(path.read_text("utf-8"))
        out += [{k: v for k, v in m.items() if k in ("role", "content", "name")} for m in doc["messages"]]
    return out


def same_everywhere(capped: ContextEditor, full: ContextEditor, session: str) -> None:
    assert [e.hash for e in capped.store.edits(session)] == [e.hash for e in full.store.edits(session)]
    for action in full.domain.actions:
        assert capped.render(session, action).xml == full.render(session, action).xml, action
    for name in full.domain.fields:
        assert capped.why(session, name)["history"] == full.why(session, name)["history"], name
    assert capped.history_state(session).to_json() == full.state(session).to_json()


@pytest.mark.parametrize("domain", ["ecommerce", "finance", "travel"])
def test_a_capped_state_renders_and_commits_what_a_full_one_does(domain, tmp_path):
    pool = golden_messages(domain)
    messages = [pool[i % len(pool)] for i in range(300)]  # past a snapshot (every 256 messages)
    full = ContextEditor(domain, f"sqlite:///{tmp_path}/full.db", history_cap=None, salts=seeded_salts(domain))
    capped = ContextEditor(domain, f"sqlite:///{tmp_path}/capped.db", history_cap=2, salts=seeded_salts(domain))
    for i, m in enumerate(messages):
        capped.add("s", m, now=TS)
        full.add("s", m, now=TS)
        if i % 60 == 59:
            same_everywhere(capped, full, "s")
    state = capped.state("s")
    assert all(len(fs.history) <= 2 for fs in state.fields.values())
    assert any(fs.earlier is not None and fs.earlier.dropped > 10 for fs in state.fields.values())
    assert sum(fs.entries for fs in state.fields.values()) == sum(len(fs.history) for fs in full.state("s").fields.values())
    # Reopened (from the snapshot the capped editor wrote, plus the edits after it), capped or not.
    for cap in (2, None):
        reopened = ContextEditor(domain, f"sqlite:///{tmp_path}/capped.db", history_cap=cap)
        same_everywhere(reopened, full, "s")


CARD = """\
domain: pay
version: 1
fields:
  order_id: {type: text, extract: [ids.order], sources: [user, tool]}
  card_number: {type: text, sources: [user, tool], scopes: [payment]}
  member_id: {type: text, sources: [user, tool], pii: hash}
actions:
  pay: {fields: [order_id, card_number], scope: payment, recent_rounds: 2, history_rounds: 2}
  track: {fields: [order_id], scope: tracking, recent_rounds: 2, history_rounds: 2}
"""


def test_an_out_of_scope_value_dropped_from_memory_stays_hidden(tmp_path):
    """The first card number and member id leave the capped history long before the render: they
    are still masked in the summary zone's lines of their messages and wherever they are repeated."""
    path = tmp_path / "pay.yaml"
    path.write_text(CARD, encoding="utf-8")
    domain = load_domain(path)
    cards = [f"41111111111{i:05d}" for i in range(12)]
    turns = []
    for i, card in enumerate(cards):
        turns += [{"role": "tool", "content": f'{{"card_number": "{card}", "member_id": "VIP-{7000 + i}"}}', "timestamp": TS},
                  {"role": "user", "content": f"订单ORDER-2024-{i:03d}，卡号{card}，会员VIP-{7000 + i}，预算{100 + i}元",
                   "timestamp": TS},
                  {"role": "assistant", "content": f"好的，订单ORDER-2024-{i:03d}已记录，稍后为您处理。", "timestamp": TS}]
    turns.append({"role": "user", "content": f"上次那张卡{cards[0]}和会员VIP-7000还能用吗？", "timestamp": TS})
    capped = ContextEditor(domain, "memory://", history_cap=1)
    full = ContextEditor(domain, "memory://", history_cap=None)
    capped.ingest("s", turns)
    full.ingest("s", turns)
    assert capped.state("s").fields["card_number"].earlier is not None
    track = capped.render("s", "track").xml
    assert track == full.render("s", "track").xml
    assert cards[0] not in track and "VIP-7000" not in track and "[card_number hidden]" in track
    assert capped.render("s", "pay").xml == full.render("s", "pay").xml
    assert len(capped.why("s", "card_number")["history"]) == len(full.state("s").fields["card_number"].history) >= 12


@pytest.mark.parametrize("cap", [1, 3])
def test_the_spans_a_capped_state_holds_in_compact_form_read_as_the_full_states(tmp_path, cap):
    """`compact.covered_spans` of a capped state (live, or reopened from a snapshot) makes its
    compact-form spans into the mapping only when a read needs them; every read of it answers as
    the fully held state's does (a message's spans as a set: their order is not kept)."""
    from context_editor.inject import compact
    from context_editor.model import State

    url = f"sqlite:///{tmp_path}/s.db"
    editor = ContextEditor("ecommerce", url, history_cap=cap)
    messages = golden_messages("ecommerce")
    editor.ingest("s", [{**m, "timestamp": TS} for m in messages])
    capped = editor.state("s")
    assert any(fs.earlier is not None and fs.earlier.accepted for fs in capped.fields.values()), "entries in compact form"
    full = State.fold(editor.domain.name, editor.domain.version_hash, "s", editor.store.edits("s"))
    expected = {i: sorted(v) for i, v in compact.covered_spans(full)[0].items()}
    snapshot = State.from_snapshot(capped.snapshot())
    for state in (capped, snapshot):
        compact._folds.clear()
        first, texts = compact.covered_spans(state)
        again, _ = compact.covered_spans(state)  # a second read of the same state: the fold is shared
        assert texts == compact.covered_spans(full)[1]
        for got in (first, again):
            assert got._floor >= 0 and got._fold is not None
            for index in range(-1, len(messages) + 2):  # reads one by one, before the whole mapping is made
                assert sorted(got.get(index, ())) == expected.get(index, []), index
                assert (index in got) == (index in expected)
            assert {i: sorted(v) for i, v in got.items()} == expected and len(got) == len(expected)
            assert sorted(got) == sorted(expected) and {i: sorted(got[i]) for i in got.keys()} == expected
