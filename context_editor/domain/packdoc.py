"""The rule-pack reference (docs/rule-packs.md), generated from the bundled packs themselves.

    python -m context_editor.domain.packdoc > docs/rule-packs.md

A test regenerates it and compares, so the reference can never drift from the packs.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from typing import Any

from ..resources import rules_dir
from . import rulepacks
from .yamlines import load_lined_yaml

_INTRO = """\
# Bundled rule packs

Generated from the packs by `python -m context_editor.domain.packdoc > docs/rule-packs.md`
(a test checks it is current). A field's `extract` names a rule by its id, or a family by a
prefix: `money.budget` selects `money.budget.zh`, `money.budget.en` and every other
`money.budget.*` rule. Packs under `common/` have `language: any` and run on text in any
language. Your own rules go in a pack beside your domain file (`rule_packs: [./rules]`, see
docs/domain-format.md#your-own-rules) and are listed the same way by `context-editor lint`.
Rules whose family is `slot` are the dataset importers' generic slot rules. The examples come
from `rules/examples.yaml` (messages sent on Wednesday 2024-05-01).
"""


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _rows() -> list[tuple[str, str, str, str, str, str]]:
    """(family, id, language, parser, confidence, what it matches) for every bundled rule."""
    out = []
    root = rules_dir()
    for path in rulepacks._pack_files():
        data = load_lined_yaml(path.read_text("utf-8"), str(path)).data or {}
        lang = str(data.get("language", path.parent.name))
        for r in data.get("rules") or []:
            rid = str(r["id"])
            out.append((rid.split(".")[0], rid, lang, str(r.get("parse") or "by field type"),
                        str(r.get("confidence", 0.9)), f"{_cell(r.get('description', ''))} ({path.relative_to(root).as_posix()})"))
    return out


EXAMPLES_FILE = "examples.yaml"


def examples() -> dict[str, Any]:
    """`rules/examples.yaml`: per rule reference, a field type and (text, value) cases."""
    data = load_lined_yaml((rules_dir() / EXAMPLES_FILE).read_text("utf-8"), EXAMPLES_FILE).data
    return data if isinstance(data, dict) else {}


def _example_lines(family: str, shown: dict[str, Any]) -> list[str]:
    out = []
    for ref, spec in sorted(shown.items()):
        if ref.split(".")[0] != family:
            continue
        pairs = "; ".join(f"“{c['text']}” → `{json.dumps(c['value'], ensure_ascii=False)}`" for c in spec["cases"])
        out.append(f"- `{ref}` into a `{spec['type']}` field: {pairs}")
    return ["Examples (run by the tests):", "", *out, ""] if out else []


def reference() -> str:
    families: dict[str, list[tuple[str, str, str, str, str, str]]] = defaultdict(list)
    for row in _rows():
        families[row[0]].append(row)
    shown = examples().get("examples") or {}
    lines = [_INTRO]
    for family in sorted(families):
        lines.append(f"## `{family}`\n")
        lines.extend(_example_lines(family, shown))
        lines.append("| id | language | parser | confidence | matches (pack) |")
        lines.append("|---|---|---|---|---|")
        for _, rid, lang, parse, conf, what in families[family]:
            lines.append(f"| `{rid}` | {lang} | {parse} | {conf} | {what} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - the documented regeneration command
    sys.stdout.write(reference())
