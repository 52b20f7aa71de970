"""Several domains, one context (issue 10 item 3): `render_together` renders the domains of one
conversation as one envelope — state grouped by domain, each turn and summary line at most once,
one budget, one exact token count — and a value any domain's state holds is absorbed for all."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from context_editor import ContextEditor, render_together
from context_editor.errors import ContextEditorError, UnknownActionError
from context_editor.inject.compact import shown_lines
from context_editor.inject.render import lost_fields
from context_editor.inject.tokens import count_tokens

DOMAINS = Path(__file__).parent / "domains"
TS = "2024-05-01T19:00:00+00:00"
CONVERSATIONS = {
    "en": [("user", "I need a table for 4 at Sino in Boston at 7pm."),
           ("assistant", "Booked Sino for 4 at 19:00. Anything else?"),
           ("user", "Also a hotel room, the Hilton. My daughter is allergic to shellfish."),
           ("assistant", "The Hilton has rooms at $180. Shall I book it?"),
           ("user", "Yes please."),
           ("assistant", "Done. Your confirmation code is HX-4471."),
           ("user", "Thanks!")],
    "zh": [("user", "我想订鼎泰丰，晚上7点。"), ("assistant", "好的，鼎泰丰，19:00。还需要什么？"),
           ("user", "再订一间如家。我女儿对虾过敏。"), ("assistant", "如家每晚480元，要订吗？"),
           ("user", "好的。"), ("assistant", "已订好，确认号HX-4471。"), ("user", "谢谢！")],
}
ABSORBED_ELSEWHERE = {"en": "Booked Sino for 4 at 19:00.", "zh": "好的，鼎泰丰，19:00。"}


def conversation(language: str, rounds: int = 0) -> tuple[ContextEditor, ContextEditor]:
    restaurant = ContextEditor(DOMAINS / "restaurant.yaml", "memory://")
    hotel = ContextEditor(DOMAINS / "hotel.yaml", "memory://")
    talk = CONVERSATIONS[language] + [("user", f"Question {i} about the view.") if i % 2 == 0 else
                                      ("assistant", "It is lovely.") for i in range(2 * rounds)]
    for role, text in talk:
        for editor in (restaurant, hotel):  # the same messages in each domain's session
            editor.add("c", {"role": role, "content": text, "timestamp": TS})
    return restaurant, hotel


@pytest.mark.parametrize("language", ["en", "zh"])
def test_one_envelope_states_each_turn_once_grouped_by_domain(language):
    restaurant, hotel = conversation(language)
    singles = [e.render("c", "track") for e in (restaurant, hotel)]
    ctx = render_together([(restaurant, "c"), (hotel, "c")], "track")
    root = ET.fromstring(ctx.xml)
    assert root.tag == "context" and root.get("domain") == "restaurant hotel"
    assert int(root.get("tokens")) == ctx.tokens == count_tokens(ctx.xml) <= ctx.budget
    groups = {g.get("domain"): {f.get("name"): f.text for f in g.iter("field")} for g in root.findall("state")}
    assert groups["restaurant"]["name"] in {"Sino", "鼎泰丰"} and groups["hotel"]["name"] in {"Hilton", "如家"}
    assert set(ctx.fields) == {f"{d}.{n}" for d, fs in groups.items() for n in fs}
    # Each message at most once: as a turn, or as summary lines, never both, never twice.
    turns = Counter(t.text for t in root.iter("turn"))
    assert max(turns.values()) == 1
    lines = [line["text"] for line in shown_lines(root.find("summary"))]
    assert len(lines) == len(set(lines)) and not any(line in turn for line in lines for turn in turns)
    # One envelope costs less than the domains' contexts side by side.
    assert ctx.tokens < sum(c.tokens for c in singles)
    # A protected-field check understands the groups.
    assert not lost_fields(ctx.xml, {f"{d}.{n}": v for d, fs in groups.items() for n, v in fs.items()})


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_value_any_domain_holds_is_absorbed_for_all(language):
    """The hotel alone repeats the restaurant booking (its state does not hold it); in one
    envelope the restaurant's state holds it, so the sentence is not repeated."""
    restaurant, hotel = conversation(language, rounds=6)
    alone = ET.fromstring(hotel.render("c", "track").xml)
    together = ET.fromstring(render_together([(restaurant, "c"), (hotel, "c")], "track").xml)
    sentence = ABSORBED_ELSEWHERE[language]
    assert sentence in {line["text"] for line in shown_lines(alone.find("summary"))}
    assert sentence not in {line["text"] for line in shown_lines(together.find("summary"))}
    assert "HX-4471" in ET.tostring(together, encoding="unicode")  # an open value is still there


def test_one_budget_for_the_envelope():
    restaurant, hotel = conversation("en", rounds=30)
    full = render_together([(restaurant, "c"), (hotel, "c")], "track", budget=4000)
    tight = render_together([(restaurant, "c"), (hotel, "c")], "track", budget=full.tokens - 40)
    assert tight.tokens <= tight.budget < full.tokens and tight.dropped
    assert ET.fromstring(tight.xml).find("truncated_context") is not None


def test_bad_parts_are_refused_with_a_fix():
    restaurant, hotel = conversation("en")
    with pytest.raises(ContextEditorError, match="(?s)CE303.*fix"):
        render_together([], "track")
    with pytest.raises(ContextEditorError, match="(?s)CE304.*fix"):
        render_together([(restaurant, "c"), (restaurant, "c")], "track")
    with pytest.raises(UnknownActionError, match="CE300"):
        render_together([(restaurant, "c"), (hotel, "c")], "book")


def test_the_cli_renders_sessions_of_one_conversation_together(tmp_path, capsys):
    from context_editor.cli import main

    url = f"sqlite:///{tmp_path / 's.db'}"
    restaurant = ContextEditor(DOMAINS / "restaurant.yaml", url)
    hotel = ContextEditor(DOMAINS / "hotel.yaml", url)
    for role, text in CONVERSATIONS["en"]:  # a session holds one domain: one session per domain
        restaurant.add("c-restaurant", {"role": role, "content": text, "timestamp": TS})
        hotel.add("c-hotel", {"role": role, "content": text, "timestamp": TS})
    assert main(["render", "--store", url, "--session", "c-restaurant", "--with", "c-hotel", "--action", "track"]) == 0
    out = capsys.readouterr().out.strip()
    root = ET.fromstring(out)
    assert [g.get("domain") for g in root.findall("state")] == ["restaurant", "hotel"]
    assert int(root.get("tokens")) == count_tokens(out)
