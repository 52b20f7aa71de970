"""The summary zone's open stage, stored with its lines so far (derived data).

The zone is stored per stage as stages complete (`memory.summary`); the open one, still filling,
used to be made again from the log by every process that reopened the session: each of its
messages cut into sentences and scanned for values (≈ 80 µs a message, a stage holds ~20). So a
live render also stores the open stage (`KIND`, one row per session) once it has folded `LAG`
messages more than the row holds; a reopen takes it and folds only the messages after it.

The row is checked before it is used, like the stored past (`memory.past`):
- it is sealed (`store.base.sealed`: a digest of its stored text, the session, kind and key): a
  row altered in the store (its lines would reach a context) is refused before it is parsed;
- it was written by this format and domain version;
- its anchor is its last message (index and hash): a row whose message is not in this log (the
  log cut back or rewritten) is refused;
- it must follow the stored stages (stage number and `before`): a row of a stage that has closed
  since is stale.
A refused row is logged (`Errors.DERIVED_UNUSED`) and the stage made again from the log, as before.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from ..domain import Domain
from ..inject.compact import SummaryLine
from ..model import Message
from .summary import Stage, SummaryZone

KIND = "summary_open"
LAG = 4  # messages folded beyond the stored row before a render stores it again (a reopen makes at most LAG - 1)
FORMAT = 2  # bump when what a row holds changes: stored ones are then refused once and written again


def row(domain: Domain, stage: Stage, last: Message) -> dict[str, Any]:
    """The stored form of the open stage whose last message is `last` (stored sealed)."""
    return {"format": FORMAT, "version": domain.version_hash, "stage": stage.number, "before": list(stage.before),
            "last_index": stage.last_index, "at": [last.index, last.hash], "lines": [line.to_dict() for line in stage.lines]}


def resume(domain: Domain, content: dict[str, Any], zone: SummaryZone, messages: Sequence[Message]) -> tuple[Stage | None, str, int]:
    """Take the stored open stage (its row, its seal checked) into `zone` (loaded from its stored
    stages, not yet folded on) if the row holds: `messages` are the session's since
    `zone.resume_round()`, which hold its anchor. Returns the stage, or None, why the row was
    refused and how loud to log it (INFO: stale in the normal course of things; WARNING: not a
    row of this log as written)."""
    try:
        if content.get("format") != FORMAT or content.get("version") != domain.version_hash:
            return None, "it was written by another version", logging.INFO
        index, hash_ = content["at"]
        stage = Stage(int(content["stage"]), [SummaryLine.from_dict(d) for d in content["lines"]], int(content["last_index"]),
                      (int(content["before"][0]), int(content["before"][1])))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return None, f"it does not parse ({type(exc).__name__}: {exc})", logging.WARNING
    if zone.stages and stage.number <= max(zone.stages):
        return None, "its stage has closed since", logging.INFO
    if index != stage.last_index or not any(m.index == index and m.hash == hash_ for m in reversed(messages)):
        return None, "its last message is not in this log", logging.WARNING
    if not zone.resume(stage):
        return None, "it does not follow the stored stages (they lag the log)", logging.INFO
    return stage, "", logging.INFO
