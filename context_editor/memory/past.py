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
from the log, as before, and stores the past again (a row not used is logged, `Errors.DERIVED_UNUSED`).
The fingerprint's big input, the spans of every message the past read, is stored with it as a
digest, with the edit the state had reached (`at`): a reopened session whose edits since then
gave no span to those messages takes the digest as stored (spans are only ever added), so the
check costs O(edits since the row was written), not O(messages read). Erasure drops the rows with every other
kind of derived data, and `rebuild_memory` drops them.
"""

from __future__ import annotations

from array import array
from typing import Any, Iterable, Sequence

from ..domain import ActionSpec, Domain
from ..model import Edit, State, unpack_ints
from ..inject import compact
from ..inject.compact import STAGE_ROUNDS, stage_of
from .summary import SummaryZone

KIND = "summary_past"
MIN_LINES = 256  # a shorter past is read and scored from the log faster than a row is written
ANCHOR_EDITS = 1024  # a row's spans are checked edit by edit when it is at most this many edits old


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
                absorbed: compact.Absorbed, hidden: Any, spans: str | None = None) -> str | None:
    """The fingerprint of the past that ends before round `before`, whose lines of messages
    `reads` were scored, in this state view (None when the zone does not hold that stage's bounds).
    `spans`: the digest of the read messages' spans (`compact.past_spans`) when already known."""
    stage = zone.stages.get(stage_of(before))
    if stage is None:
        return None
    count, last_index = stage.before
    return compact.past_fingerprint(absorbed, hidden, compact.past_spans(absorbed, hidden, reads) if spans is None else spans,
                                    f"{domain.version_hash}/{action}/{before}/{count}/{last_index}")


def row(state: State, fingerprint: str, spans: str, kept: Any) -> dict[str, Any]:
    """The stored form of a settled past: its fingerprint, the digest of its read messages' spans
    and the edit the state had reached when they were taken (`at`: seq and hash, its anchor)."""
    return {"fingerprint": fingerprint, "spans": spans, "at": [state.last_seq, state.last_hash], **compact.past_body(kept)}


def anchor(body: dict[str, Any]) -> tuple[int, str] | None:
    """The edit (seq, hash) a stored past's spans were taken at, if the row names one."""
    at = body.get("at")
    if isinstance(at, list) and len(at) == 2 and isinstance(at[0], int) and at[0] >= 0 and isinstance(at[1], str) \
            and isinstance(body.get("spans"), str):
        return at[0], at[1]
    return None


def reads_of(body: dict[str, Any]) -> array[int] | None:
    """The messages whose lines a stored past scored, if its row says so in a form this code writes."""
    try:
        return unpack_ints(body.get("reads"))  # type: ignore[arg-type]  # anything else raises
    except (TypeError, ValueError, OverflowError):
        return None


def kept_spans(body: dict[str, Any], reads: Sequence[int], since: list[Edit]) -> str | None:
    """The stored digest of the spans a past read, when it still holds for a state whose edits
    from the row's anchor on are `since`: the anchor is in this log (its seq and hash), and no
    edit after it gave a span to a message up to the last one the past read (spans are only ever
    added, so the read messages' spans are what they were). None: compute it again."""
    at = anchor(body)
    if at is None or not since or (since[0].seq, since[0].hash) != at or not reads:
        return None
    last = max(reads)
    if any(e.provenance is not None and e.provenance.message_index <= last for e in since[1:]):
        return None
    return str(body["spans"])
