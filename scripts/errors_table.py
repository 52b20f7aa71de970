#!/usr/bin/env python3
"""Write docs/errors.md, the table of every error code, from the catalog in context_editor/errors.py.

    python scripts/errors_table.py          # rewrite docs/errors.md
    python scripts/errors_table.py --check  # exit 1 if docs/errors.md is not current

tests/test_errors_catalog.py runs the check, so the table never drifts from the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from context_editor.errors import Errors  # noqa: E402

OUT = ROOT / "docs" / "errors.md"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table() -> str:
    lines = [
        "# Error codes",
        "",
        "Every error context-editor reports reads `[CE###] message` and, on the next line, `fix: …`;",
        "file and line come first when there is one. This table is generated from the catalog",
        "`Errors` in `context_editor/errors.py` by `python scripts/errors_table.py` (a test checks",
        "it is current). `{name}` marks a value filled in at the time; `{problem}` entries cover a",
        "family of checks, each of which says what it found and how to fix it.",
        "",
        "| code | name | message | fix |",
        "| --- | --- | --- | --- |",
    ]
    for name, entry in sorted(Errors.entries().items(), key=lambda item: (item[1].code, item[0])):
        lines.append(f"| {entry.code} | `{name}` | {_cell(entry.message)} | {_cell(entry.fix)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = table()
    if "--check" in argv:
        current = OUT.read_text("utf-8") if OUT.exists() else ""
        if current != text:
            print(f"{OUT.relative_to(ROOT)} is not current: run python scripts/errors_table.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, "utf-8")
    print(OUT.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
