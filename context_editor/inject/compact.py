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

import hashlib
import re
from array import array
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from ..model import ROLES, State, extended, pack_ints, unpack_ints
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
    domains: tuple[str, ...] = ()  # the domains its message speaks for, as the app said (empty: all)

    def to_dict(self) -> dict[str, Any]:
        out = {"t": self.text, "r": self.round, "i": self.index, "o": self.role, "k": self.kind,
               "s": self.start, "v": [list(s) for s in self.spans], "c": self.cued}
        return {**out, "d": list(self.domains)} if self.domains else out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SummaryLine:
        # Its fields set in one step, as the generated __init__ would set them one by one (frozen:
        # one object.__setattr__ call each): a reopen reads every line of the latest stages.
        line = object.__new__(cls)
        domains = d.get("d")
        line.__dict__.update(text=d["t"], round=d["r"], index=d["i"], role=d["o"], kind=d["k"], start=d["s"],
                             spans=tuple([(a, b) for a, b in d["v"]]), cued=d["c"], domains=tuple(domains) if domains else ())
        return line


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


Spans = Sequence[tuple[int, int]]
Absorbed = tuple[Mapping[int, Spans], list[str]]  # provenance spans by message, present value texts


class Provenances(Mapping[int, tuple[tuple[int, int], ...]]):
    """Provenance spans of accepted values by message index, as read off one live state.
    `journal`: the message indices in the order spans were added to that state (one list shared
    by every read of it); `version`: how many of them this read holds. Two reads of one state
    differ exactly at journal[v1:v2], so the summary zone re-scores only those messages' lines.

    The spans a capped state holds in compact form only (`Earlier`: thousands in a reopened long
    session, all of messages up to `floor`) are not in `spans`: they are added in when a read
    first needs them, once per state (`_Fold.early`), since a reopened session's render reads only
    its latest messages'. `get` answers those without making the whole mapping; everything else
    reads `whole()` (a message's spans may then be listed in another order: every reader treats
    them as a set)."""

    __slots__ = ("spans", "journal", "version", "_fold", "_pending", "_floor", "_whole")

    def __init__(self, spans: dict[int, tuple[tuple[int, int], ...]], journal: list[int] | None = None,
                 version: int = 0, fold: _Fold | None = None) -> None:
        self.spans, self.journal, self.version = spans, journal, version
        self._fold = fold  # the state's fold, whose compact-form spans `spans` does not hold
        self._pending = len(fold.pending) if fold is not None else 0  # how many compact-form arrays this read holds
        self._floor = fold.floor if fold is not None else -1  # the last message they name
        self._whole: dict[int, tuple[tuple[int, int], ...]] | None = None

    def get(self, index: int, default: Any = None) -> Any:
        got = self.spans.get(index, default)
        if index > self._floor or self._fold is None:
            return got
        early = self._fold.early(self._pending).get(index)
        return got if early is None else early if got is default else early + got

    def whole(self) -> dict[int, tuple[tuple[int, int], ...]]:
        """Every message's spans, the compact-form ones added in (made once per read)."""
        if self._fold is None:
            return self.spans
        if self._whole is None:
            whole = dict(self._fold.early(self._pending))
            for index, spans in self.spans.items():
                whole[index] = whole[index] + spans if index in whole else spans
            self._whole = whole
        return self._whole

    def __getitem__(self, index: int) -> tuple[tuple[int, int], ...]:
        return self.whole()[index]

    def __iter__(self) -> Iterator[int]:
        return iter(self.whole())

    def __len__(self) -> int:
        return len(self.whole())

    def __repr__(self) -> str:
        return repr(self.whole())


@dataclass
class _Fold:
    """covered_spans of one live state, caught up edit by edit (a state's field histories only grow)."""

    state: State
    seen: dict[str, tuple[Any, int]]  # field -> (its FieldState, history entries read, dropped ones included)
    by_message: dict[int, tuple[tuple[int, int], ...]]
    journal: list[int]
    pending: list[Sequence[int]] = field(default_factory=list)  # compact-form spans, as first read (`Provenances`)
    floor: int = -1  # the last message they name
    _early: tuple[int, dict[int, tuple[tuple[int, int], ...]]] | None = None

    def early(self, count: int) -> dict[int, tuple[tuple[int, int], ...]]:
        """The spans of the first `count` compact-form arrays by message, made at the first read
        that needs them (again only if a field first read later brought another array)."""
        if self._early is None or self._early[0] != count:
            early: dict[int, tuple[tuple[int, int], ...]] = {}
            for flat in self.pending[:count]:
                _earlier(flat, early)
            self._early = (count, early)
        return self._early[1]


FOLDS = 64  # live states whose absorbed spans are kept up to date
_folds: dict[int, _Fold] = {}


def covered_spans(state: State) -> Absorbed:
    """What the state has absorbed: provenance spans of accepted values (by message index) and
    the present values' texts (lowercased), so a line whose value-like spans are all there can give way.
    Incremental: the spans of a state seen before are caught up with the history entries added since."""
    fold = _folds.get(id(state))
    if fold is None or fold.state is not state or any(
            name not in state.fields or state.fields[name] is not fs or state.fields[name].entries < n
            or n < state.fields[name].entries - len(state.fields[name].history)  # dropped from memory unread
            for name, (fs, n) in fold.seen.items()):
        if len(_folds) >= FOLDS:
            _folds.pop(next(iter(_folds)))
        fold = _folds[id(state)] = _Fold(state, {}, {}, [])
    texts: list[str] = []
    for name, fs in state.fields.items():
        got = fold.seen.get(name)
        dropped = fs.entries - len(fs.history)
        if got is None and fs.earlier is not None and fs.earlier.accepted:  # entries held in compact form only
            flat = fs.earlier.accepted[:]  # (as they are now: more are added as the state drops entries)
            fold.pending.append(flat)
            fold.journal.extend(flat[0::3])
            fold.floor = max(fold.floor, max(flat[0::3]))
        read = got[1] if got is not None else dropped
        # Every accepted value counts, superseded ones too: the state took that sentence in and
        # has moved on (a change of mind is not a fact to keep repeating).
        for h in fs.history[read - dropped:]:
            if h.status == "accepted" and h.provenance is not None:
                index = h.provenance.message_index
                fold.by_message[index] = fold.by_message.get(index, ()) + (h.provenance.span,)
                fold.journal.append(index)
        fold.seen[name] = (fs, fs.entries)
        if fs.present:
            texts.extend(str(v).lower() for v in leaves(fs.value))
    return Provenances(dict(fold.by_message), fold.journal, len(fold.journal), fold if fold.pending else None), texts


def _earlier(flat: Sequence[int], by_message: dict[int, tuple[tuple[int, int], ...]]) -> None:
    """Add the (message, start, end) triples a capped state holds in compact form. A reopened
    long session holds thousands, one per message unless a field took two values from one: then
    they are made in one pass in C (no Python loop, no tuple made twice), else one by one."""
    indices = flat[0::3]
    spans: dict[int, tuple[tuple[int, int], ...]] = dict(zip(indices, zip(zip(flat[1::3], flat[2::3]))))
    if len(spans) == len(indices):
        for index in spans.keys() & by_message.keys():  # (few: a message that gave other fields values too)
            spans[index] = by_message[index] + spans[index]
        by_message.update(spans)
        return
    for index, a, b in zip(indices, flat[1::3], flat[2::3]):
        by_message[index] = by_message.get(index, ()) + ((a, b),)


def leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from leaves(v)
    elif value is not None:
        yield value


def is_covered(line: SummaryLine, absorbed: Absorbed) -> bool:
    """True when the state holds what the line carries: every value-like span is a state value
    or lies inside the provenance span of one; a cue-only fact is covered when its sentence is
    the source of a present value."""
    if not line.spans:
        spans, start = absorbed[0].get(line.index, ()), line.start
        return start >= 0 and any(p0 < start + len(line.text) and start < p1 for p0, p1 in spans)
    return not open_spans(line, absorbed)


def open_spans(line: SummaryLine, absorbed: Absorbed, exact: bool = False) -> tuple[str, ...]:
    """The line's value-like spans (lowercased) that are neither a state value nor inside the
    provenance span of one. `exact`: a short one counts as a state value when it is one whole
    ("4" said again of a party of 4; a minimal context, inject/minimal.py)."""
    provenance, texts = absorbed
    spans = provenance.get(line.index, ())
    start = line.start

    def in_provenance(a: int, b: int) -> bool:
        return start >= 0 and any(p0 <= start + a and start + b <= p1 for p0, p1 in spans)

    out = []
    for a, b in line.spans:
        piece = line.text[a:b].lower()
        # Short numbers ("6") match too much by text ("6 travellers" is not "6 years old"):
        # they count as absorbed only through provenance.
        if not in_provenance(a, b) and not (len(piece) >= 3 and any(piece in t for t in texts)) \
                and not (exact and piece in texts):
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


NOTE_OVERLAP = 2  # words a note must share with the action's vocabulary to be about it

ZONE_MEMO = 256  # zone_lines results kept (a session's renders between two of its messages reuse one)
_zone_memo: dict[tuple[Any, ...], tuple[list[SummaryLine], list[ZoneLine]]] = {}
_interned: dict[Any, Any] = {}


def zone_lines(lines: list[SummaryLine], window_from: int, vocabulary: set[str], absorbed: Absorbed,
               hidden: Hidden, minimal: bool = False, view: tuple[Any, ...] | None = None) -> list[ZoneLine]:
    """The lines this action's context may show, in order, each with its budget tier.

    Every line must carry something the state does not hold. Lines older than `window_from`
    roll up into the session summary: the user's facts, and sentences with values the state has
    not absorbed — the user's from the whole session, the assistant's and tools' from the last
    REPLY_ROUNDS rounds before the window (a window of recent turns forgets them too; what the
    user took from them is in the state, through offers and answers). A value line whose open
    values a newer line repeats says nothing more and is left out. Lines inside the loaded window
    are shown per stage, notes included when they touch the action's vocabulary. A fact or a
    value the state absorbed becomes a note (it is in <state> already), and the session summary
    keeps no notes. Identical texts are merged, keeping every source. `minimal` (an action that
    shows each value once, inject/minimal.py): a cued fact whose values the state all holds is a
    note too ("I need a table for 2 at 7pm" once the party size and time are in the state).

    Remembered at two levels. The whole answer, per lines list (the summary zone hands the same
    list object until a message arrives) and inputs: a repeated render reuses it. And, per
    session and state view (vocabulary, present values, hidden values), what each line is worth
    and the merged lines of the settled past (`_Scored`): a message that arrives re-scores only
    its own lines and those of the messages it gave provenance to, so a render after it costs
    work in proportion to the change, not to the session's length. `view`: `view_key` of these
    inputs, when the caller keeps it (a renderer keeps one per state view)."""
    if not lines:
        return []
    journal, version = _journal(absorbed)
    view = view if view is not None else view_key(vocabulary, absorbed, hidden, minimal)
    key = (id(lines), len(lines), window_from, view, version)
    hit = _zone_memo.get(key)
    if hit is not None and hit[0] is lines:
        return hit[1]
    if len(_zone_memo) >= ZONE_MEMO:
        _zone_memo.clear()
    scored = _scored(lines, view, journal, version, vocabulary, absorbed, hidden, minimal)
    result = scored.merged(lines, window_from)
    _zone_memo[key] = (lines, result)
    return result


def _journal(absorbed: Absorbed) -> tuple[list[int] | None, int]:
    provenance = absorbed[0]
    return (provenance.journal, provenance.version) if isinstance(provenance, Provenances) else (None, 0)


def view_key(vocabulary: set[str], absorbed: Absorbed, hidden: Hidden, minimal: bool = False) -> tuple[Any, ...]:
    """The memo key of a state view: the state's journal (a live state's spans) or the spans
    themselves, the vocabulary, the present values and everything hidden (and whether the action
    is minimal: it scores cued facts otherwise). A renderer makes it once per view and hands it
    on (`Renderer.zone_key`): it holds the view's texts, so it is kept only as long as the view."""
    provenance, texts = absorbed
    journal = _journal(absorbed)[0]
    # One object per distinct vocabulary and hidden set: the memos below hold many keys (one per
    # session and state) of few of them, and a vocabulary can be large.
    if len(_interned) >= ZONE_MEMO:
        _interned.clear()
    words_key, hidden_key = (_interned.setdefault(k, k) for k in (frozenset(vocabulary), (hidden.fingerprint(), minimal)))
    if journal is None:  # not read off a live state (several domains' spans joined): keyed by content
        return (words_key, tuple(sorted((i, tuple(v)) for i, v in provenance.items())), tuple(texts), hidden_key)
    return (id(journal), words_key, tuple(texts), hidden_key)


ZONE_VIEWS = 32  # (session, state view) pairs whose line worth and settled past are kept
_Worth = tuple[str, int, str, tuple[str, ...]]  # tier, overlap with the vocabulary, masked text, open values
_UNSCORED: _Worth = ("", 0, "", ())  # a line not scored yet (told apart by identity)
_scores: dict[tuple[Any, ...], _Scored] = {}
_latest: _Scored | None = None  # the view scored last (`past_of` right after a render finds it without a key)


def _scored(lines: list[SummaryLine], view: tuple[Any, ...], journal: list[int] | None, version: int,
            vocabulary: set[str], absorbed: Absorbed, hidden: Hidden, minimal: bool = False) -> _Scored:
    """The view's scored lines brought up to `lines` and `version`: the lines seen before keep
    their worth unless their message's provenance changed since; new lines are scored when a
    render first needs them (`_Scored.worth`)."""
    known = _scores.get(view)
    if known is not None and known.journal is journal and not known.follows(lines, version):
        known = None
    if known is None:
        if len(_scores) >= ZONE_VIEWS:
            _scores.clear()
        known = _scores[view] = _Scored(journal, [], [], version, (vocabulary, absorbed, hidden, minimal))
    changed = set(journal[known.version:version]) if journal is not None else set()
    scores = known.scores
    if changed:  # provenance given to messages already scored (e.g. a backfill): score their lines again
        oldest = min(changed)
        pos = len(scores)  # the lines scored so far
        while pos and known.lines[pos - 1].index >= oldest:
            pos -= 1
            if known.lines[pos].index in changed:
                scores[pos] = _UNSCORED
        if known.past is not None and pos < known.past.count:
            known.past = None
    scores.extend([_UNSCORED] * (len(lines) - len(scores)))
    known.lines, known.version, known.inputs = lines, version, (vocabulary, absorbed, hidden, minimal)
    global _latest
    _latest = known
    return known


def _line_worth(line: SummaryLine, vocabulary: set[str], absorbed: Absorbed, hidden: Hidden,
                minimal: bool = False) -> _Worth | None:
    """(tier, overlap with the vocabulary, masked text, open values), or None for a note too far
    from the action to show."""
    rank = line.kind
    spans = open_spans(line, absorbed, minimal) if rank != NOTE else ()
    # A cued fact that also carries values ("allergic to nuts, budget 2000") stays a fact:
    # the state absorbing its number says nothing about the allergy (unless the action shows
    # each value once: then the values say what it is about).
    if rank != NOTE and not (line.cued and line.spans and not minimal) and (not spans if line.spans else is_covered(line, absorbed)):
        rank = NOTE
    overlap = len(words(line.text) & vocabulary) if rank == NOTE else 0
    text = mask(line, hidden)
    shown = tuple(v for v in spans if v in text.lower())  # a masked value is not there to repeat
    return None if rank == NOTE and overlap < NOTE_OVERLAP else (rank, overlap, text, shown)


@dataclass
class _Past:
    """The merged lines of rounds before `before` (all rolled up into the session summary, where
    only the user's facts and values stay), kept as lines are added: with each group's `residual`,
    its open values no newer group of the past repeats. Such a group is left out of a render
    exactly when the newer lines of that render show every value of its residual (`_Scored.merged`)."""

    before: int
    count: int = 0  # lines folded in (the first `count` lines: those of rounds < before)
    groups: dict[str, list[Any]] = field(default_factory=dict)  # text -> [round, sources (array), rank, first position, values]
    shown: list[tuple[tuple[Any, ...], ZoneLine, frozenset[str] | None]] | None = None  # (order, line, residual)
    # The messages whose lines were scored (`past_fingerprint`), in order, each once: lines are
    # folded in message order. An array, as a stored past's row holds it (read back without a
    # set of thousands of ints made at each reopen).
    reads: array[int] = field(default_factory=lambda: array("q"))
    tuples: dict[str, tuple[int, ...]] = field(default_factory=dict)  # text -> its group's sources (`sources`)

    def sources(self, text: str) -> tuple[int, ...]:
        """A group's sources as a tuple, made once while no line is folded in: a sentence said all
        through a long session has thousands, and every render merges newer lines onto them."""
        known = self.tuples.get(text)
        if known is None:
            known = self.tuples[text] = tuple(self.groups[text][1])
        return known

    def fold(self, lines: list[SummaryLine], scored: _Scored) -> None:
        pos = self.count
        while pos < len(lines) and lines[pos].round < self.before:
            # Only the user's facts and values stay here (a note's worth is never more than a
            # note): the other lines are not even scored.
            line = lines[pos]
            w = scored.worth(pos) if line.role == "user" and line.kind != NOTE else None
            if line.role == "user" and line.kind != NOTE and (not self.reads or self.reads[-1] != line.index):
                self.reads = extended(self.reads, (line.index,))
            if w is not None and w[0] != NOTE:
                entry = self.groups.get(w[2])
                if entry is None:
                    self.groups[w[2]] = [line.round, array("q", (line.index,)), w[0], pos, w[3]]
                else:
                    entry[1] = extended(entry[1], (line.index,))
                    if _RANKS[w[0]] > _RANKS[entry[2]]:
                        entry[2] = w[0]
            pos += 1
        if pos != self.count:
            self.count, self.shown, self.tuples = pos, None, {}

    def lines(self) -> list[tuple[tuple[Any, ...], ZoneLine, frozenset[str] | None]]:
        if self.shown is None:
            said: set[str] = set()
            shown = []
            for text, (rnd, src, rank, first, spans) in sorted(self.groups.items(), key=lambda kv: (-kv[1][1][-1], kv[1][3])):
                residual = frozenset(spans) - said if rank == VALUE and spans else None
                said.update(spans)
                if residual is None or residual:  # an empty residual: a newer line of the past repeats it all
                    sources = self.sources(text)
                    shown.append(((rnd, sources, first), ZoneLine(text, rnd, sources, rank, -1, "user", spans), residual))
            self.shown = sorted(shown, key=lambda s: s[0])
        return self.shown


@dataclass
class _Scored:
    """One session's summary lines scored under one state view, caught up as lines arrive."""

    journal: list[int] | None
    lines: list[SummaryLine]
    scores: list[_Worth | None]  # per line: its worth, None (a note too far from the action) or _UNSCORED
    version: int
    inputs: tuple[set[str], Absorbed, Hidden, bool]  # what the lines are scored with (this view, at `version`)
    past: _Past | None = None

    def worth(self, pos: int) -> _Worth | None:
        """The worth of the line at `pos`, scored now if it was not yet."""
        w = self.scores[pos]
        if w is _UNSCORED:
            w = self.scores[pos] = _line_worth(self.lines[pos], *self.inputs)
        return w

    def follows(self, lines: list[SummaryLine], version: int) -> bool:
        """Whether `lines` extend the lines scored (the same objects first) at a version not older.
        The lines scored are the first len(scores) of `self.lines` (the zone's list grows in place)."""
        n = len(self.scores)
        if version < self.version or n > len(lines):
            return False
        return lines is self.lines or (n == 0 or lines[n - 1] is self.lines[n - 1]) \
            and all(a is b for a, b in zip(lines[:n:64], self.lines[:n:64]))

    def merged(self, lines: list[SummaryLine], window_from: int) -> list[ZoneLine]:
        """The zone's lines for a window from `window_from`: the settled past (rounds more than
        REPLY_ROUNDS before the window, from the last stage boundary back) merged once and kept,
        the rest merged here; the same lines, in the same order, as merging all of them here."""
        before = past_before(window_from)
        if self.past is not None and self.past.before > before:
            self.past = None
        if self.past is None:
            self.past = _Past(before)
        self.past.before = before
        self.past.fold(lines, self)
        return _merged(lines, self, window_from, self.past)


def _merged(lines: list[SummaryLine], scored: _Scored, window_from: int, past: _Past) -> list[ZoneLine]:
    merged: dict[str, list[Any]] = {}
    horizon = window_from - REPLY_ROUNDS
    scores, groups = scored.scores, past.groups  # (this runs over every line since the settled past, per render)
    for pos in range(past.count, len(lines)):
        line = lines[pos]
        rnd = line.round
        # The session summary keeps no notes, and only the latest replies: left out below
        # whatever its worth (not scored), or for the note its worth makes it.
        summary = rnd < window_from
        if summary and (line.kind == NOTE or (line.role != "user" and rnd < horizon)):
            continue
        w = scores[pos]
        if w is _UNSCORED:
            w = scored.worth(pos)
        if w is None:
            continue
        rank, _, text, spans = w
        if summary and rank == NOTE:
            continue
        entry = merged.get(text)
        if entry is None:
            old = groups.get(text)  # said in the past too: the group goes on from there
            # [round, new sources, rank, stage, role, values, first position, the past's sources]
            if old is None:
                merged[text] = [rnd, [line.index], rank, -1 if summary else stage_of(rnd), line.role, spans, pos, ()]
                continue
            entry = merged[text] = [old[0], [line.index], old[2], -1, "user", old[4], old[3], past.sources(text)]
        else:
            entry[1].append(line.index)
        if _RANKS[rank] > _RANKS[entry[2]]:
            entry[2] = rank
        if line.role == "user":
            entry[4] = "user"
    # Newest first: a value line whose open values a newer line (or fact) already shows is left out.
    said: set[str] = set()
    out: list[tuple[tuple[Any, ...], ZoneLine]] = []
    for text, (rnd, new, rank, stage, role, spans, first, before) in sorted(merged.items(),
                                                                          key=lambda kv: (-kv[1][1][-1], kv[1][6])):
        if rank == VALUE and spans and said.issuperset(spans):
            continue
        said.update(spans)
        src = before + tuple(new)
        out.append(((rnd, src, first), ZoneLine(text, rnd, src, rank, stage, role, spans)))
    # The past's lines, newer ones now included: what a newer line repeats is left out the same way.
    out += [(order, line) for order, line, residual in past.lines()
            if line.text not in merged and (residual is None or not residual <= said)]
    return [line for _, line in sorted(out, key=lambda o: o[0])]


_RANKS = {NOTE: 0, VALUE: 1, FACT: 2}  # a group's rank is the highest of its lines


def window_start(round_: int, recent_rounds: int, history_rounds: int) -> int:
    """The first round of an action's loaded window at `round_`: its recent rounds, then its
    history rounds before them (may be negative early in a session: nothing lies before 0)."""
    return round_ - recent_rounds - history_rounds + 1


def past_before(window_from: int) -> int:
    """The first round after the settled past of a window from `window_from` (0: no past)."""
    horizon = window_from - REPLY_ROUNDS
    return stage_of(horizon) * STAGE_ROUNDS + 1 if horizon >= 1 else 0


# ---------------------------------------------------------------- the settled past, stored
# A long session's settled past is most of its lines; a process that reopens it need not read
# and score them again when the past it stored for the same view still holds (memory.past).


class Unloaded(LookupError):
    """A render read a summary line its zone did not load (the zone of a reopened session holds
    only its latest stages, the stored settled past standing for the older ones)."""


class _Unloaded:
    """Stands for a line that was not loaded: reading anything of it raises Unloaded."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        raise Unloaded(name)


UNLOADED: Any = _Unloaded()


def past_of(lines: list[SummaryLine], vocabulary: set[str], absorbed: Absorbed, hidden: Hidden,
            view: tuple[Any, ...] | None = None) -> _Past | None:
    """The settled past the last `zone_lines` call on these lines and this live state's view kept
    (`view`: its `view_key`, when the caller keeps it)."""
    known = _latest
    if known is None or known.lines is not lines or known.inputs[1] is not absorbed or known.inputs[2] is not hidden \
            or known.inputs[0] is not vocabulary:
        known = _scores.get(view if view is not None else view_key(vocabulary, absorbed, hidden))
    journal = _journal(absorbed)[0]
    if journal is None or known is None or known.journal is not journal or known.lines is not lines:
        return None
    return known.past


def past_ready(lines: list[SummaryLine], window_from: int, vocabulary: set[str], absorbed: Absorbed,
               hidden: Hidden, view: tuple[Any, ...] | None = None) -> bool:
    """Whether a `zone_lines` call would go on from a kept settled past (it reads no line before it)."""
    known = _scores.get(view if view is not None else view_key(vocabulary, absorbed, hidden))
    journal, version = _journal(absorbed)
    return journal is not None and known is not None and known.journal is journal and known.past is not None \
        and known.follows(lines, version) and known.past.before == past_before(window_from) \
        and not set(journal[known.version:version])


PAST_FORMAT = 3  # bump when what a past holds, or how lines are scored, changes: stored ones go stale


def past_spans(absorbed: Absorbed, hidden: Hidden, reads: Iterable[int]) -> str:
    """A digest of the provenance and hidden spans of the messages whose lines a settled past
    scored (`reads`): the part of its fingerprint that grows with the session. Spans are only
    ever added to a message, so it stays the same while no edit gives one to a read message
    (a stored past keeps it, `memory.past.kept_spans`)."""
    order = sorted(reads)

    def of(spans: Mapping[int, Any]) -> list[Any]:
        # A state folded another way (from a snapshot) may list one message's spans in another order.
        return [(i, v if len(v) < 2 else sorted(map(tuple, v))) for i in order if (v := spans.get(i))]

    return hashlib.blake2b(repr([order, of(absorbed[0]), of(hidden.spans)]).encode("utf-8"), digest_size=16).hexdigest()


def past_fingerprint(absorbed: Absorbed, hidden: Hidden, spans: str, salt: str) -> str:
    """A digest of everything the scoring of a settled past read: the present values, everything
    hidden, and (`spans`, from `past_spans`) the provenance and hidden spans of the messages whose
    lines it scored; `salt` names the rest (domain version, action, bounds)."""
    parts: list[Any] = [PAST_FORMAT, salt, sorted(absorbed[1]), spans]
    for f in fields(hidden):  # every field, so one added later is never left out
        value = getattr(hidden, f.name)
        if f.name != "spans":
            parts.append(sorted(map(repr, value.items())) if isinstance(value, dict) else sorted(map(repr, value)))
    return hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=16).hexdigest()


def past_body(past: _Past) -> dict[str, Any]:
    """The stored form of a settled past (`seed_past` reads it back)."""
    # Sources packed as the reads are (format 3): a long session's groups hold thousands.
    return {"before": past.before, "count": past.count, "reads": pack_ints(past.reads),
            "groups": [[text, entry[0], pack_ints(entry[1]), *entry[2:4], list(entry[4])] for text, entry in past.groups.items()]}


def seed_past(lines: list[SummaryLine], window_from: int, vocabulary: set[str], absorbed: Absorbed, hidden: Hidden,
              body: Mapping[str, Any], reads: array[int]) -> bool:
    """Let the next `zone_lines` call on these lines and this live state's view go on from a
    stored settled past (the caller checked its fingerprint, and read its `reads`). False when it
    does not fit."""
    journal, version = _journal(absorbed)
    before, count = body.get("before"), body.get("count")
    if journal is None or before != past_before(window_from) or not isinstance(count, int) or not 0 <= count <= len(lines):
        return False
    try:
        groups = {str(text): [int(rnd), unpack_ints(src), str(rank), int(first), tuple(map(str, values))]
                  for text, rnd, src, rank, first, values in body["groups"]}
    except (KeyError, TypeError, ValueError):
        return False  # not a past this code wrote: score the lines again
    view = view_key(vocabulary, absorbed, hidden)
    if len(_scores) >= ZONE_VIEWS:
        _scores.clear()
    _scores[view] = _Scored(journal, lines, [_UNSCORED] * len(lines), version, (vocabulary, absorbed, hidden, False),
                            _Past(before, count, groups, reads=reads))
    return True


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


@lru_cache(maxsize=1 << 14)
def _ids(text: str) -> frozenset[str]:
    """The identifiers a text mentions (the same turns are read at every render of a session)."""
    return frozenset(ID.findall(text))


@lru_cache(maxsize=1 << 14)
def _found(text: str, values: tuple[str, ...]) -> frozenset[str]:
    """The identifiers and the given values a text mentions (a render asks again for the same
    turns and values after each new message)."""
    return _ids(text) | {v for v in values if v and v in text}


def forget_entities() -> None:
    """Drop the remembered identifiers of texts (after an erasure: they are keyed by the texts)."""
    _ids.cache_clear()
    _found.cache_clear()


def entity_graph(texts: list[str], known_values: list[str], relations: Iterable[str] = ()) -> list[Entity]:
    """Identifiers and known values, weighted by mentions and co-mentions plus the weight the
    values of relation fields (`relations`) propagate along links; the top nodes."""
    seeds = {r for r in relations if r}
    values = (*known_values, *seeds)
    mentions: dict[str, int] = {}
    links: dict[str, set[str]] = {}
    for text in texts:
        found = _found(text, values)
        for name in found:
            mentions[name] = mentions.get(name, 0) + 1
            links.setdefault(name, set()).update(found - {name})
    boost = relation_weights(links, seeds) if seeds else {}
    nodes = [Entity(n, mentions[n], tuple(sorted(links[n])), boost.get(n, 0.0)) for n in mentions]
    # A node mentioned once and linked to nothing carries no relation worth the tokens.
    nodes = [e for e in nodes if e.weight >= MIN_WEIGHT]
    return sorted(nodes, key=lambda e: (-e.weight, e.name))[:TOP_ENTITIES]


_SHOWN_LINE = re.compile(r"^\s*(?P<src>m\d+(?: m\d+)?)(?: ×(?P<times>\d+))? (?P<role>\w+(?::[\w.-]+)?)(?: \((?P<reason>\w+)\))?: (?P<text>.*)$")
# A minimal context's line without its number (`implied`): a message role first, as in a transcript.
_IMPLIED_LINE = re.compile(r"^\s*(?P<role>(?:" + "|".join(r for r in ROLES if r != "system")
                           + r")(?::[\w.-]+)?)(?: \((?P<reason>\w+)\))?: (?P<text>.*)$")


def implied(role_of: Callable[[int], str | None], after: int, role: str) -> int | None:
    """The message a minimal context's line without its number stands for: the first message
    after message `after` (the previous line's last source; -1 before the first line) whose role
    is the line's (`role_of`: a message index -> its role, None where it is not known; None when
    such a gap comes first). A transcript's order names its lines the same way: the context says
    "user: …" where the user's next turn follows, and "m9 user: …" only where it skips one."""
    index = after + 1
    while (known := role_of(index)) is not None:
        if known == role:
            return index
        index += 1
    return None


def shown_lines(summary: Any, role_of: Callable[[int], str | None] | None = None) -> list[dict[str, str]]:
    """The lines a rendered `<summary>` element shows (an ElementTree element of the context's
    XML), or a minimal context's turns (its `<context>` root element, where they are text between
    the elements): {"src": "m7" or "m3 m9", "role", "text", and "times", "reason" when given}, in
    order. The inverse of the templates' one-text-line-per-line form, for tools and tests (a
    turn of several lines is its first line here). A minimal context leaves a line's number out
    where the order tells it (`implied`); `role_of` (the session's message roles by index)
    names those lines' sources, which are "" without it. (A continuation line of a turn that
    itself starts like a line, "user: …", reads as one, as it would in a transcript.)"""
    out: list[dict[str, str]] = []
    if summary is not None and summary.tag == "context":
        texts = [summary.text or "", *(child.tail or "" for child in summary)]
    else:
        texts = [level.text or "" for level in (summary.iter() if summary is not None else ()) if level.tag in ("session", "stage")]
    last: int | None = -1  # the previous line's last source (None: not known, nor then the next ones)
    for text in texts:
        for raw in text.splitlines():
            m = _SHOWN_LINE.match(raw)
            if m:
                line = {k: v for k, v in m.groupdict().items() if v is not None}
            elif summary is not None and summary.tag == "context" and (m := _IMPLIED_LINE.match(raw)):
                line = {k: v for k, v in m.groupdict().items() if v is not None}
                index = implied(role_of, last, line["role"].split(":", 1)[0]) \
                    if role_of is not None and last is not None else None
                line = {"src": f"m{index}" if index is not None else "", **line}
            else:
                continue
            last = int(line["src"].split()[-1][1:]) if line["src"] else None
            out.append(line)
    return out
