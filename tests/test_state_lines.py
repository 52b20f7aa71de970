"""`state_lines: true` on an action (issue 10, context size): each state field is one text line
"name: value (rN source)" inside <state>, not a <field> element — the same value, round and
source, escaped like every other text, in fewer tokens — and the protected-field guard and the
echo guard read it as they read elements."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from context_editor import ContextEditor, add_together, render_together
from context_editor.echo import mask_echoes
from context_editor.inject.render import lost_fields
from context_editor.inject.tokens import count_tokens

DOMAINS = Path(__file__).parent / "domains"
TALK = {"en": [("A table for 4 at Sino in Boston at 7pm, <b>& fast</b>.", ["restaurant"]), ("And a room at the Hilton.", ["hotel"])],
        "zh": [("我想在上海找家餐厅，订鼎泰丰，晚上7点。", ["restaurant"]), ("再订一间如家。", ["hotel"])]}


def editors(tmp_path: Path, lines: bool) -> list[tuple[ContextEditor, str]]:
    out = []
    for name in ("restaurant", "hotel"):
        text = (DOMAINS / f"{name}.yaml").read_text("utf-8")
        if lines:
            text = text.replace("    required: []\n", "    required: []\n    state_lines: true\n")
        (tmp_path / f"{name}.yaml").write_text(text, "utf-8")
    for name in ("restaurant", "hotel"):
        out.append((ContextEditor(tmp_path / f"{name}.yaml", "memory://"), "c"))
    return out


@pytest.mark.parametrize("language", ["en", "zh"])
def test_state_lines_hold_every_value_with_its_round_and_source_in_fewer_tokens(tmp_path, language):
    (tmp_path / "lines").mkdir()
    (tmp_path / "elements").mkdir()
    compact, plain = editors(tmp_path / "lines", True), editors(tmp_path / "elements", False)
    for text, domains in TALK[language]:
        for parts in (compact, plain):
            add_together(parts, {"role": "user", "content": text, "domains": domains, "timestamp": "2024-05-01T19:00:00"})
    for render in (lambda parts: render_together(parts, "track"), lambda parts: parts[0][0].render("c", "track")):
        small, big = render(compact), render(plain)
        assert small.tokens == count_tokens(small.xml) < big.tokens
        root, full = ET.fromstring(small.xml), ET.fromstring(big.xml)
        assert not list(root.iter("field")) and root.find("missing") is None and root.find("alerts") is None
        assert not small.alerts  # no protected field was taken for lost
        for group, elements in zip(root.iter("state"), full.iter("state")):
            lines = [line.strip() for line in (group.text or "").strip().splitlines()]
            expected = [f"{f.get('name')}: {f.text} (r{f.get('round')} {f.get('source')})" for f in elements.iter("field")]
            assert lines == expected and expected
    hotel = render_together(compact, "track").xml
    assert "city: " + ("Boston" if language == "en" else "上海") + " (r2 carry)" in hotel  # a carry says so
    if language == "en":
        assert "&lt;b&gt;&amp; fast&lt;/b&gt;" in render_together(compact, "track").xml  # the turn, escaped


def test_the_guards_read_state_lines(tmp_path):
    xml = ('<context action="track" domain="restaurant hotel" round="1" tokens="1" budget="9">\n'
           '  <state domain="restaurant">\n    city: Boston &amp; Co (r1 initial)\n    time: 19:00 (r1 answer)\n  </state>\n'
           '  <state domain="hotel">\n    name: Hilton (r2 initial)\n  </state>\n</context>')
    assert lost_fields(xml, {"restaurant.city": "Boston & Co", "hotel.name": "Hilton", "restaurant.time": "19:00"}) == []
    assert lost_fields(xml, {"hotel.city": "Boston & Co", "restaurant.time": "19:30"}) == ["hotel.city", "restaurant.time"]
    assert lost_fields(xml.replace("(r1 answer)", "(answer)"), {"restaurant.time": "19:00"}) == ["restaurant.time"]
    # A quoted state block is masked before extraction, like one of elements.
    pasted = "As you said: <state>\n    city: Boston (r1 initial)\n  </state> thanks"
    masked, loop = mask_echoes(pasted)
    assert "Boston" not in masked and masked.startswith("As you said:") and not loop
