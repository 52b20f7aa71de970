"""A cut that changes nothing but which items are given (in practice: entities) is made from the
full marked render's pieces, without a second template pass (`Renderer._without`): it must be
the very text a template pass gives, for the templates pinned in ITEM_LINE_TEMPLATES."""

from __future__ import annotations

from collections import Counter

import pytest

from context_editor import ContextEditor
from context_editor.domaintest import load_cases
from context_editor.errors import ContextEditorError
from context_editor.inject import render as R

from conftest import ROOT

GOLDEN = ROOT / "tests" / "golden"


def checked(monkeypatch: pytest.MonkeyPatch, seen: Counter[str]) -> None:
    """Every cut `_without` makes is compared with a template pass of the same cut."""
    without, fit = R.Renderer._without, R.Renderer._fit
    states = []

    def compared(self, plan, full, costs, kept, counter):
        got = without(self, plan, full, costs, kept, counter)
        if got is not None:
            built = self._build(plan, states[-1], kept, counter)
            assert (got.xml, got.tokens, got.dropped) == (built.xml, built.tokens, built.dropped)
        seen["made" if got is not None else "rendered"] += 1
        return got

    def remembered(self, plan, state):
        states.append(state)
        return fit(self, plan, state)

    monkeypatch.setattr(R.Renderer, "_without", compared)
    monkeypatch.setattr(R.Renderer, "_fit", remembered)


def test_a_cut_made_from_the_full_render_is_the_text_a_template_pass_gives(monkeypatch):
    seen: Counter[str] = Counter()
    checked(monkeypatch, seen)
    for domain in ("ecommerce", "finance", "travel"):
        for case in load_cases(GOLDEN / domain)[::3]:
            editor = ContextEditor(domain, "memory://")
            editor.ingest(case.id, case.messages)
            for action in editor.domain.actions:
                for budget in range(150, 700, 20):
                    try:
                        editor.render(case.id, action, budget=budget)
                    except ContextEditorError:
                        pass  # a budget below what the required part needs
    assert seen["made"] >= 20 and seen["rendered"], seen


def test_only_the_pinned_templates_are_cut_without_a_template_pass():
    """A domain's own default.xml.j2 (or any edit of the bundled one), and the minimal template,
    take a template pass for every cut."""
    from jinja2 import ChoiceLoader, DictLoader, Environment, FileSystemLoader

    pins = R.ITEM_LINE_TEMPLATES
    bundled = FileSystemLoader(str(R.TEMPLATES_DIR))
    env = Environment(loader=bundled)
    assert R._pinned_chain(env, "default.xml.j2", pins) and R._pinned_chain(env, "place_order.xml.j2", pins)
    assert not R._pinned_chain(env, "minimal.xml.j2", pins) and not R._pinned_chain(env, "multi.xml.j2", pins)
    source = bundled.get_source(env, "default.xml.j2")[0]
    own = Environment(loader=ChoiceLoader([DictLoader({"default.xml.j2": source.replace("<entities>", "<entities >")}), bundled]))
    assert not R._pinned_chain(own, "place_order.xml.j2", pins) and not R._pinned_chain(own, "default.xml.j2", pins)
