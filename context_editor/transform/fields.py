"""Transform, part 1: candidates -> proposed field edits, by each field's conflict policy.

Policies: `latest` (the newest mention wins; the old value stays in history), `first` (locked
once set; later values are recorded as rejected), `accumulate` (lists grow, duplicates ignored;
in a list of wanted things a negated mention of an item it holds takes it out: "还是不要股票了"),
`highest_confidence` (replace only with an equally or more confident extraction). The source of
an accepted change is derived from history, so "改成红色" after black is a `correction` and
"还是黑色吧" after that is a `reversion` without any rule having to say so.

Offers and replies: each value the assistant offers for a user-owned field is logged as a
`reject` edit with reason PROPOSED_BY_ASSISTANT (an option of a tool result's list:
OFFERED_OPTION_<n>), visible in `why`, never in state. The user's next message (the next round)
then accepts the offer (each offered field the reply does not itself mention is set to the last
value offered, source `confirmation`, the assistant's span as provenance), picks the n-th option
or listed value ("the second one", reason PICKED_OPTION_<n>), declines it (each offered value is
logged again as rejected, reason DECLINED_BY_USER) or ignores it (the offer lapses). All of it
lives in the edit log, so a replay or a reopened session reaches the same state. A value read
as the answer to the assistant's question about its field has source `answer` and names the
round of the question in its reason (ANSWER_TO_ROUND_<n>). An assistant message that offers a
value outside a search constraint the user holds (`dialogue: relax`; Extract compares them) clears
that constraint, reason RELAXED_BY_ASSISTANT: the search let it go.

TTL expiry happens here too: it is a change of state caused by time, recorded as an edit.
"""

from __future__ import annotations

from datetime import datetime, timezone
from itertools import takewhile
from typing import Any, Iterable

from ..domain import Domain, FieldSpec
from ..model import Candidate, Edit, FieldState, HistoryEntry, Message, Op, Provenance, Source, State, canonical_json

POLICY_LOCKED = "POLICY_FIRST_LOCKED"
POLICY_LOWER_CONFIDENCE = "POLICY_LOWER_CONFIDENCE"
PROPOSED = "PROPOSED_BY_ASSISTANT"
NOT_A_QUANTITY = "NUMBER_NOT_A_QUANTITY"  # "1e999999", "10^1000": an exponent, not an amount or a count
OPTION = "OFFERED_OPTION_"  # + the option's number
CONFIRMED = "CONFIRMED_BY_USER"
DECLINED = "DECLINED_BY_USER"
NEW_SEARCH = "NEW_SEARCH"  # a request for a new search cleared a constraint it did not restate
RELAXED = "RELAXED_BY_ASSISTANT"  # the assistant offered a value outside a constraint: the search relaxed it
MENTIONED = "MENTIONED_IN_CONVERSATION"  # a `mentions: new` field's value the assistant named (not set)
NAMED_BEFORE = "NAMED_BEFORE"  # the user repeated a value the conversation named before: a reference, not a new value
PICKED = "PICKED_OPTION_"  # + the number picked
ANSWERED = "ANSWER_TO_ROUND_"  # + the round of the question


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
    expiring = domain.expiring
    if not expiring:
        return []
    out = []
    now = msg.time()
    for name, fs in state.fields.items():  # in the state's order: the order the edits are made in
        if name not in expiring or not fs.present:
            continue
        spec = domain.fields[name]
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
    if fs is None or not fs.accepted or fs.source == "carry" and fs.value == value:
        return "initial"  # (the user saying the value another domain carried makes it theirs)
    return "reversion" if fs.was_accepted_before(value) else "correction"


def _chosen(cands: list[Candidate]) -> Candidate:
    """One value per field and message: the most confident mention, the last one on ties
    ("黑色……不，白色" means white)."""
    return max(enumerate(cands), key=lambda ic: (ic[1].provenance.confidence, ic[1].provenance.span[0], ic[0]))[1]


def _set(msg: Message, domain: Domain, name: str, fs: FieldState | None, value: Any, c: Candidate) -> Edit:
    """A `set` edit, its source classified from history (or `confirmation`)."""
    current = fs.value if fs else None
    if c.kind == "confirmation":
        reason = f"{PICKED}{c.option}" if c.option is not None else CONFIRMED
        return edit(msg, domain, "set", name, current, value, "confirmation", reason=reason, provenance=c.provenance)
    if c.kind == "answer":
        return edit(msg, domain, "set", name, current, value, "answer", reason=f"{ANSWERED}{c.asked_round}",
                    provenance=c.provenance)
    return edit(msg, domain, "set", name, current, value, _classify(msg, fs, value), provenance=c.provenance)


def _list_edits(msg: Message, domain: Domain, name: str, fs: FieldState | None, cands: list[Candidate],
                removals: list[Candidate], replace: bool = False) -> list[Edit]:
    """Lists grow by new items and lose negated ones, in one edit per message; with `replace`
    (`policy: latest` on a list) the items a message names are the new list."""
    current = list(fs.value or []) if fs else []
    gone = {c.value for c in removals}
    items = [] if replace and cands else [v for v in current if v not in gone]
    for c in cands:
        for v in (c.value if isinstance(c.value, list) else [c.value]):
            if v not in items:
                items.append(v)
    if items == current:
        return []
    if not items:
        return [edit(msg, domain, "clear", name, current, None, "correction", provenance=removals[0].provenance)]
    return [_set(msg, domain, name, fs, items, cands[0] if cands else removals[0])]


def _new_search_clears(state: State, domain: Domain, msg: Message, search: Candidate | None, removals: set[str],
                       values: dict[str, list[Candidate]]) -> list[Edit]:
    """A new search (`dialogue: {new_search: <action>}`; Extract found the request) replaces the
    earlier constraints of that action it does not restate: each is cleared, reason NEW_SEARCH."""
    action = domain.actions.get(str(search.value)) if search is not None else None
    if search is None or action is None:
        return []
    return [edit(msg, domain, "clear", name, state.get(name), None, "correction", reason=NEW_SEARCH, provenance=search.provenance)
            for name in action.fields if name not in values and name not in removals and state.get(name) is not None]


def _named_before(fs: FieldState | None, value: Any) -> bool:
    """Whether the field's history already holds `value` (named by the assistant, said or set before)."""
    return fs is not None and (fs.value == value or any(h.value == value for h in fs.history))


def _value_edit(msg: Message, domain: Domain, spec: FieldSpec, fs: FieldState | None, cands: list[Candidate]) -> Edit | None:
    """The edit one scalar field gets from this message, by its policy (None: nothing changes)."""
    chosen = _chosen(cands)
    current = fs.value if fs else None
    carried = fs is not None and fs.source == "carry"  # a carried value gives way to the user's (transform.carry)
    if chosen.value == current and not carried:
        return None
    if current is not None and spec.policy == "first" and not carried:
        return edit(msg, domain, "reject", spec.name, current, chosen.value, "correction", reason=POLICY_LOCKED,
                    provenance=chosen.provenance)
    held = fs.provenance if fs else None
    if (current is not None and spec.policy == "highest_confidence" and held is not None and not carried
            and chosen.provenance.confidence < held.confidence):
        return edit(msg, domain, "reject", spec.name, current, chosen.value, "correction", reason=POLICY_LOWER_CONFIDENCE,
                    provenance=chosen.provenance)
    return _set(msg, domain, spec.name, fs, chosen.value, chosen)


def _proposal_edits(state: State, domain: Domain, msg: Message, proposals: dict[str, list[Candidate]]) -> list[Edit]:
    """The assistant's offers, logged as rejections until the user accepts one: each value offered,
    in the order of its last mention (a yes takes the last, nearest the question; "the second
    one" the second), or each option of a tool result in its order."""
    out = []
    for name, cands in proposals.items():
        current = state.get(name)
        spec = domain.fields[name]
        last = {canonical_json(c.value): c for c in sorted(cands, key=lambda c: c.provenance.span[0])}
        offered = [c for c in cands if c.option is not None] or sorted(last.values(), key=lambda c: c.provenance.span[0])
        for c in sorted(offered, key=lambda c: (c.option or 0, c.provenance.span[0])):
            if c.option is None and (c.value == current or spec.is_list and c.value in (current or [])):
                continue
            reason = f"{OPTION}{c.option}" if c.option is not None else PROPOSED
            out.append(edit(msg, domain, "reject", name, current, c.value, "proposal", reason=reason, provenance=c.provenance))
    return out


def _offered(fs: FieldState, rnd: int) -> list[HistoryEntry]:
    """The field's offers of round `rnd` (the previous one), oldest first. Only the newest entries
    can be of that round: the scan stops at the first older one, so a reply costs O(1) however
    long the field's history is."""
    recent = takewhile(lambda h: h.round >= rnd, reversed(fs.history))
    return [h for h in recent if h.round == rnd and h.source == "proposal" and h.reason and h.provenance is not None
            and (h.reason == PROPOSED or h.reason.startswith(OPTION))][::-1]


def _replies(state: State, domain: Domain, msg: Message, mentioned: set[str], act: Candidate) -> dict[str, Candidate]:
    """Field -> what the reply `act` (yes, no or a pick) does with the previous round's offer of it."""
    rnd = act.asked_round if act.asked_round is not None else msg.round - 1  # an offer kept open names its round
    offers = {name: found for name, fs in state.fields.items()
              if name not in mentioned and name in domain.fields and (found := _offered(fs, rnd))}
    if act.kind == "pick":
        listed = any(len(v) > 1 for v in offers.values())
        out = {}
        for name, found in offers.items():
            options = {int(h.reason[len(OPTION):]): h for h in found if h.reason and h.reason.startswith(OPTION)}
            n = act.value
            if options:
                chosen = options.get(max(options) if n == -1 else n)
            elif len(found) > 1:
                chosen = found[n if n == -1 else n - 1] if -1 <= n <= len(found) and n != 0 else None
            else:  # a single value goes with whichever option was picked ("Sino or Rosie's, both at 7pm")
                chosen = found[0] if listed else None
            if chosen is not None and chosen.provenance is not None:
                out[name] = Candidate(name, chosen.value, chosen.provenance, kind="confirmation", option=n)
        return out
    # A yes takes the value named last, nearest the question ("有黑色和白色，要黑色的吗？"); a no declines it.
    return {name: Candidate(name, last.value, last.provenance, kind=act.kind)
            for name, found in offers.items()
            if "user" in domain.fields[name].sources and (last := found[-1]).provenance is not None}


def field_edits(state: State, domain: Domain, msg: Message, candidates: Iterable[Candidate]) -> list[Edit]:
    """Proposed edits for the fields these candidates speak about."""
    values: dict[str, list[Candidate]] = {}
    removals: dict[str, list[Candidate]] = {}
    proposals: dict[str, list[Candidate]] = {}
    mentioned: set[str] = set()
    acts: list[Candidate] = []
    refused: list[Edit] = []
    relaxed: dict[str, Candidate] = {}
    for c in candidates:
        if c.kind in ("confirmation", "decline", "pick", "new_search"):
            acts.append(c)
            continue
        if c.kind == "mention":
            fs = state.fields.get(c.field)
            if not _named_before(fs, c.value) and all(e.after != c.value or e.field != c.field for e in refused):
                refused.append(edit(msg, domain, "reject", c.field, fs.value if fs else None, c.value, "proposal",
                                    reason=MENTIONED, provenance=c.provenance))
            continue
        if c.kind == "relax":
            if c.field not in relaxed and state.get(c.field) is not None:
                relaxed[c.field] = c
            continue
        spec = domain.fields[c.field]
        if c.kind == "not_a_quantity":
            if msg.role in spec.sources:
                fs = state.fields.get(c.field)
                refused.append(edit(msg, domain, "reject", c.field, fs.value if fs else None, c.value, "initial",
                                    reason=NOT_A_QUANTITY, provenance=c.provenance))
            continue
        mentioned.add(c.field)
        if c.kind == "proposal":
            if _wanted(spec, c):
                proposals.setdefault(c.field, []).append(c)
        elif msg.role in spec.sources and _removes(spec, c):
            removals.setdefault(c.field, []).append(c)
        elif msg.role in spec.sources and _wanted(spec, c):
            if spec.mentions == "new" and c.kind == "value" and _named_before(state.fields.get(c.field), c.value):
                if all(e.after != c.value or e.field != c.field for e in refused):
                    fs = state.fields.get(c.field)
                    refused.append(edit(msg, domain, "reject", c.field, fs.value if fs else None, c.value, "initial",
                                        reason=NAMED_BEFORE, provenance=c.provenance))
                continue
            values.setdefault(c.field, []).append(c)
    out = _proposal_edits(state, domain, msg, proposals)
    # The assistant offered something outside a constraint (`dialogue: relax`): the search let it go.
    out.extend(edit(msg, domain, "clear", name, state.get(name), None, "correction", reason=RELAXED, provenance=c.provenance)
               for name, c in relaxed.items())
    # A pick says more than a yes ("yes, the second one"); a no turns the offer down.
    act = next((a for a in acts if a.kind == "pick"), None) or next((a for a in acts if a.kind != "new_search"), None)
    for name, c in (_replies(state, domain, msg, mentioned, act) if act else {}).items():
        if c.kind == "decline":
            out.append(edit(msg, domain, "reject", name, state.get(name), c.value, "proposal", reason=DECLINED,
                            provenance=c.provenance))
        else:
            values[name] = [c]
    out.extend(_new_search_clears(state, domain, msg, next((a for a in acts if a.kind == "new_search"), None), set(removals), values))
    for name in [*values, *(n for n in removals if n not in values)]:
        spec = domain.fields[name]
        fs = state.fields.get(name)
        if spec.policy == "accumulate" or spec.is_list:
            out.extend(_list_edits(msg, domain, name, fs, values.get(name, []), removals.get(name, []), spec.policy == "latest"))
        elif (e := _value_edit(msg, domain, spec, fs, values[name])) is not None:
            out.append(e)
    return out + refused
