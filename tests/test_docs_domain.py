"""The domain author's documentation is true: the tutorial runs as written, the rule-pack
reference is generated from the packs as they are, and every documented key is in the schema."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from context_editor.cli import main
from context_editor.domain.packdoc import reference
from conftest import ROOT

TUTORIAL = (ROOT / "docs" / "first-domain.md").read_text("utf-8")
BLOCK = re.compile(r"```(\w+)((?: \w+=\S+)*)\n(.*?)```", re.S)


def _matches(expected: str, output_lines: list[str]) -> bool:
    """An expected line matches an output line containing its pieces in order (… is a wildcard)."""
    pieces = [" ".join(p.split()) for p in expected.split("…") if p.strip()]
    for line in output_lines:
        text, at = " ".join(line.split()), 0
        for piece in pieces:
            at = text.find(piece, at)
            if at < 0:
                break
            at += len(piece)
        else:
            return True
    return False


def test_the_first_domain_tutorial_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    commands = 0
    for kind, options, body in BLOCK.findall(TUTORIAL):
        opts = dict(o.split("=", 1) for o in options.split())
        if "file" in opts:
            target = tmp_path / opts["file"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body, "utf-8")
        elif kind == "console":
            lines = body.splitlines()
            assert lines[0].startswith("$ context-editor "), lines[0]
            code = main(shlex.split(lines[0])[2:])
            captured = capsys.readouterr()
            out = (captured.out + captured.err).splitlines()
            assert code == int(opts.get("exit", 0)), f"{lines[0]} exited {code}:\n" + "\n".join(out)
            for expected in lines[1:]:
                assert _matches(expected, out), f"{lines[0]}: no line like {expected!r} in:\n" + "\n".join(out)
            commands += 1
    assert commands >= 4 and (tmp_path / "claims" / "rules" / "policy.yaml").exists()


def test_the_rule_pack_reference_is_current():
    current = (ROOT / "docs" / "rule-packs.md").read_text("utf-8")
    assert current == reference(), "regenerate: python -m context_editor.domain.packdoc > docs/rule-packs.md"


def _schema_keys() -> set[str]:
    schema = json.loads((ROOT / "context_editor" / "data" / "domain.schema.json").read_text("utf-8"))
    keys: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            keys.update((node.get("properties") or {}).keys())
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    return keys


@pytest.mark.parametrize("key", sorted(_schema_keys()))
def test_every_key_of_the_format_is_documented_with_an_example(key):
    doc = (ROOT / "docs" / "domain-format.md").read_text("utf-8")
    examples = "\n".join(re.findall(r"```yaml\n(.*?)```", doc, re.S))
    assert f"`{key}`" in doc or f"{key}:" in doc, f"`{key}` is not documented in docs/domain-format.md"
    assert re.search(rf"(?<![A-Za-z_]){re.escape(key)}:", examples), f"no YAML example in docs/domain-format.md uses `{key}:`"
