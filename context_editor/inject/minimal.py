"""The `minimal` form of an action's context: each value the action needs once.

A context that shows the state, the turn a value came from and a summary line of that turn says
the same thing three times. With `minimal: true` on an action (docs/domain-format.md#minimal):

- the state is shown as short lines (`name: value rN`), the envelope without the attributes
  that only repeat the domain file, the turns as text lines without a wrapper element;
- a turn or summary line whose value-like spans (numbers, dates, identifiers, quoted strings,
  names, the domain's enum and gazetteer phrases: `memory.summary`) the state as rendered holds
  (a present value, or the provenance span of one: `held`) adds nothing and is left out, and so
  is a line with no value at all; a line with a value the state does not hold stays until the
  state covers it or the budget forces it out (then it is named in `<truncated_context>`);
- the latest user message stays verbatim; the assistant's sentences with values stay for
  REPLY_ROUNDS rounds (an offer the user takes later), and any longer while the state logged an
  offer in them that is still open; the message the user replies to stays whole while the reply
  holds a value the state did not read (the question gives it its meaning);
- a message the app said speaks for other domains (`domains` metadata) gives this context no
  lines: its values are those domains' to keep;
- while the whole conversation is loaded (`recent_rounds + history_rounds` reach its first
  message), the conversation as the user said it is the other candidate: every user turn
  verbatim, only the state values no shown turn was the source of. Both are counted exactly
  and the smaller one is sent (`render.Renderer._cheaper`).

Everything here is a choice among what the plan already holds (turns, summary lines and their
open values, fields and their provenance, the offers the state logged): nothing is extracted
or rewritten.
"""

from __future__ import annotations

from typing import Sequence

from ..model import Message, State
from . import compact

Unit = list[Message]


def pending(units: Sequence[Unit], latest: Sequence[Unit]) -> list[Unit]:
    """The units the latest user message replies to, among `units` (the loaded window, oldest
    first): those between the user message before it and it (an assistant's question or offer,
    with any tool chain it called). Empty when there is no latest user unit."""
    if not latest:
        return []
    first = latest[0][0].index
    before: list[Unit] = []
    for unit in reversed(units):
        if unit[0].index >= first:
            continue
        if any(m.role == "user" for m in unit):
            break
        before.append(unit)
    return before[::-1]


def unread(summary: Sequence[compact.SummaryLine], index: int, absorbed: compact.Absorbed) -> bool:
    """Whether message `index` (a recent one: its lines are scanned from the newest) has a
    value-like span the state did not absorb."""
    for line in reversed(summary):
        if line.index < index:
            return False
        if line.index == index and compact.open_spans(line, absorbed, exact=True):
            return True
    return False


def held(states: Sequence[State]) -> compact.Absorbed:
    """What the rendered state holds: the provenance spans of the present values only (a value
    the state moved on from is not shown, so the turn it came from is not absorbed by it) and
    the present values' texts, over every state of the envelope."""
    spans: dict[int, tuple[tuple[int, int], ...]] = {}
    texts: list[str] = []
    for state in states:
        for fs in state.fields.values():
            if not fs.present:
                continue
            p = fs.provenance
            if p is not None and p.message_index >= 0:
                spans[p.message_index] = spans.get(p.message_index, ()) + (p.span,)
            texts.extend(str(v).lower() for v in compact.leaves(fs.value))
    return spans, texts


Offers = dict[int, list[str]]  # message index -> the texts of the offers in it still open (lowercased)


def open_offers(state: State, into: Offers | None = None) -> Offers:
    """The assistant's offers the state logged (`proposal` entries) that are still on the table:
    for each field, those of its newest offer round, unless a value was accepted or the offer
    declined after them, or the field holds the offered value."""
    out: Offers = {} if into is None else into
    for fs in state.fields.values():
        found = None
        for h in reversed(fs.history):
            if h.status == "accepted" or h.provenance is None:
                break
            if h.source != "proposal":
                continue
            if h.provenance.role == "user":  # the user's no to it
                break
            if found is not None and h.round != found:
                break
            found = h.round
            if not (fs.present and fs.value == h.value):
                out.setdefault(h.provenance.message_index, []).append(h.provenance.text.lower())
    return out


# Rounds before the latest whose assistant and tool sentences with open values stay: an offer the
# user takes a round or two later (when the offer mechanism did not log it) is still there, the
# agent's older words are not (what the user took from them is in the state). Measured on SGD dev
# and CrossWOZ val samples: 0 rounds lose 5-8 points of coverage, 5 rounds cost 20-40% more tokens.
REPLY_ROUNDS = 2


def foreign(summary: Sequence[compact.SummaryLine], domains: set[str]) -> set[int]:
    """The messages the app said speak for other domains than `domains` (a message's `domains`
    metadata): their values are not this context's to keep."""
    return {line.index for line in summary if line.domains and not domains.intersection(line.domains)}


def zone(lines: dict[str, list[compact.ZoneLine]], offers: Offers, since: int, elsewhere: set[int]) -> dict[str, list[compact.ZoneLine]]:
    """The summary lines a minimal context keeps: no notes (they hold no value), the user's facts
    and open values, and of the assistant's and tools' sentences with open values those of rounds
    from `since` on (what a window of as many rounds would still show) and those holding an offer
    still open; none of messages that speak for other domains (`elsewhere`)."""
    def offered(z: compact.ZoneLine) -> bool:
        text = z.text.lower()
        return any(t and t in text for i in z.sources for t in offers.get(i, ()))

    def own(z: compact.ZoneLine) -> bool:
        return not elsewhere.issuperset(z.sources)

    return {"notes": [], "replies": [z for z in lines["replies"] if own(z) and (z.round >= since or offered(z))],
            "values": [z for z in lines["values"] if own(z)], "facts": [z for z in lines["facts"] if own(z) and z.open]}


def whole(messages: Sequence[Message]) -> bool:
    """Whether `messages` (the loaded window) hold the conversation from its first message."""
    return bool(messages) and messages[0].index == 0 and messages[0].round <= 1
