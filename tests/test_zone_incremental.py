"""The summary zone scored incrementally (issue 15: a render right after a new message costs work
in proportion to the change) shows exactly what scoring every line afresh shows.

`zone_lines` keeps, per session and state view, each line's worth and the merged lines of the
settled past, and re-scores only new lines and those of messages given provenance since. Here
every call of a live session is checked against the plain algorithm (every line scored, every
line merged), in sessions long enough for the past to roll over many stage boundaries, with
values corrected, reverted and confirmed from offers (so the state view changes, and
provenance reaches back to older messages), in both languages and every bundled action."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from context_editor import ContextEditor
from context_editor.inject import compact
from context_editor.inject.compact import NOTE, REPLY_ROUNDS, VALUE, ZoneLine, stage_of
from context_editor.inject.history import words

GOLDEN = Path(__file__).parent / "golden"
_RANKS = (NOTE, VALUE, compact.FACT)


def reference(lines, window_from, vocabulary, absorbed, hidden, minimal=False) -> list[ZoneLine]:
    """The zone as scoring and merging every line afresh gives it (the algorithm before it was incremental)."""
    merged: dict[str, list[Any]] = {}
    for line in lines:
        rank = line.kind
        spans = compact.open_spans(line, absorbed, minimal) if rank != NOTE else ()
        if rank != NOTE and not (line.cued and line.spans and not minimal) and (
                not spans if line.spans else compact.is_covered(line, absorbed)):
            rank = NOTE
        overlap = len(words(line.text) & vocabulary) if rank == NOTE else 0
        text = compact.mask(line, hidden)
        spans = tuple(v for v in spans if v in text.lower())
        if rank == NOTE and overlap < 2:
            continue
        stage = -1 if line.round < window_from else stage_of(line.round)
        if stage == -1 and (rank == NOTE or (line.role != "user" and line.round < window_from - REPLY_ROUNDS)):
            continue
        entry = merged.get(text)
        if entry is None:
            merged[text] = [line.round, [line.index], rank, stage, line.role, spans]
        else:
            entry[1].append(line.index)
            if _RANKS.index(rank) > _RANKS.index(entry[2]):
                entry[2] = rank
            if line.role == "user":
                entry[4] = "user"
    said: set[str] = set()
    out = []
    for text, (rnd, src, rank, stage, role, spans) in sorted(merged.items(), key=lambda kv: -kv[1][1][-1]):
        if rank == VALUE and spans and said.issuperset(spans):
            continue
        said.update(spans)
        out.append(ZoneLine(text, rnd, tuple(src), rank, stage, role, spans))
    return sorted(out, key=lambda z: (z.round, z.sources))


def golden_messages(domain: str) -> list[dict[str, Any]]:
    out = []
    for path in sorted((GOLDEN / domain).glob("*.yaml")):
        doc = yaml.safe_load(path.read_text("utf-8"))
        out += [{k: v for k, v in m.items() if k in ("role", "content", "name")} for m in doc["messages"]]
    return out


@pytest.mark.parametrize("domain", ["ecommerce", "finance", "travel", "travel-minimal"])
def test_incremental_zone_equals_the_zone_scored_afresh(domain, monkeypatch, tmp_path):
    calls = {"n": 0, "past": 0, "minimal": 0}
    incremental = compact.zone_lines

    def checked(lines, window_from, vocabulary, absorbed, hidden, minimal=False, view=None):
        got = incremental(lines, window_from, vocabulary, absorbed, hidden, minimal=minimal, view=view)
        assert got == reference(lines, window_from, vocabulary, absorbed, hidden, minimal)
        calls["n"] += 1
        calls["minimal"] += minimal
        calls["past"] += any(s.past is not None and s.past.count for s in compact._scores.values())
        return got

    monkeypatch.setattr(compact, "zone_lines", checked)
    if domain.endswith("-minimal"):  # the same domain, every action minimal (inject/minimal.py)
        domain = domain.removesuffix("-minimal")
        text = (Path(__file__).parents[1] / "domains" / f"{domain}.yaml").read_text("utf-8")
        (tmp_path / f"{domain}.yaml").write_text(text.replace("    recent_rounds:", "    minimal: true\n    recent_rounds:"), "utf-8")
        editor = ContextEditor(tmp_path / f"{domain}.yaml", "memory://")
        assert all(a.minimal for a in editor.domain.actions.values())
    else:
        editor = ContextEditor(domain, "memory://")
    pool = golden_messages(domain)
    messages = [pool[i % len(pool)] for i in range(min(3 * len(pool), 300))]
    actions = list(editor.domain.actions)
    for i, m in enumerate(messages):
        editor.add("s", m)
        if i % 4 == 0 or i > len(messages) - 12:
            for action in actions:
                editor.render("s", action)
    # A render of an earlier round (another state object), then the live session again.
    editor.render("s", actions[0], as_of_round=editor.state("s").round // 2)
    editor.render("s", actions[0])
    assert editor.state("s").round > 60  # the past rolled over several stages
    assert calls["past"] > 0  # and was reused
    assert calls["minimal"] == (calls["n"] if editor.domain.actions[actions[0]].minimal else 0)


def test_provenance_given_later_to_an_older_message_rescores_its_lines():
    """A value accepted later from an older message (e.g. a backfill of the log) absorbs that
    message's line: its worth is scored again, not taken from before."""
    editor = ContextEditor("ecommerce", "memory://")
    pool = golden_messages("ecommerce")
    editor.ingest("s", pool[:160])
    state, action = editor.state("s"), "place_order"
    renderer = editor.renderer
    vocabulary, hidden, absorbed, _ = renderer.state_view(state, renderer.action(action))
    lines = editor._zone("s").lines(state.round)
    window_from = state.round - 12
    before = compact.zone_lines(lines, window_from, vocabulary, absorbed, hidden)
    assert before == reference(lines, window_from, vocabulary, absorbed, hidden)
    # An old user value line the zone shows: give its message a provenance span over the line.
    target = next(z for z in before if z.rank == VALUE and z.stage == -1 and len(z.sources) == 1)
    line = next(x for x in lines if x.index == target.sources[0] and x.start >= 0)
    provenance, texts = absorbed
    assert isinstance(provenance, compact.Provenances) and provenance.journal is not None
    provenance.journal.append(line.index)
    later = compact.Provenances({**provenance, line.index: (*provenance.get(line.index, ()),
                                                             (line.start, line.start + len(line.text)))},
                                provenance.journal, provenance.version + 1)
    after = compact.zone_lines(lines, window_from, vocabulary, (later, texts), hidden)
    assert after == reference(lines, window_from, vocabulary, (later, texts), hidden)
    assert target not in after
