"""The generic rule families as building blocks: every example in rules/examples.yaml is run
through a one-field domain that lists the rule, and must give exactly the documented value."""

from __future__ import annotations

import pytest

from context_editor import ContextEditor
from context_editor.domain import domain_from_source
from context_editor.domain.packdoc import examples

DATA = examples()
CASES = [(ref, spec["type"], case) for ref, spec in DATA["examples"].items() for case in spec["cases"]]


@pytest.mark.parametrize("ref,ftype,case", CASES, ids=[f"{r}:{c['text']}" for r, _, c in CASES])
def test_rule_example(ref, ftype, case):
    doc = {"domain": "example", "version": 1, "languages": ["zh", "en"],
           "fields": {"f": {"type": ftype, "extract": [ref]}}, "actions": {"a": {"fields": ["f"]}}}
    editor = ContextEditor(domain_from_source(doc), "memory://")
    state = editor.ingest("s", [{"role": "user", "content": case["text"], "timestamp": DATA["now"]}])
    assert state.get("f") == case["value"]
    assert state.fields["f"].provenance.extractor.startswith(f"rule:{ref}.")


def test_every_generic_family_has_examples_in_both_languages():
    langs: dict[str, set[str]] = {}
    for ref, _, case in CASES:
        zh = any("\u4e00" <= ch <= "\u9fff" for ch in case["text"])
        langs.setdefault(ref.split(".")[0], set()).add("zh" if zh else "en")
    for family in ("money", "date", "count", "place", "duration", "percent"):
        assert langs.get(family) == {"zh", "en"}, family
