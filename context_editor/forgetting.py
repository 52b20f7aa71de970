"""The forgetting test (seed article 001): delete K random present fields N times and check that
the context asks for them again.

Which fields must be asked for: every field the action *requires* and every *critical* field
it shows. Those are the facts without which the action must not run, so the renderer puts each
one under <missing> with its question whenever the state lacks it; the test fails unless they
are asked for in 100% of the runs that deleted them. Optional fields are reported too, but a
missing optional field is normal (the user has not said it yet), and asking for every one of
them on every turn would drown the asks that matter, so they are not asked for.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

from .pipeline import ContextEditor


@dataclass(frozen=True)
class FieldResult:
    field: str
    must_ask: bool
    deleted: int
    asked: int

    @property
    def rate(self) -> float:
        return self.asked / self.deleted if self.deleted else 1.0


def forgetting_test(editor: ContextEditor, session: str, action: str, k: int = 3, runs: int = 100,
                    seed: int = 0) -> list[FieldResult]:
    """Per field of the action present in the session's state: how often it was deleted and asked for."""
    spec = editor.renderer.action(action)
    state = editor.state(session)
    messages = editor.store.messages(session)
    summary = editor._zone(session).lines(state.round - spec.recent_rounds)
    present = [n for n in spec.fields if state.get(n) is not None]
    must = {n for n in present if n in spec.required or editor.domain.fields[n].critical}
    deleted = {n: 0 for n in present}
    asked = {n: 0 for n in present}
    rng = random.Random(seed)
    for _ in range(runs if present else 0):
        chosen = rng.sample(present, min(k, len(present)))
        pruned = replace(state, fields={n: fs for n, fs in state.fields.items() if n not in chosen})
        ctx = editor.renderer.render(pruned, action, messages, budget=100_000, summary=summary)
        for n in chosen:
            deleted[n] += 1
            asked[n] += n in ctx.missing
    return [FieldResult(n, n in must, deleted[n], asked[n]) for n in present]


def report(results: list[FieldResult]) -> dict[str, Any]:
    return {"passed": all(r.rate == 1.0 for r in results if r.must_ask),
            "fields": [{"field": r.field, "must_ask": r.must_ask, "deleted": r.deleted, "asked": r.asked,
                        "rate": round(r.rate, 4)} for r in results]}
