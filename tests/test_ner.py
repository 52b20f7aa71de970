"""The NER layer: real spaCy model, loaded lazily, provenance with extractor id and confidence."""

from __future__ import annotations

import subprocess
import sys

from context_editor import ContextEditor, load_domain

DOMAIN = """\
domain: trip
version: 1
fields:
  destination:
    type: text
    extract: [ner.GPE]
  traveller:
    type: text
    extract: [ner.PERSON]
actions:
  plan: {fields: [destination, traveller]}
"""


def test_ner_fills_fields_with_provenance(tmp_path):
    path = tmp_path / "trip.yaml"
    path.write_text(DOMAIN, encoding="utf-8")
    editor = ContextEditor(load_domain(path), "memory://")
    text = "Book a trip to Paris for John Smith"
    state = editor.ingest("s", [{"role": "user", "content": text, "timestamp": "2024-05-01T10:00:00"}])
    assert state.get("destination") == "Paris" and state.get("traveller") == "John Smith"
    p = state.fields["destination"].provenance
    assert p.extractor == "ner:en_core_web_sm:GPE" and 0 < p.confidence < 0.95
    assert text[p.span[0]:p.span[1]] == "Paris"


def test_unknown_entity_label_is_a_lint_error(tmp_path):
    from context_editor.domain import lint_domain

    path = tmp_path / "trip.yaml"
    path.write_text(DOMAIN.replace("ner.PERSON", "ner.HUMAN"), encoding="utf-8")
    problems = lint_domain(path)[1]
    assert [p.line for p in problems] == [9] and "ner.HUMAN" in problems[0].message


def test_domains_without_ner_never_load_spacy():
    code = ("import sys; from context_editor import ContextEditor; e = ContextEditor('ecommerce', 'memory://');"
            "e.ingest('s', [{'role': 'user', 'content': 'I want to buy headphones in Paris'}], now='2024-05-01T10:00:00');"
            "print('spacy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
