"""What a new domain version changes in one session: its stored state against a re-run, field by field.

Only final values count as a change (a session "ends in a different state"); the field's two
histories say where they part: the first round where they diverge, the reason recorded there,
and which extractor produced each side's value. Kinds, as a domain team reads them:
- newly_filled: the new version finds a value where the stored state has none;
- changed: both have a value and they differ;
- lost: the stored value is gone and nothing replaces it;
- newly_rejected: the stored value is rejected by the new version (a stricter validation).
"""

from __future__ import annotations

from typing import Any

from ..domain import Domain
from ..model import HistoryEntry, State, canonical_json

KINDS = ("newly_filled", "changed", "lost", "newly_rejected")
PHASE = "@phase"  # the state machine's phase, reported beside the fields (no field can be named so)


def _entry(h: HistoryEntry) -> tuple[str, int, str, str | None]:
    return canonical_json(h.value), h.round, h.status, h.reason


def _divergence(before: list[HistoryEntry], after: list[HistoryEntry]) -> tuple[HistoryEntry | None, HistoryEntry | None]:
    """The first entries where two histories of a field differ (None where one has ended)."""
    for i in range(max(len(before), len(after))):
        a = before[i] if i < len(before) else None
        b = after[i] if i < len(after) else None
        if a is None or b is None or _entry(a) != _entry(b):
            return a, b
    return None, None


def _side(h: HistoryEntry | None, key: str) -> Any:
    if h is None:
        return None
    if key == "extractor":
        return h.provenance.extractor if h.provenance else None
    return h.provenance.text if h.provenance else None


def session_changes(stored: State, new: State, domain: Domain) -> list[dict[str, Any]]:
    """One record per field whose final value differs, in the domain's field order (fields the
    new version no longer has come after it, sorted), then the phase."""
    records = []
    names = list(domain.fields) + sorted(set(stored.fields) - set(domain.fields))
    for name in names:
        before, after = stored.get(name), new.get(name)
        if canonical_json(before) == canonical_json(after):
            continue
        old_fs, new_fs = stored.fields.get(name), new.fields.get(name)
        rejected = {canonical_json(h.value) for h in (new_fs.history if new_fs else []) if h.status == "rejected"}
        if before is not None and canonical_json(before) in rejected:
            kind = "newly_rejected"
        else:
            kind = "newly_filled" if before is None else "lost" if after is None else "changed"
        a, b = _divergence(old_fs.history if old_fs else [], new_fs.history if new_fs else [])
        spec = domain.fields.get(name)
        records.append({
            "session": stored.session, "field": name, "kind": kind, "before": before, "after": after,
            "round": min(h.round for h in (a, b) if h is not None) if (a or b) else None,
            "reason": (b.reason if b else None) or (a.reason if a else None),
            "extractor": {"before": _side(a, "extractor"), "after": _side(b, "extractor")},
            "why": {"before": _side(a, "text"), "after": _side(b, "text")},
            "critical": bool(spec and spec.critical),
        })
    if stored.phase != new.phase:
        kind = "newly_filled" if stored.phase is None else "lost" if new.phase is None else "changed"
        records.append({"session": stored.session, "field": PHASE, "kind": kind, "before": stored.phase,
                        "after": new.phase, "round": None, "reason": None,
                        "extractor": {"before": None, "after": None}, "why": {"before": None, "after": None},
                        "critical": False})
    return records


def critical_loss(record: dict[str, Any]) -> bool:
    """A critical field that had a value and would have none."""
    return bool(record["critical"]) and record["before"] is not None and record["after"] is None
