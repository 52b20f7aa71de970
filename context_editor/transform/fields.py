"""Transform, part 1: candidates -> proposed field edits, by each field's conflict policy.

Policies: `latest` (the newest mention wins; the old value stays in history), `first` (locked
once set; later values are recorded as rejected), `accumulate` (lists grow, duplicates ignored;
in a list of wanted things a negated mention of an item it holds takes it out: "还是不要股票了"),
`highest_confidence` (replace only with an equally or more confident extraction). The source of
an accepted change is derived from history, so "改成红色" after black is a `correction` and
"还是黑色吧" after that is a `reversion` without any rule having to say so.

Proposals and confirmations: a value the assistant proposes for a user-owned field is logged
as a `reject` edit with reason PROPOSED_BY_ASSISTANT (visible in `why`, never in state). When
the user's next message (the next round) opens with a plain yes, each field proposed in the
round before that the reply does not itself mention is set to the last proposed value, with
source `confirmation` and the assistant's span as provenance. Both live in the edit log, so a
replay or a reopened session reaches the same state.

TTL expiry happens here too: it is a change of state caused by time, recorded as an edit.
"""

from __future__ import annotations

from datetime import datetime, timezone
from itertools import takewhile
from typing import Any, Iterable

from ..domain import Domain, FieldSpec
from ..model import Candidate, Edit, FieldState, Message, Op, Provenance, Source, State

POLICY_LOCKED = "POLICY_FIRST_LOCKED"
POLICY_LOWER_CONFIDENCE = "POLICY_LOWER_CONFIDENCE"
PROPOSED = "PROPOSED_BY_ASSISTANT"
CONFIRMED = "CONFIRMED_BY_USER"


def edit(msg: Message, domain: Domain, op: Op, field: str | None, before: Any, after: Any, source: Source,
         reason: str | None = None, provenance: Provenance | None = None, stage: str = "transform") -> Edit:
    """An unsealed edit for `msg` (seq and hashes are filled in at commit)."""
    return Edit(session=msg.session, seq=-1, message_index=msg.index, round=msg.round, stage=stage, op=op,
                field=field, before=before, after=after, source=source, reason=reason, provenance=provenance,
                domain_version=domain.version_hash, at=msg.timestamp)


def _utc(dt: datetime) -> datetime:
    """Timestamps without a zone are taken as UTC, so naive and aware ones can be compared."""
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def expiry_edits(state: State, domain: Domain, msg: Message) -> list[Edit]:
    """Fields whose TTL ran out by the time `msg` arrives."""
    out = []
    now = msg.time()
    for name, fs in state.fields.items():
        spec = domain.fields.get(name)
        if spec is None or not fs.present:
            continue
        ttl = spec.ttl
        expired = False
        if ttl == "turn":
            expired = msg.role == "user" and msg.round > (fs.set_round or 0)
        elif isinstance(ttl, dict) and now and fs.set_at:
            expired = (_utc(now) - _utc(datetime.fromisoformat(fs.set_at))).total_seconds() > ttl["days"] * 86400
        if expired:
            out.append(edit(msg, domain, "expire", name, fs.value, None, "expiry", reason=f"TTL_{'TURN' if ttl == 'turn' else 'DAYS'}",
                            stage="expiry"))
    return out


def _wanted(spec: FieldSpec, c: Candidate) -> bool:
    if spec.mentions == "any":
        return True
    return c.negated == (spec.mentions == "negated")


def _removes(spec: FieldSpec, c: Candidate) -> bool:
    """A negated mention in a list of wanted things ("不要股票") takes the item out."""
    return spec.is_list and spec.mentions == "affirmed" and c.negated


def _classify(msg: Message, fs: FieldState | None, value: Any) -> Source:
    """initial | correction | reversion | tool, from the field's accepted history."""
    if msg.role == "tool":
        return "tool"
    if fs is None or not fs.accepted:
        return "initial"
    return "reversion" if fs.was_accepted_before(value) else "correction"


def _chosen(cands: list[Candidate]) -> Candidate:
    """One value per field and message: the most confident mention, the last one on ties
    ("黑色……不，白色" means white)."""
    return max(enumerate(cands), key=lambda ic: (ic[1].provenance.confidence, ic[1].provenance.span[0], ic[0]))[1]


def _set(msg: Message, domain: Domain, name: str, fs: FieldState | None, value: Any, c: Candidate) -> Edit:
    """A `set` edit, its source classified from history (or `confirmation`)."""
    current = fs.value if fs else None
    if c.kind == "confirmation":
        return edit(msg, domain, "set", name, current, value, "confirmation", reason=CONFIRMED, provenance=c.provenance)
    return edit(msg, domain, "set", name, current, value, _classify(msg, fs, value), provenance=c.provenance)


def _list_edits(msg: Message, domain: Domain, name: str, fs: FieldState | None, cands: list[Candidate],
                removals: list[Candidate]) -> list[Edit]:
    """Lists grow by new items and lose negated ones, in one edit per message."""
    current = list(fs.value or []) if fs else []
    gone = {c.value for c in removals}
    items = [v for v in current if v not in gone]
    for c in cands:
        for v in (c.value if isinstance(c.value, list) else [c.value]):
            if v not in items:
                items.append(v)
    if items == current:
        return []
    if not items:
        return [edit(msg, domain, "clear", name, current, None, "correction", provenance=removals[0].provenance)]
    return [_set(msg, domain, name, fs, items, cands[0] if cands else removals[0])]


def _value_edit(msg: Message, domain: Domain, spec: FieldSpec, fs: FieldState | None, cands: list[Candidate]) -> Edit | None:
    """The edit one scalar field gets from this message, by its policy (None: nothing changes)."""
    chosen = _chosen(cands)
    current = fs.value if fs else None
    if chosen.value == current:
        return None
    if current is not None and spec.policy == "first":
        return edit(msg, domain, "reject", spec.name, current, chosen.value, "correction", reason=POLICY_LOCKED,
                    provenance=chosen.provenance)
    held = fs.provenance if fs else None
    if (current is not None and spec.policy == "highest_confidence" and held is not None
            and chosen.provenance.confidence < held.confidence):
        return edit(msg, domain, "reject", spec.name, current, chosen.value, "correction", reason=POLICY_LOWER_CONFIDENCE,
                    provenance=chosen.provenance)
    return _set(msg, domain, spec.name, fs, chosen.value, chosen)


def _proposal_edits(state: State, domain: Domain, msg: Message, proposals: dict[str, list[Candidate]]) -> list[Edit]:
    """The assistant's proposals, logged as rejections until the user confirms them."""
    out = []
    for name, cands in proposals.items():
        chosen = _chosen(cands)
        current = state.get(name)
        if chosen.value == current or domain.fields[name].is_list and chosen.value in (current or []):
            continue
        out.append(edit(msg, domain, "reject", name, current, chosen.value, "proposal", reason=PROPOSED,
                        provenance=chosen.provenance))
    return out


def _confirmed(state: State, domain: Domain, msg: Message, mentioned: set[str]) -> dict[str, Candidate]:
    """Field -> the proposal of the previous round that a plain yes now confirms."""
    out = {}
    for name, fs in state.fields.items():
        if name in mentioned or "user" not in domain.fields[name].sources:
            continue
        # Only the newest entries can be last round's proposal: stop at the first older one, so a
        # "yes" costs O(1) however long the field's history is.
        recent = takewhile(lambda h: h.round >= msg.round - 1, reversed(fs.history))
        last = next((h for h in recent if h.reason == PROPOSED and h.round == msg.round - 1), None)
        if last is not None and last.provenance is not None:
            out[name] = Candidate(name, last.value, last.provenance, kind="confirmation")
    return out


def field_edits(state: State, domain: Domain, msg: Message, candidates: Iterable[Candidate]) -> list[Edit]:
    """Proposed edits for the fields these candidates speak about."""
    values: dict[str, list[Candidate]] = {}
    removals: dict[str, list[Candidate]] = {}
    proposals: dict[str, list[Candidate]] = {}
    mentioned: set[str] = set()
    confirms = False
    for c in candidates:
        if c.kind == "confirmation":
            confirms = True
            continue
        spec = domain.fields[c.field]
        mentioned.add(c.field)
        if c.kind == "proposal":
            if _wanted(spec, c):
                proposals.setdefault(c.field, []).append(c)
        elif msg.role in spec.sources and _removes(spec, c):
            removals.setdefault(c.field, []).append(c)
        elif msg.role in spec.sources and _wanted(spec, c):
            values.setdefault(c.field, []).append(c)
    if confirms:
        for name, c in _confirmed(state, domain, msg, mentioned).items():
            values[name] = [c]
    out = _proposal_edits(state, domain, msg, proposals)
    for name in [*values, *(n for n in removals if n not in values)]:
        spec = domain.fields[name]
        fs = state.fields.get(name)
        if spec.policy == "accumulate" or spec.is_list:
            out.extend(_list_edits(msg, domain, name, fs, values.get(name, []), removals.get(name, [])))
        elif (e := _value_edit(msg, domain, spec, fs, values[name])) is not None:
            out.append(e)
    return out
