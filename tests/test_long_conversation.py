"""Issue 5's headline: at round 200 the book_flight context still holds the round-1 constraints,
in under 10% of the full history's tokens, where a last-10-rounds window has lost them."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from context_editor import ContextEditor
from context_editor.inject.tokens import count_tokens

from long_conversation import long_travel_conversation


def transcript(messages: list[dict]) -> str:
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages)


def test_round_200_context_keeps_early_constraints_in_under_10_percent():
    conv = long_travel_conversation(200)
    editor = ContextEditor("travel", "memory://")
    state = editor.ingest("trip", conv)
    assert state.round == 200

    ctx = editor.render("trip", "book_flight")
    root = ET.fromstring(ctx.xml)
    fields = {f.get("name"): (f.text, f.get("round")) for f in root.find("state")}
    assert fields["flight_exclusions"] == ("red_eye", "1")
    assert fields["budget_max"] == ("5000 CNY", "2")
    assert fields["destination"][0] == "三亚"

    full = count_tokens(transcript(conv))
    assert ctx.tokens < 0.10 * full, (ctx.tokens, full)
    assert 0 < ctx.compaction_ratio < 1  # also smaller than the raw window it was built from

    user_rounds = [i for i, m in enumerate(conv) if m["role"] == "user"]
    window = transcript(conv[user_rounds[-10]:])
    assert "红眼" not in window and "5000" not in window and "预算" not in window
