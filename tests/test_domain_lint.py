"""Domain loading and lint: every mistake named with its line and a fix."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from context_editor.domain import lint_domain, load_domain
from context_editor.domain.model import DOMAINS_DIR, SCHEMA_PATH


def lint_text(tmp_path: Path, text: str):
    p = tmp_path / "d.yaml"
    p.write_text(text, encoding="utf-8")
    return lint_domain(p)[1]


BASE = "domain: shop\nversion: 1\nfields:\n  color:\n    type: enum\n    values: {red: [红色]}\nactions:\n  buy: {fields: [color]}\n"


def test_minimal_domain_loads(tmp_path):
    assert lint_text(tmp_path, BASE) == []


@pytest.mark.parametrize("text,line,needle", [
    (BASE.replace("version: 1\n", "version: 1\nversion: 2\n"), 3, "duplicate key 'version'"),
    (BASE.replace("    type: enum", "    type: enum\n    colour_map: x"), 6, "unknown key 'colour_map'"),
    (BASE.replace("type: enum", "type: colour"), 5, "'colour', which is not an allowed value"),
    (BASE + "machine:\n  states: [a]\n  transitions:\n    - {trigger: go, source: a, dest: b}\n", 12, "unknown dest state 'b'"),
    (BASE + "rules:\n  - {id: r, check: 'color ==', code: X}\n", 10, "invalid expression"),
    (BASE + "rules:\n  - {id: r, check: 'colr == 1', code: X}\n", 10, "unknown name 'colr'"),
    (BASE.replace("values: {red: [红色]}", "values: {red: [红色]\n"), 6, "YAML syntax error"),
    ("- just\n- a list\n", 1, "must be a YAML mapping"),
])
def test_lint_names_line_and_fix(tmp_path, text, line, needle):
    problems = lint_text(tmp_path, text)
    assert problems, "expected a problem"
    hit = [p for p in problems if needle in p.message]
    assert hit, [p.message for p in problems]
    assert hit[0].line == line and hit[0].fix


def test_bundled_domains_validate_against_the_published_schema():
    schema = json.loads(SCHEMA_PATH.read_text("utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    for path in DOMAINS_DIR.glob("*.yaml"):
        jsonschema.validate(yaml.safe_load(path.read_text("utf-8")), schema)
        assert lint_domain(path)[1] == []
        load_domain(path)


def test_version_hash_changes_with_content(tmp_path):
    a = tmp_path / "a.yaml"
    a.write_text(BASE, encoding="utf-8")
    b = tmp_path / "b.yaml"
    b.write_text(BASE.replace("红色", "红的"), encoding="utf-8")
    assert load_domain(a).version_hash != load_domain(b).version_hash
    assert load_domain(a).version_hash == load_domain(a).version_hash
