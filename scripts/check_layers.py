#!/usr/bin/env python3
"""Check the package's imports against the layer order of DESIGN §4.1; exit 1 on any violation.

    python scripts/check_layers.py            # prints every offending import as file:line

An import may only point down the list below (or within its own layer). The stages never import
each other: extract does not know inject, and so on. Imports inside functions count too: a lazy
import is still a dependency. Two more rules the layers alone do not say: the main CLI does not
import the benchmark package (its `import`/`bench` commands are loaded only when invoked), and a
module under context_editor/ never puts the tests on sys.path.
"""

from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "context_editor"

# Lowest first. The key is the first part of the module path below context_editor.
LAYERS: list[tuple[str, set[str]]] = [
    ("base", {"model", "errors", "lang", "resources", "registry", "expressions", "echo", "conversation", "adapters", "signing"}),
    ("domain", {"domain"}),
    ("stages", {"extract", "transform", "validate", "inject"}),
    ("memory", {"memory", "llm"}),
    ("store", {"store"}),
    ("pipeline", {"pipeline"}),
    ("faces", {"__init__", "__main__", "cli", "service", "audit", "bench", "importers", "train", "backfill", "domaintest", "forgetting"}),
]
ISOLATED = {"extract", "transform", "validate", "inject"}  # layers whose parts must not import each other
FORBIDDEN = {("cli", "bench"), ("cli", "importers")}  # (importer, imported) pairs refused beyond the layers


@dataclass(frozen=True)
class Violation:
    file: Path
    line: int
    importer: str
    imported: str
    why: str

    def __str__(self) -> str:
        return f"{os.path.relpath(self.file)}:{self.line}: {self.importer} imports {self.imported}: {self.why}"


def part_of(module: str) -> str | None:
    """`context_editor.extract.numbers` -> 'extract'; None outside the package."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def layer_of(part: str) -> int | None:
    return next((i for i, (_, parts) in enumerate(LAYERS) if part in parts), None)


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in the file, relative ones resolved."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from . import audit` imports the module context_editor.audit
            found += [(node.lineno, f"{target}.{alias.name}" if not node.module else target) for alias in node.names]
    return found


def check_file(path: Path, root: Path) -> list[Violation]:
    importer = part_of(module_name(path, root))
    assert importer is not None
    mine = layer_of(importer)
    out = []
    if mine is None:
        return [Violation(path, 1, importer, "-", "this part of the package has no layer in scripts/check_layers.py")]
    for line, target in imports(path, root):
        imported = part_of(target)
        if imported is None or imported == importer:
            continue
        theirs = layer_of(imported)
        if theirs is None:
            out.append(Violation(path, line, importer, imported, "unknown part of the package (add it to LAYERS)"))
        elif theirs > mine:
            out.append(Violation(path, line, importer, imported,
                                 f"layer '{LAYERS[mine][0]}' may not import the higher layer '{LAYERS[theirs][0]}'"))
        elif importer in ISOLATED and imported in ISOLATED:
            out.append(Violation(path, line, importer, imported, "stages do not import each other"))
        elif (importer, imported) in FORBIDDEN:
            out.append(Violation(path, line, importer, imported, "refused (see the docstring of scripts/check_layers.py)"))
    return out + golden_on_path(path)


def golden_on_path(path: Path) -> list[Violation]:
    """A `sys.path` change that names tests/golden (package code or a benchmark script)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, (ast.Call, ast.Assign)) and "sys.path" in ast.unparse(node) and "golden" in ast.unparse(node):
            out.append(Violation(path, node.lineno, path.stem, "tests/golden",
                                 "read golden files as data (context_editor.bench.golden), never from sys.path"))
    return out


def violations(root: Path = ROOT) -> list[Violation]:
    """Every violation in the package and the benchmark scripts below `root`."""
    package = [v for path in sorted((root / PACKAGE).rglob("*.py")) for v in check_file(path, root)]
    scripts = [v for path in sorted((root / "benchmarks").glob("*.py")) for v in golden_on_path(path)]
    return package + scripts


def main() -> int:
    found = violations()
    for v in found:
        print(v)
    print(f"{len(found)} layer violation(s)" if found else "layers ok", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
