"""Golden conversations: load them, run them through a ContextEditor, score the final state.

Each `<dir>/<domain>/<id>.jsonl` (the project's are in tests/golden) starts with a header line `{"golden": {...}}` holding
the id, language, a description and `expect` — the complete final state a careful human reads
from the dialogue (a field not listed must stay unset). `xfail` names fields the extractor is
known to get wrong, each with the reason; the test requires those to still differ, so fixing
one means updating its file. The other lines are the messages, in order, with timestamps
(relative dates resolve against them).

Shared by tests/test_golden_domains.py (correctness) and benchmarks/extraction_eval.py
(per-field precision and recall), so both read the same files the same way: as data, from the
directory they name (never by putting the tests on sys.path).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from context_editor import ContextEditor

@dataclass(frozen=True)
class Golden:
    id: str
    domain: str
    lang: str
    description: str
    expect: dict[str, Any]
    xfail: dict[str, str]
    messages: list[dict[str, Any]] = field(repr=False)
    path: Path = field(repr=False)


def load(path: Path) -> Golden:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    head = lines[0]["golden"]
    return Golden(head["id"], head["domain"], head["lang"], head.get("description", ""), head["expect"],
                  head.get("xfail") or {}, lines[1:], path)


def all_goldens(directory: Path, domain: str | None = None) -> list[Golden]:
    """Every golden conversation under `directory` (`<domain>/<id>.jsonl`), or one domain's."""
    pattern = f"{domain}/*.jsonl" if domain else "*/*.jsonl"
    return [load(p) for p in sorted(directory.glob(pattern))]


def final_state(g: Golden, editor: ContextEditor | None = None) -> dict[str, Any]:
    """Field -> value after the whole conversation (only fields with a value)."""
    editor = editor or ContextEditor(g.domain, "memory://")
    return editor.ingest(g.id, g.messages).values()


@dataclass
class Counts:
    tp: int = 0
    fp: int = 0
    fn: int = 0

    def add(self, gold: Any, predicted: Any) -> None:
        if predicted is not None and predicted == gold:
            self.tp += 1
            return
        self.fp += predicted is not None
        self.fn += gold is not None

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None
