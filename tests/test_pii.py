"""Personal data in rendered contexts (issue 12): checksum-backed detectors in Chinese and
English, and masking everywhere a message's text reaches the model unless the action shows a
field holding that very value."""

from __future__ import annotations

import pytest

from context_editor import ContextEditor, load_domain
from context_editor.inject import pii

TS = "2024-05-01T10:00:00+08:00"


@pytest.mark.parametrize("text,kind,value", [
    ("我的邮箱是 zhang.san+shop@example.com.cn 谢谢", "e-mail", "zhang.san+shop@example.com.cn"),
    ("card 4111 1111 1111 1111 please", "card number", "4111 1111 1111 1111"),
    ("卡号4111-1111-1111-1111", "card number", "4111-1111-1111-1111"),
    ("身份证号11010519491231002X", "resident id", "11010519491231002X"),
    ("手机13812345678，随时联系", "phone number", "13812345678"),
    ("call me at +86 138 1234 5678", "phone number", "+86 138 1234 5678"),
    ("phone +44 20 7946 0958", "phone number", "+44 20 7946 0958"),
    ("护照号码是E12345678", "passport number", "E12345678"),
    ("my passport number is K1234567.", "passport number", "K1234567"),
])
def test_detectors_find_personal_values(text, kind, value):
    found = [(text[s:e], k) for s, e, k in pii.detect(text)]
    assert (value, kind) in found


@pytest.mark.parametrize("text", [
    "order 4111 1111 1111 1112",  # fails Luhn
    "身份证号110105194912310021",  # wrong check character
    "身份证号110105194913310028",  # no 13th month
    "预算2000元，订单ORDER-2024-001",  # amounts and order ids are no personal data
    "the flight MU5101 leaves at 10:30",
])
def test_look_alikes_are_not_personal_values(text):
    assert pii.detect(text) == []


DOMAIN = """\
domain: pay
version: 1
fields:
  order_id: {type: text, extract: [ids.order]}
  card_number: {type: text, sources: [user, tool]}
actions:
  pay: {fields: [order_id, card_number], recent_rounds: 5}
  track: {fields: [order_id], recent_rounds: 5}
"""


def test_rendered_context_masks_personal_values_unless_the_action_shows_them(tmp_path):
    path = tmp_path / "pay.yaml"
    path.write_text(DOMAIN, encoding="utf-8")
    editor = ContextEditor(load_domain(path), "memory://")
    editor.ingest("s", [
        {"role": "user", "content": "订单ORDER-2024-001，我的邮箱 li@example.com，手机13812345678", "timestamp": TS},
        {"role": "tool", "content": '{"card_number": "4111111111111111", "status": "ok"}', "timestamp": TS},
        {"role": "user", "content": "身份证11010519491231002X", "timestamp": TS},
    ])
    assert editor.state("s").get("card_number") == "4111111111111111"
    track = editor.render("s", "track").xml
    for secret in ("li@example.com", "13812345678", "4111111111111111", "11010519491231002X"):
        assert secret not in track
    assert "[e-mail]" in track and "[phone number]" in track and "[resident id]" in track
    assert "ORDER-2024-001" in track
    pay = editor.render("s", "pay").xml
    assert "4111111111111111" in pay  # the action asks for the card number
    assert "li@example.com" not in pay and "11010519491231002X" not in pay


POLICY_DOMAIN = """\
domain: pay
version: 1
fields:
  order_id: {type: text, extract: [ids.order]}
  card_number: {type: text, sources: [user, tool], pii: mask}
  member_id: {type: text, sources: [user, tool], pii: hash}
  passport: {type: text, sources: [user, tool], pii: drop, critical: true}
actions:
  pay: {fields: [order_id, card_number, member_id, passport], recent_rounds: 5}
  track: {fields: [order_id], recent_rounds: 5}
"""


def test_a_fields_pii_policy_decides_how_every_context_shows_it(tmp_path):
    """`pii: mask|hash|drop`: the value is starred, pseudonymised or left out, in `<state>`, in tool
    JSON and in message text, for every action, including the one that shows the field; the state
    keeps the value (a tool that books needs it)."""
    path = tmp_path / "pay.yaml"
    path.write_text(POLICY_DOMAIN, encoding="utf-8")
    editor = ContextEditor(load_domain(path), "memory://")
    editor.ingest("s", [
        {"role": "user", "content": "订单ORDER-2024-001", "timestamp": TS},
        {"role": "tool", "content": '{"card_number": "4111111111111111", "member_id": "VIP-778899", '
                                    '"passport": "E12345678", "status": "ok"}', "timestamp": TS},
        {"role": "user", "content": "so VIP-778899 pays with 4111111111111111, passport E12345678", "timestamp": TS},
    ])
    state = editor.state("s")
    assert (state.get("card_number"), state.get("member_id"), state.get("passport")) == (
        "4111111111111111", "VIP-778899", "E12345678")
    pseudonym = pii.protect("hash", "VIP-778899", "member_id")
    assert pseudonym.startswith("sha256:") and len(pseudonym) == len("sha256:") + 12
    for action in ("pay", "track"):
        xml = editor.render("s", action).xml
        for secret in ("4111111111111111", "VIP-778899", "E12345678"):
            assert secret not in xml, (action, secret)
        assert "************1111" in xml and pseudonym in xml
    pay = editor.render("s", "pay").xml
    assert '<field name="card_number"' in pay and '<field name="member_id"' in pay
    assert '<field name="passport"' not in pay  # drop: never rendered, not even starred
    assert pii.protect("mask", "1234567", "x") == "*******"  # too short to keep an end


def test_lint_refuses_an_unknown_pii_policy(tmp_path):
    from context_editor.domain import lint_domain

    path = tmp_path / "pay.yaml"
    path.write_text(POLICY_DOMAIN.replace("pii: hash", "pii: encrypt"), encoding="utf-8")
    problems = lint_domain(path)[1]
    assert any("encrypt" in p.message or "pii" in p.message for p in problems), problems
    assert any(p.line == 6 for p in problems), [(p.line, p.message) for p in problems]
