"""Transform, part 3: values carried over from the other domains of one conversation.

A domain file declares where a field may take its value from when the user has not said one for
it: `carry: {city: [restaurant.city, attraction.city]}` in the hotel's file means "the city the
user gave the restaurant or the attraction, whichever was set last, is the hotel's city too".
A conversation across domains is one session per domain (`pipeline.add_together` feeds each
message to each), so the source is another session's state at the time of the message.

- Only a value the source domain holds of its own is carried (not one it carried itself), so the
  provenance always names where it was said, and two domains carrying from each other cannot loop.
- A carried value never replaces one the field got any other way, and a value the user states
  for the field later replaces it like any correction (`fields._value_edit`: a carried value does
  not lock a `first` field nor outrank by confidence): the user's word outranks a carried one.
  Neither is a field refilled that the conversation itself once filled or emptied.
- While the field still holds the carried value, it follows its source (the user moved the
  restaurant to another city).
- A value the field's validation refuses (a city not among an enum's values) is not carried.

Each carry is a `set` edit with source `carry`, reason `CARRIED_FROM <domain>.<field>`, provenance
the source's words (round, role, span, text, confidence), extractor `carry:<domain>.<field>`,
message index -1 (not a message of this session) and `message_id` "<source session>#<index>".
The source's state is not in this session's log, so a replay takes the carried values as inputs,
like a user's memory: `carried_from` turns a recorded carry edit back into what was carried.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..domain import Domain
from ..model import Edit, Message, Provenance, State, canonical_json
from .fields import edit

REASON = "CARRIED_FROM"
EXTRACTOR = "carry:"  # + domain.field


@dataclass(frozen=True)
class Carried:
    """A value another domain of the conversation holds, and where it was said."""

    source: str  # "domain.field"
    value: Any
    session: str  # the source domain's session
    message_index: int  # the message of that session the value was read from
    round: int
    role: str
    span: tuple[int, int]
    text: str
    confidence: float


def offered(domain: Domain, others: Mapping[str, State]) -> list[Carried]:
    """What the other domains' states (domain name -> state) hold for `domain`'s carries: each
    source field's own value (not one it carried), in the order the carries name them."""
    out = []
    for sources in domain.carry.values():
        for ref in sources:
            name, _, field = ref.partition(".")
            state = others.get(name)
            fs = state.fields.get(field) if state is not None else None
            if fs is None or fs.value is None or fs.source == "carry" or fs.provenance is None:
                continue
            p = fs.provenance
            out.append(Carried(ref, fs.value, state.session if state else "", p.message_index, p.round, p.role,
                               p.span, p.text, p.confidence))
    return out


def _own(state: State, name: str) -> bool:
    """True once the conversation itself filled or emptied the field (anything but a carry)."""
    fs = state.fields.get(name)
    return fs is not None and any(h.source != "carry" and h.status in ("accepted", "cleared") for h in fs.history)


def carry_edits(state: State, domain: Domain, msg: Message, carried: Iterable[Carried],
                refused: Callable[[str, Any], bool]) -> list[Edit]:
    """The carries `msg` brings: per declared field the most recently said source value (on a tie,
    the one the declaration names first), unless the field is the conversation's own, already
    holds that value, or `refused(field, value)` (validation)."""
    by_ref = {c.source: c for c in carried}
    out = []
    for name, sources in domain.carry.items():
        if name not in domain.fields or _own(state, name):
            continue
        present = [(i, by_ref[ref]) for i, ref in enumerate(sources) if ref in by_ref]
        if not present:
            continue
        _, best = max(present, key=lambda ic: (ic[1].round, ic[1].message_index, -ic[0]))
        current = state.get(name)
        if current is not None and canonical_json(current) == canonical_json(best.value):
            continue
        if refused(name, best.value):
            continue
        prov = Provenance(message_index=-1, round=best.round, role=best.role, span=best.span, text=best.text,
                          extractor=EXTRACTOR + best.source, confidence=best.confidence,
                          domain_version=domain.version_hash, message_id=f"{best.session}#{best.message_index}")
        out.append(edit(msg, domain, "set", name, current, best.value, "carry", reason=f"{REASON} {best.source}",
                        provenance=prov))
    return out


def carried_from(e: Edit) -> Carried:
    """What a recorded carry edit carried (replay's input)."""
    p = e.provenance
    assert p is not None and p.extractor.startswith(EXTRACTOR)
    session, index = p.given_from()
    return Carried(p.extractor[len(EXTRACTOR):], e.after, session, index, p.round, p.role, p.span, p.text,
                   p.confidence)
