"""The settled past of a long session's summary zone, kept per action as derived data.

Most of a long session's summary lines lie in its settled past: stages that every action's
window has left, rolled up into the session summary (`inject.compact`). A render scores them
once and keeps the result in memory; a process that reopens the session would read every
stage and score every line again. So the past a render used is also stored, one row per
action (`KIND`, key: the action's position in the domain), under a fingerprint of all it was
computed from: the domain version, the action, the stage bounds, the present values, what is
hidden and the provenance of the past's messages (`compact.past_fingerprint`). A reopened
session loads only its latest stages (`SummaryZone.from_bodies(latest=True)`) and goes on from
the stored past when the fingerprint matches what its state gives now; otherwise (no row, a row
of another version or state, a row that does not parse) it reads the whole zone and scores it
from the log, as before, and stores the past again. Erasure drops the rows with every other
kind of derived data, and `rebuild_memory` drops them.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..domain import ActionSpec, Domain
from ..inject import compact
from ..inject.compact import STAGE_ROUNDS, stage_of
from .summary import SummaryZone

KIND = "summary_past"
MIN_LINES = 256  # a shorter past is read and scored from the log faster than a row is written


def key_of(domain: Domain, action: str) -> int:
    return list(domain.actions).index(action)


def window_from(spec: ActionSpec, round_: int) -> int:
    """The first round of the action's loaded window (as the renderer counts it)."""
    return max(compact.window_start(round_, spec.recent_rounds, spec.history_rounds), 0)


def first_stage(domain: Domain, round_: int) -> int | None:
    """The first stage a session at `round_` must load for any action's render to go on from a
    stored past (the one before the earliest past's end, which holds the bounds), or None when
    some action has no settled past yet (then the whole zone is small enough to read)."""
    befores = [compact.past_before(window_from(spec, round_)) for spec in domain.actions.values()]
    if not befores or min(befores) <= STAGE_ROUNDS:
        return None
    return stage_of(min(befores)) - 1


def fingerprint(domain: Domain, action: str, zone: SummaryZone, before: int, reads: Iterable[int],
                absorbed: compact.Absorbed, hidden: Any) -> str | None:
    """The fingerprint of the past that ends before round `before`, whose lines of messages
    `reads` were scored, in this state view (None when the zone does not hold that stage's bounds)."""
    stage = zone.stages.get(stage_of(before))
    if stage is None:
        return None
    count, last_index = stage.before
    return compact.past_fingerprint(absorbed, hidden, reads, f"{domain.version_hash}/{action}/{before}/{count}/{last_index}")
