"""A user's memory across sessions: the values of `scope: user` fields, kept per tenant and user.

Who the user is comes from the session's store key, `tenant/user/session` as `session_key()`
builds it (the service takes the tenant from the caller's API key, never from the request), so
one tenant's or user's memory can never reach another's: every read and write names both.

The memory is an append-only list of events per (tenant, user), folded here:
- `remember`: a session accepted a value for a `scope: user` field (source session, round,
  message, span, confidence, time);
- `use`: a new session was given the value (it refreshes the value's decay clock).
A value's weight is `importance * 0.5 ** (days since it was last said or used / half_life_days)`;
below the field's `forget_below` it is forgotten (no longer given to new sessions). Two values
of one field resolve by the field's `policy`: `latest` (and `highest_confidence` when the new
one is at least as sure) replaces the current value, `first` keeps it, `accumulate` (lists)
merges the items. The value that gives way is kept as superseded, never deleted.

A new session sees its user's memory as `set` edits with `source: user_memory` at its first
message, before anything is extracted: the session's state stays a fold of its own log, `why`
names the session and round each value came from, and `audit replay` takes the recorded edits
as inputs (the memory may have moved on since).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ..domain import Domain, FieldSpec
from ..model import Edit, Message, Provenance, canonical_json

EXTRACTOR = "user_memory"  # the extractor id of a recalled value's provenance
REASON = "USER_MEMORY"


@dataclass(frozen=True)
class Remembered:
    """One value of a user's memory, where it came from, and when it was last said or used."""

    field: str
    value: Any
    session: str
    round: int
    message_index: int
    span: tuple[int, int]
    text: str
    confidence: float
    said_at: str  # ISO time of the message that said it
    used_at: str  # the later of said_at and the last session that was given it
    superseded: tuple[Any, ...] = ()  # earlier values that gave way to this one, oldest first

    def weight(self, spec: FieldSpec, now: datetime) -> float:
        """How much of the value is left at `now`: importance halved every `half_life_days`."""
        if spec.half_life_days is None:
            return spec.importance
        days = max((now - datetime.fromisoformat(self.used_at)).total_seconds(), 0.0) / 86400
        return float(spec.importance * 0.5 ** (days / spec.half_life_days))


def remember_event(e: Edit, msg: Message) -> dict[str, Any]:
    """The memory event of an accepted value of a `scope: user` field."""
    p = e.provenance
    return {"event": "remember", "field": e.field, "value": e.after, "session": msg.session, "round": e.round,
            "message_index": e.message_index, "span": list(p.span) if p else [0, 0], "text": p.text if p else "",
            "confidence": p.confidence if p else 1.0, "at": msg.timestamp}


def use_event(e: Edit, msg: Message) -> dict[str, Any]:
    """The memory event of a value given to a new session (refreshes its decay clock)."""
    return {"event": "use", "field": e.field, "value": e.after, "session": msg.session, "at": msg.timestamp}


def memory_events(domain: Domain, msg: Message, edits: list[Edit]) -> list[dict[str, Any]]:
    """What a committed message adds to its user's memory: a `use` for each value it was given,
    a `remember` for each value of a `scope: user` field it accepted."""
    out = []
    for e in edits:
        if e.op != "set" or e.field is None or domain.fields[e.field].scope != "user":
            continue
        out.append(use_event(e, msg) if e.source == "user_memory" else remember_event(e, msg))
    return out


@dataclass
class UserMemory:
    """The fold of one user's events: per field the current value (or None) and its history."""

    domain: Domain
    current: dict[str, Remembered] = field(default_factory=dict)

    @classmethod
    def fold(cls, domain: Domain, events: list[dict[str, Any]]) -> UserMemory:
        memory = cls(domain)
        for ev in events:
            memory.apply(ev)
        return memory

    def apply(self, ev: dict[str, Any]) -> None:
        spec = self.domain.fields.get(ev["field"])
        if spec is None or spec.scope != "user":
            return  # another domain's field, or one no longer kept per user
        old = self.current.get(ev["field"])
        if ev["event"] == "use":
            if old is not None and canonical_json(old.value) == canonical_json(ev["value"]):
                self.current[ev["field"]] = replace(old, used_at=max(old.used_at, ev["at"]))
            return
        new = Remembered(ev["field"], ev["value"], ev["session"], ev["round"], ev["message_index"], tuple(ev["span"]),
                         ev["text"], ev["confidence"], ev["at"], ev["at"])
        if old is None:
            self.current[ev["field"]] = new
        elif canonical_json(old.value) == canonical_json(new.value):
            self.current[ev["field"]] = replace(old, used_at=max(old.used_at, new.said_at))  # said again: refreshed
        elif spec.policy == "first" or (spec.policy == "highest_confidence" and new.confidence < old.confidence):
            self.current[ev["field"]] = replace(old, superseded=(*old.superseded, new.value))  # the newcomer gives way
        else:
            value = new.value
            if spec.policy == "accumulate" and isinstance(old.value, list) and isinstance(new.value, list):
                value = list(old.value) + [v for v in new.value if v not in old.value]
            self.current[ev["field"]] = replace(new, value=value, superseded=(*old.superseded, old.value))

    def recall(self, now: datetime) -> list[tuple[Remembered, float]]:
        """The values a session starting at `now` is given, with their weights: those not yet
        decayed below their field's `forget_below`, in the domain's field order."""
        out = []
        for name, spec in self.domain.fields.items():
            item = self.current.get(name)
            if item is not None and (weight := item.weight(spec, now)) >= spec.forget_below:
                out.append((item, round(weight, 4)))
        return out


def recall_edit(item: Remembered, weight: float, msg: Message, domain: Domain) -> Edit:
    """The edit that gives a remembered value to a new session (sealed by the caller). Its
    provenance names the source session and round (message index -1: not a message of this
    session); its confidence is the value's weight when it was given."""
    prov = Provenance(message_index=-1, round=item.round, role="user", span=item.span, text=item.text,
                      extractor=EXTRACTOR, confidence=weight, domain_version=domain.version_hash,
                      message_id=f"{item.session}#{item.message_index}")
    return Edit(session=msg.session, seq=0, message_index=msg.index, round=msg.round, stage="transform", op="set",
                field=item.field, before=None, after=item.value, source="user_memory",
                reason=f"{REASON} from session {item.session} round {item.round}", provenance=prov,
                domain_version=domain.version_hash, at=msg.timestamp)


def recalled(e: Edit) -> tuple[Remembered, float]:
    """The remembered value and weight a recorded `user_memory` edit was made from (replay's input)."""
    p = e.provenance
    assert p is not None
    session, index = p.given_from()
    return Remembered(str(e.field), e.after, session, p.round, index, p.span, p.text, p.confidence,
                      str(e.at), str(e.at)), p.confidence
