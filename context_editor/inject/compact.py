"""Compaction of older history, by class (seed article 001), derived and never destructive.

- transient: instructions are not compacted at all; they are shown only in their round.
- anchor: already structured as fields in <state>.
- trace: older messages not shown verbatim are represented by the summary zone: extractive
  lines (sentences copied as written, no word added) that `context_editor.memory` keeps for the
  whole session, each pointing to its source message. This module decides, per render, which
  of those lines the action needs and in what order they give way to the budget.
- relation: entities (identifiers and values in state) weighted by mentions and links (co-
  occurrence in one message); the values of `class: relation` fields seed extra weight that
  propagates along the links (what a booked flight was mentioned with ranks up with it); the
  top nodes are kept.
Compaction is a pure function of the raw log, so it is atomic and reversible: the log is never
touched, and the same log always compacts to the same lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from ..model import State
from .history import ID, Hidden, shown_text, words
TOP_ENTITIES = 8
MIN_WEIGHT = 1.5
STAGE_ROUNDS = 10  # rounds per stage of the summary zone
REPLY_ROUNDS = 5  # rounds before the loaded window whose assistant and tool sentences the session summary keeps

# How a line stands in the budget (the order in which lines give way, first to last):
NOTE, VALUE, FACT = "note", "value", "fact"


@dataclass(frozen=True)
class SummaryLine:
    """One extractive line of the summary zone: a sentence of one message, verbatim.

    kind: `fact` (a user statement with a preference, constraint, identifier or number),
    `value` (a sentence holding a value-like span: number, date, name, quoted string, ID),
    `note` (anything else informative). `start` is the offset of the text in the message
    (-1 for trimmed tool JSON); `spans` are the value-like spans, relative to the text."""

    text: str
    round: int
    index: int
    role: str
    kind: str
    start: int = -1
    spans: tuple[tuple[int, int], ...] = ()
    cued: bool = False  # a fact cue word (allergy, prefer, must …), not only a number

    def to_dict(self) -> dict[str, Any]:
        return {"t": self.text, "r": self.round, "i": self.index, "o": self.role, "k": self.kind,
                "s": self.start, "v": [list(s) for s in self.spans], "c": self.cued}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SummaryLine:
        return cls(d["t"], d["r"], d["i"], d["o"], d["k"], d["s"], tuple((a, b) for a, b in d["v"]), d["c"])


@dataclass(frozen=True)
class ZoneLine:
    """A line as the render shows it: masked text, merged sources, and its standing."""

    text: str
    round: int
    sources: tuple[int, ...]
    rank: str  # NOTE, VALUE or FACT: which budget tier it belongs to
    stage: int  # -1: rolled up into the session summary
    role: str = "user"  # who said it (a sentence several said counts as the user's if the user said it)
    open: tuple[str, ...] = ()  # its value-like spans the state has not absorbed (lowercased)


@dataclass(frozen=True)
class Entity:
    name: str
    mentions: int
    links: tuple[str, ...]
    relation: float = 0.0  # weight propagated from the values of `class: relation` fields

    @property
    def weight(self) -> float:
        return self.mentions + 0.5 * len(self.links) + self.relation


def stage_of(round_: int) -> int:
    return (max(round_, 1) - 1) // STAGE_ROUNDS


Absorbed = tuple[dict[int, list[tuple[int, int]]], list[str]]  # provenance spans by message, present value texts


def covered_spans(state: State) -> Absorbed:
    """What the state has absorbed: provenance spans of accepted values (by message index) and
    the present values' texts (lowercased), so a line whose value-like spans are all there can give way."""
    by_message: dict[int, list[tuple[int, int]]] = {}
    texts: list[str] = []
    for fs in state.fields.values():
        # Every accepted value counts, superseded ones too: the state took that sentence in and
        # has moved on (a change of mind is not a fact to keep repeating).
        for h in fs.history:
            if h.status == "accepted" and h.provenance is not None:
                by_message.setdefault(h.provenance.message_index, []).append(h.provenance.span)
        if fs.present:
            texts.extend(str(v).lower() for v in _leaves(fs.value))
    return by_message, texts


def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    elif value is not None:
        yield value


def is_covered(line: SummaryLine, absorbed: tuple[dict[int, list[tuple[int, int]]], list[str]]) -> bool:
    """True when the state holds what the line carries: every value-like span is a state value
    or lies inside the provenance span of one; a cue-only fact is covered when its sentence is
    the source of a present value."""
    if not line.spans:
        spans, start = absorbed[0].get(line.index, []), line.start
        return start >= 0 and any(p0 < start + len(line.text) and start < p1 for p0, p1 in spans)
    return not open_spans(line, absorbed)


def open_spans(line: SummaryLine, absorbed: tuple[dict[int, list[tuple[int, int]]], list[str]]) -> tuple[str, ...]:
    """The line's value-like spans (lowercased) that are neither a state value nor inside the
    provenance span of one."""
    provenance, texts = absorbed
    spans = provenance.get(line.index, [])
    start = line.start

    def in_provenance(a: int, b: int) -> bool:
        return start >= 0 and any(p0 <= start + a and start + b <= p1 for p0, p1 in spans)

    out = []
    for a, b in line.spans:
        piece = line.text[a:b].lower()
        # Short numbers ("6") match too much by text ("6 travellers" is not "6 years old"):
        # they count as absorbed only through provenance.
        if not in_provenance(a, b) and not (len(piece) >= 3 and any(piece in t for t in texts)):
            out.append(piece)
    return tuple(dict.fromkeys(out))


def mask(line: SummaryLine, hidden: Hidden) -> str:
    """The line as the verbatim turns would show it: spans of out-of-scope fields replaced, then
    hidden values, `pii:` values and personal data, as in `history.turn`."""
    text, spans = line.text, hidden.spans.get(line.index, [])
    if line.start >= 0 and spans:
        end = line.start + len(line.text)
        for a, b, name in sorted(spans, reverse=True):
            if a < end and line.start < b:
                lo, hi = max(a, line.start) - line.start, min(b, end) - line.start
                text = text[:lo] + f"[{name} hidden]" + text[hi:]
    return shown_text(text, hidden)


ZONE_MEMO = 256  # zone_lines results kept (a session's renders between two of its messages reuse one)
_zone_memo: dict[tuple[Any, ...], tuple[list[SummaryLine], list[ZoneLine]]] = {}


def zone_lines(lines: list[SummaryLine], window_from: int, vocabulary: set[str],
               absorbed: tuple[dict[int, list[tuple[int, int]]], list[str]],
               hidden: Hidden) -> list[ZoneLine]:
    """The lines this action's context may show, in order, each with its budget tier.

    Every line must carry something the state does not hold. Lines older than `window_from`
    roll up into the session summary: the user's facts, and sentences with values the state has
    not absorbed — the user's from the whole session, the assistant's and tools' from the last
    REPLY_ROUNDS rounds before the window (a window of recent turns forgets them too; what the
    user took from them is in the state, through offers and answers). A value line whose open
    values a newer line repeats says nothing more and is left out. Lines inside the loaded window
    are shown per stage, notes included when they touch the action's vocabulary. A fact or a
    value the state absorbed becomes a note (it is in <state> already), and the session summary
    keeps no notes. Identical texts are merged, keeping every source.

    Remembered at two levels. The whole answer, per lines list (the summary zone hands the same
    list object until a message arrives) and inputs: a repeated render reuses it. And what each
    line is worth (its tier, its overlap with the action, its masked text, its open values), per
    state view (vocabulary, absorbed values, hidden spans): when a message arrives and the
    state's values did not change, only the new lines are looked at. Entries hold the lists they
    were made from, so a reused id can never match."""
    if not lines:
        return []
    view = (frozenset(vocabulary), tuple(sorted((i, tuple(spans)) for i, spans in absorbed[0].items())),
            tuple(absorbed[1]), hidden.fingerprint())
    key = (id(lines), len(lines), window_from, view)
    hit = _zone_memo.get(key)
    if hit is not None and hit[0] is lines:
        return hit[1]
    if len(_zone_memo) >= ZONE_MEMO:
        _zone_memo.clear()
    worth = _line_worth(lines, view, vocabulary, absorbed, hidden)
    result = _merged(lines, worth, window_from)
    _zone_memo[key] = (lines, result)
    return result


ZONE_VIEWS = 32  # state views whose per-line worth is kept
_Worth = tuple[str, int, str, tuple[str, ...]]  # tier, overlap with the vocabulary, masked text, open values
_worth_memo: dict[tuple[Any, ...], tuple[list[SummaryLine], list[_Worth | None]]] = {}


def _line_worth(lines: list[SummaryLine], view: tuple[Any, ...], vocabulary: set[str],
                absorbed: tuple[dict[int, list[tuple[int, int]]], list[str]],
                hidden: Hidden) -> list[_Worth | None]:
    """Per line: (tier, overlap with the vocabulary, masked text, open values), or None for a
    note too far from the action to show; reusing the answers for the lines seen before under this view."""
    known = _worth_memo.get(view)
    done: list[_Worth | None] = []
    if known is not None:
        before, worth = known
        n = len(before)
        if n <= len(lines) and (n == 0 or lines[n - 1] is before[-1]) and all(a is b for a, b in zip(lines[:n:64], before[::64])):
            done = worth
    out = list(done)
    for line in lines[len(done):]:
        rank = line.kind
        spans = open_spans(line, absorbed) if rank != NOTE else ()
        # A cued fact that also carries values ("allergic to nuts, budget 2000") stays a fact:
        # the state absorbing its number says nothing about the allergy.
        if rank != NOTE and not (line.cued and line.spans) and (not spans if line.spans else is_covered(line, absorbed)):
            rank = NOTE
        overlap = len(words(line.text) & vocabulary) if rank == NOTE else 0
        text = mask(line, hidden)
        shown = tuple(v for v in spans if v in text.lower())  # a masked value is not there to repeat
        out.append(None if rank == NOTE and overlap < 2 else (rank, overlap, text, shown))
    if len(_worth_memo) >= ZONE_VIEWS and view not in _worth_memo:
        _worth_memo.clear()
    _worth_memo[view] = (lines, out)
    return out


def _merged(lines: list[SummaryLine], worth: list[_Worth | None], window_from: int) -> list[ZoneLine]:
    merged: dict[str, list[Any]] = {}
    for line, w in zip(lines, worth):
        if w is None:
            continue
        rank, _, text, spans = w
        stage = -1 if line.round < window_from else stage_of(line.round)
        if stage == -1 and (rank == NOTE or (line.role != "user" and line.round < window_from - REPLY_ROUNDS)):
            continue  # the session summary keeps no notes, and only the latest replies
        entry = merged.get(text)
        if entry is None:
            merged[text] = [line.round, [line.index], rank, stage, line.role, spans]
        else:
            entry[1].append(line.index)
            if _RANKS.index(rank) > _RANKS.index(entry[2]):
                entry[2] = rank
            if line.role == "user":
                entry[4] = "user"
    # Newest first: a value line whose open values a newer line (or fact) already shows is left out.
    said: set[str] = set()
    out: list[ZoneLine] = []
    for text, (rnd, src, rank, stage, role, spans) in sorted(merged.items(), key=lambda kv: -kv[1][1][-1]):
        if rank == VALUE and spans and said.issuperset(spans):
            continue
        said.update(spans)
        out.append(ZoneLine(text, rnd, tuple(src), rank, stage, role, spans))
    return sorted(out, key=lambda z: (z.round, z.sources))


_RANKS = (NOTE, VALUE, FACT)


RELATION_SEED = 2.0  # the weight a relation field's value brings into the graph
RELATION_DAMPING = 0.5  # the share of a node's relation weight passed to its links, per step
RELATION_STEPS = 3


def relation_weights(links: dict[str, set[str]], seeds: set[str]) -> dict[str, float]:
    """Weight seeded on relation values, propagated along links (personalised PageRank, a few
    steps): a node gains DAMPING of each neighbour's weight, shared among that neighbour's links."""
    seed = {n: RELATION_SEED for n in seeds if n in links}
    weight = dict(seed)
    for _ in range(RELATION_STEPS):
        weight = {n: seed.get(n, 0.0) + RELATION_DAMPING * sum(weight.get(m, 0.0) / len(links[m]) for m in links[n])
                  for n in links}
    return {n: round(w, 3) for n, w in weight.items() if w}


def entity_graph(texts: list[str], known_values: list[str], relations: Iterable[str] = ()) -> list[Entity]:
    """Identifiers and known values, weighted by mentions and co-mentions plus the weight the
    values of relation fields (`relations`) propagate along links; the top nodes."""
    seeds = {r for r in relations if r}
    mentions: dict[str, int] = {}
    links: dict[str, set[str]] = {}
    for text in texts:
        found = set(ID.findall(text)) | {v for v in [*known_values, *seeds] if v and v in text}
        for name in found:
            mentions[name] = mentions.get(name, 0) + 1
            links.setdefault(name, set()).update(found - {name})
    boost = relation_weights(links, seeds) if seeds else {}
    nodes = [Entity(n, mentions[n], tuple(sorted(links[n])), boost.get(n, 0.0)) for n in mentions]
    # A node mentioned once and linked to nothing carries no relation worth the tokens.
    nodes = [e for e in nodes if e.weight >= MIN_WEIGHT]
    return sorted(nodes, key=lambda e: (-e.weight, e.name))[:TOP_ENTITIES]


_SHOWN_LINE = re.compile(r"^\s*(?P<src>m\d+(?: m\d+)?)(?: ×(?P<times>\d+))? (?P<role>\w+)(?: \((?P<reason>\w+)\))?: (?P<text>.*)$")


def shown_lines(summary: Any) -> list[dict[str, str]]:
    """The lines a rendered `<summary>` element shows (an ElementTree element of the context's
    XML): {"src": "m7" or "m3 m9", "role", "text", and "times", "reason" when given}, in order.
    The inverse of the template's one-text-line-per-line form, for tools and tests."""
    out = []
    for level in summary.iter() if summary is not None else ():
        if level.tag not in ("session", "stage"):
            continue
        for raw in (level.text or "").splitlines():
            m = _SHOWN_LINE.match(raw)
            if m:
                out.append({k: v for k, v in m.groupdict().items() if v is not None})
    return out
