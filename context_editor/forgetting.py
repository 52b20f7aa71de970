"""The forgetting test (seed article 001): delete K random present fields N times and check that
the context asks for them again.

Which fields must be asked for: every field the action *requires* and every *critical* field
it shows (its own fields and the `shared` ones). Those are the facts without which the action
must not run, so the renderer puts each one under <missing> with its question whenever the state
lacks it; the test fails unless they are asked for in 100% of the runs that deleted them.
Optional fields are reported too, but a missing optional field is normal (the user has not said
it yet), and asking for every one of them on every turn would drown the asks that matter, so
they are not asked for.

"Asked for" is read from the rendered XML: a `<missing><field name=…>` element with the
field's question, in a context rendered at the action's own budget (a context that does not fit
asks for nothing). A must-ask field the session never had is checked in every run as well (it
is missing in all of them), and reported as `present: false`: the run says nothing about
forgetting it, only that its absence is asked about.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any
from xml.etree import ElementTree

from .errors import BudgetError
from .pipeline import ContextEditor


@dataclass(frozen=True)
class FieldResult:
    field: str
    must_ask: bool
    deleted: int  # runs in which the field was missing (deleted, or never present)
    asked: int
    present: bool = True

    @property
    def rate(self) -> float:
        return self.asked / self.deleted if self.deleted else 1.0


def forgetting_test(editor: ContextEditor, session: str, action: str, k: int = 3, runs: int = 100,
                    seed: int = 0) -> list[FieldResult]:
    """Per field of the action present in the session's state (and per must-ask field it lacks):
    how often it was missing and asked for."""
    spec = editor.renderer.action(action)
    state = editor.state(session)
    messages = editor.store.messages(session)
    summary = editor._zone(session).lines(state.round - spec.recent_rounds)
    names = list(dict.fromkeys([*spec.fields, *(n for n, f in editor.domain.fields.items() if f.shared)]))
    must = {n for n in names if n in spec.required or editor.domain.fields[n].critical}
    present = [n for n in names if state.get(n) is not None]
    absent = [n for n in names if n in must and state.get(n) is None]
    deleted = {n: 0 for n in present + absent}
    asked = {n: 0 for n in present + absent}
    rng = random.Random(seed)
    for _ in range(runs if present or absent else 0):
        chosen = rng.sample(present, min(k, len(present)))
        pruned = replace(state, fields={n: fs for n, fs in state.fields.items() if n not in chosen})
        questions = _asked(editor, pruned, action, messages, summary)
        for n in chosen + absent:
            deleted[n] += 1
            asked[n] += n in questions
    return [FieldResult(n, n in must, deleted[n], asked[n], n in present) for n in present + absent]


def _asked(editor: ContextEditor, state: Any, action: str, messages: list[Any], summary: list[Any]) -> set[str]:
    """The fields the context (at the action's budget) asks for: <missing><field name=…> with a question."""
    try:
        xml = editor.renderer.render(state, action, messages, summary=summary).xml
    except BudgetError:
        return set()
    node = ElementTree.fromstring(xml).find("missing")
    return {f.get("name", "") for f in (node if node is not None else []) if (f.text or "").strip()}


def report(results: list[FieldResult]) -> dict[str, Any]:
    return {"passed": all(r.rate == 1.0 for r in results if r.must_ask),
            "fields": [{"field": r.field, "must_ask": r.must_ask, "present": r.present, "deleted": r.deleted,
                        "asked": r.asked, "rate": round(r.rate, 4)} for r in results]}
