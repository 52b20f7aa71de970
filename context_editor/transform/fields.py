"""Transform, part 1: candidates -> proposed field edits, by each field's conflict policy.

Policies: `latest` (the newest mention wins; the old value stays in history), `first` (locked
once set; later values are recorded as rejected), `accumulate` (lists grow, duplicates ignored),
`highest_confidence` (replace only with an equally or more confident extraction). The source of
an accepted change is derived from history, so "改成红色" after black is a `correction` and
"还是黑色吧" after that is a `reversion` without any rule having to say so.
TTL expiry happens here too: it is a change of state caused by time, recorded as an edit.
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterable

from ..domain import Domain, FieldSpec
from ..model import Candidate, Edit, Message, State

POLICY_LOCKED = "POLICY_FIRST_LOCKED"
POLICY_LOWER_CONFIDENCE = "POLICY_LOWER_CONFIDENCE"


def edit(msg: Message, domain: Domain, op: str, field: str | None, before, after, source: str,
         reason: str | None = None, provenance=None, stage: str = "transform") -> Edit:
    """An unsealed edit for `msg` (seq and hashes are filled in at commit)."""
    return Edit(session=msg.session, seq=-1, message_index=msg.index, round=msg.round, stage=stage, op=op,
                field=field, before=before, after=after, source=source, reason=reason, provenance=provenance,
                domain_version=domain.version_hash, at=msg.timestamp)


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
            expired = (now - datetime.fromisoformat(fs.set_at)).total_seconds() > ttl["days"] * 86400
        if expired:
            out.append(edit(msg, domain, "expire", name, fs.value, None, "expiry", reason=f"TTL_{'TURN' if ttl == 'turn' else 'DAYS'}",
                            stage="expiry"))
    return out


def _wanted(spec: FieldSpec, c: Candidate) -> bool:
    if spec.mentions == "any":
        return True
    return c.negated == (spec.mentions == "negated")


def _classify(msg: Message, fs, value) -> str:
    """initial | correction | reversion | tool, from the field's accepted history."""
    if msg.role == "tool":
        return "tool"
    accepted = [h.value for h in fs.history if h.status == "accepted"] if fs else []
    if not accepted:
        return "initial"
    return "reversion" if value in accepted[:-1] or (fs.value is None and value in accepted) else "correction"


def field_edits(state: State, domain: Domain, msg: Message, candidates: Iterable[Candidate]) -> list[Edit]:
    """Proposed edits for the fields these candidates speak about."""
    by_field: dict[str, list[Candidate]] = {}
    for c in candidates:
        spec = domain.fields[c.field]
        if msg.role in spec.sources and _wanted(spec, c):
            by_field.setdefault(c.field, []).append(c)
    out = []
    for name, cands in by_field.items():
        spec = domain.fields[name]
        fs = state.fields.get(name)
        current = fs.value if fs else None
        if spec.policy == "accumulate" or spec.is_list:
            items = list(current or [])
            new = []
            for c in cands:
                for v in (c.value if isinstance(c.value, list) else [c.value]):
                    if v not in items and v not in new:
                        new.append(v)
            if new:
                prov = next(c.provenance for c in cands)
                out.append(edit(msg, domain, "set", name, current, items + new, _classify(msg, fs, items + new), provenance=prov))
            continue
        # One value per field and message: the most confident mention, the last one on ties
        # ("黑色……不，白色" means white).
        chosen = max(enumerate(cands), key=lambda ic: (ic[1].provenance.confidence, ic[1].provenance.span[0], ic[0]))[1]
        if chosen.value == current:
            continue
        if current is not None and spec.policy == "first":
            out.append(edit(msg, domain, "reject", name, current, chosen.value, "correction", reason=POLICY_LOCKED,
                            provenance=chosen.provenance))
            continue
        if (current is not None and spec.policy == "highest_confidence"
                and chosen.provenance.confidence < fs.provenance.confidence):
            out.append(edit(msg, domain, "reject", name, current, chosen.value, "correction", reason=POLICY_LOWER_CONFIDENCE,
                            provenance=chosen.provenance))
            continue
        out.append(edit(msg, domain, "set", name, current, chosen.value, _classify(msg, fs, chosen.value), provenance=chosen.provenance))
    return out
