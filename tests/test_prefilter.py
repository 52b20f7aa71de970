"""The literal pre-filter gated by script (issue 15: packs gated by the message's language).

A message looks only for the cues of the scripts it holds; mixed Chinese/English text holds both.
Gating must change nothing: every candidate an unfiltered scan finds is still found."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given, settings, strategies as st

from context_editor.domain import load_domain
from context_editor.domain.regexcheck import required_literals
from context_editor.extract import Extractor
from context_editor.extract import prefilter
from context_editor.extract.prefilter import Present
from context_editor.model import Message

NOW = datetime(2024, 5, 1, 10, tzinfo=timezone.utc)
DOMAIN = load_domain("ecommerce")
EXTRACTOR = Extractor(DOMAIN)


def _fragments() -> list[str]:
    """Pieces real messages are made of: the domain's cues and synonyms in both languages, numbers, glue."""
    cues = {lit for rules in DOMAIN.field_rules.values() for r in rules for lit in required_literals(r.pattern) or ()}
    synonyms = {s.lstrip("!") for f in DOMAIN.fields.values() for c, ss in f.synonyms.items() for s in [c, *ss]}
    return sorted(cues | synonyms) + ["2000", "250", "$", "元", " ", "，", ", ", "不要", "not ", "我想买", "I want ", "。", "?"]


FRAGMENTS = _fragments()


def _message(text: str, role: str = "user") -> Message:
    return Message(session="s", index=1, round=1, role=role, content=text, timestamp=NOW.isoformat())


def _ungated(monkeypatch: pytest.MonkeyPatch, text: str, role: str) -> list:
    with monkeypatch.context() as m:
        m.setattr(Present, "could_match", lambda self, pattern: True)  # every rule and enum scanned
        return EXTRACTOR.extract(_message(text, role), NOW)


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=8), role=st.sampled_from(["user", "assistant"]))
def test_gated_extraction_finds_what_an_unfiltered_scan_finds(parts, role):
    text = "".join(parts)
    with pytest.MonkeyPatch.context() as mp:
        assert EXTRACTOR.extract(_message(text, role), NOW) == _ungated(mp, text, role)


def test_mixed_chinese_and_english_text_runs_both_languages_cues():
    found = {(c.field, str(c.value)) for c in EXTRACTOR.extract(_message("I want the 黑色 one, 预算2000以内"), NOW)}
    assert ("color", "black") in found and any(f == "budget_max" for f, _ in found)
    found = {(c.field, str(c.value)) for c in EXTRACTOR.extract(_message("我想要black的，budget under $250"), NOW)}
    assert ("color", "black") in found and any(f == "budget_max" for f, _ in found)


def test_a_message_without_a_script_skips_that_scripts_cues_without_a_lookup():
    english_only = [r for rules in DOMAIN.field_rules.values() for r in rules
                    if (lits := required_literals(r.pattern)) and all(any("a" <= ch <= "z" for ch in lit) for lit in lits)]
    assert english_only
    zh = Present("我想买蓝牙耳机，预算2000以内")
    assert zh.cjk and not zh.latin
    assert not any(zh.could_match(r.pattern) for r in english_only)
    assert zh._seen == {}  # not one substring search was spent on them
    mixed = Present("我想买AirPods")
    assert mixed.latin and mixed.cjk
    assert prefilter._groups.cache_info().currsize > 0
