"""The summary zone: an extractive, hierarchical digest of a session's whole history.

Each message, as it arrives, yields its summary lines (`lines_of`): sentences copied verbatim,
each tagged with what makes it worth keeping:
- fact: a user statement (not a question) with a preference, constraint, health or identity
  cue (word lists in `rules/<lang>/lexicon/memory.yaml`), or with a number or identifier;
- value: any sentence with a value-like span: a number, a date word, an identifier, a quoted
  string, a capitalised name;
- note: any other sentence long enough to be about something (kept for vocabulary matches).
Lines are grouped into stages of `STAGE_ROUNDS` rounds. The renderer shows the stages of the
loaded window in detail and rolls everything older up into one session summary (facts, values
the state has not absorbed, the notes nearest the action): see `inject.compact.zone_lines`.

The zone is derived data: the pipeline stores it per stage (`Store.put_derived`) as messages arrive, so
the work per message is bounded by one stage, and `rebuild` recomputes it from the log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..domain import Domain
from ..extract.enums import EnumMatcher, enum_matchers
from ..extract.prefilter import Present
from ..lang import detect_language
from ..inject.compact import FACT, NOTE, STAGE_ROUNDS, UNLOADED, VALUE, SummaryLine, stage_of
from ..inject.history import tool_text, words
from ..model import Message
from .cues import load_cues

MAX_LINE_CHARS = 240  # longer clauses are not copied (they would have to be cut)
MIN_NOTE_WORDS = 3
MAX_NOTES_PER_STAGE = 40  # notes only; facts and values are never capped
KIND = "summary"  # derived-data kind in the store
ANCHORS_KEY = -1  # the stage key that holds the goal and subtask anchors

# A sentence ends at 。！？!?；; or at a full stop followed by space and no lower-case word, unless
# the stop ends a title or an initial ("3.5", "www.x.com", "7 p.m. tomorrow", "Ms. Lindqvist" and
# "J. Smith" stay whole; "a restaurant. Is there" is two sentences). An initial is a capital letter
# no Latin letter or digit comes right before: a Chinese name may run into it ("北京工体A. Hotel酒店"
# is one hotel, though "体" is a word character and `\b` sees no edge there); "USA." and "12A." end.
# A lone letter after a letter and a stop ends an abbreviation written with stops, in either case
# ("P.f. Chang's" as "D.C. Convention Center" already was; "p.m." too).
_TITLE_STOP = (r"(?:(?<![A-Za-z0-9][A-Z])(?<=[A-Z])|(?<=(?<![A-Za-z0-9])[A-Za-z]\.[a-z])"
               r"|(?<=\b(?:Mr|Ms|Dr|St|Jr|Sr|No))|(?<=\bMrs)|(?<=\bProf))\.")
_SENTENCE = re.compile(rf"(?:[^。！？!?；;.\n]|\.(?!\s|$)|\.(?=\s+[a-z])|{_TITLE_STOP})+[。！？!?；;.]?")
_CLAUSE = re.compile(r"[^，,、]+[，,、]?")
_VALUE_SPANS = re.compile(
    r"\d[\d,.:/-]*\d|\d"  # numbers, times, dates
    r"|(?<![A-Za-z0-9-])[A-Z]{1,6}-?\d[A-Za-z0-9-]*"  # identifiers
    r"|\"[^\"\n]{1,60}\"|“[^”\n]{1,60}”|「[^」\n]{1,60}」|『[^』\n]{1,60}』"  # quoted strings
    # capitalised names inside a sentence, and the initials written before one ("J. Smith", "P.f.
    # Chang"). Not after a Chinese character: "推荐Sony WH-1000XM5" as a span changed what the
    # ecommerce sample's tight place_order render must keep (tests/test_cli.py, budget 180).
    r"|(?<=[a-z,;:] )(?:[A-Z]\.(?:[A-Za-z]\.)* )*[A-Z][a-z]+(?: [A-Z][a-z]+)*"
    r"|(?:大?[前后]|[今明昨])天|下{1,2}个?(?:周|星期|礼拜)[一二三四五六日天]|(?:周|星期|礼拜)[一二三四五六日天]"
    r"|[零一二两三四五六七八九十百千万]+(?:位|人|天|晚|元|块|岁|点|号|月|年|公斤|间)")
ANCHOR_NAMES = ("goal", "subtask")


def _value_spans(text: str, entities: Sequence[tuple[int, int]] = ()) -> tuple[tuple[int, int], ...]:
    """Value-like spans: numbers, dates, identifiers, quoted strings, capitalised names, and the
    domain's own entities (a phrase of an enum or gazetteer field: "北京方恒假日酒店" is a name
    though nothing in its script says so), given as `entities` (`_Entities.in_sentence`)."""
    spans = [m.span() for m in _VALUE_SPANS.finditer(text)]
    spans.extend(entities)
    return tuple(sorted(set(spans)))


def _entity_matchers(domain: Domain) -> list[EnumMatcher]:
    """The domain's entity matchers (its enum and gazetteer fields'): the extractor's own
    (`enums.enum_matchers`, one set per domain version), so their kept matches are shared."""
    return [m for m in enum_matchers(domain).values() if m.pattern is not None]


class _Entities:
    """The domain's entities in one message's text, found once over the whole text (the matches
    the extractor found with the same matcher are reused: `EnumMatcher.matches`) and handed to
    each sentence by position. A sentence that a match runs across (a phrase spanning a line
    break) is scanned on its own, as it would be alone; elsewhere the two agree, since a phrase's
    edges only look at letters, digits and apostrophes, and no sentence starts or ends next to one."""

    def __init__(self, domain: Domain, text: str):
        self.matchers = _entity_matchers(domain)
        self.present = Present(text)
        self.spans = sorted((a, b) for m in self.matchers for a, b, _, _ in m.matches(text, self.present))

    def in_sentence(self, sentence: str, start: int) -> list[tuple[int, int]]:
        """The entity spans inside `sentence`, which starts at `start` of the text (relative to it)."""
        end = start + len(sentence)
        inside = []
        for a, b in self.spans:
            if b <= start or a >= end:
                continue
            if a < start or b > end:  # across the sentence's edge: what the sentence alone holds
                return [(x, y) for m in self.matchers for x, y, _, _ in m.finditer(sentence, self.present)]
            inside.append((a - start, b - start))
        return inside


def _pieces(text: str) -> list[tuple[int, str]]:
    """Sentences (split further into clauses when too long to copy whole), with their offsets."""
    out: list[tuple[int, str]] = []
    for m in _SENTENCE.finditer(text):
        s = m.group(0)
        if len(s.strip()) <= MAX_LINE_CHARS:
            out.append((m.start(), s))
            continue
        out.extend((m.start() + c.start(), c.group(0)) for c in _CLAUSE.finditer(s) if len(c.group(0).strip()) <= MAX_LINE_CHARS)
    return out


def sentences(text: str) -> list[str]:
    """The sentences (or clauses of a long one) of `text`, stripped, as lines are cut from it."""
    return [p.strip() for _, p in _pieces(text[:8000]) if p.strip()]


def _is_fact(sentence: str, language: str) -> bool:
    """A cue word in a clause that does not ask something."""
    cues = load_cues(language)
    return any(cues.fact.search(c) and not cues.question.search(c) for c in _CLAUSE.findall(sentence))


def lines_of(domain: Domain, msg: Message) -> list[SummaryLine]:
    """The summary lines of one message (a pure function of the message and the domain's tool trimming)."""
    if msg.role not in ("user", "assistant", "tool"):
        return []
    tool = msg.role == "tool"
    text = tool_text(domain, msg) if tool else msg.content
    trimmed = text is not msg.content
    language = detect_language(text)
    out: list[SummaryLine] = []
    scanned = text[:8000]
    entities = _Entities(domain, scanned)
    for offset, raw in _pieces(scanned):
        sentence = raw.strip()
        if not sentence:
            continue
        at = offset + raw.index(sentence)
        start = -1 if trimmed else at
        spans = _value_spans(sentence, entities.in_sentence(sentence, at))
        cued = msg.role == "user" and _is_fact(sentence, language)
        question = load_cues(language).question.search(sentence) is not None
        if cued or (msg.role == "user" and spans and not question and len(words(sentence)) >= MIN_NOTE_WORDS):
            kind = FACT
        elif spans:
            kind = VALUE
        elif not tool and len(words(sentence)) >= MIN_NOTE_WORDS:
            kind = NOTE
        else:
            continue
        out.append(SummaryLine(sentence, msg.round, msg.index, msg.role, kind, start, spans, cued, msg.domains))
    return out


@dataclass
class Stage:
    number: int
    lines: list[SummaryLine] = field(default_factory=list)
    last_index: int = -1
    before: tuple[int, int] = (0, -1)  # the earlier stages' line count and last message index

    def add(self, new: list[SummaryLine]) -> None:
        self.lines.extend(new)
        notes = [line for line in self.lines if line.kind == NOTE]
        if len(notes) > MAX_NOTES_PER_STAGE:  # drop the oldest notes past the cap
            extra = {id(line) for line in notes[: len(notes) - MAX_NOTES_PER_STAGE]}
            self.lines = [line for line in self.lines if id(line) not in extra]

    def body(self) -> dict[str, Any]:
        return {"last_index": self.last_index, "lines": [line.to_dict() for line in self.lines], "before": list(self.before)}


@dataclass
class SummaryZone:
    """One session's summary zone: stages of lines, plus the latest goal and subtask anchors."""

    domain: Domain
    stages: dict[int, Stage] = field(default_factory=dict)
    anchors: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_index: int = -1
    _lines: tuple[tuple[int, int | None], list[SummaryLine]] | None = field(default=None, repr=False, compare=False)
    _unsaved: set[int] = field(default_factory=set, repr=False, compare=False)  # keys changed since `settled`
    # Every stage's lines in one list, grown in place while lines are only added (`_all`): the list,
    # the newest stage in it, that stage's list of lines and how many of them are in it.
    _joined: tuple[list[SummaryLine], int, list[SummaryLine], int] | None = field(default=None, repr=False, compare=False)
    # A zone loaded from its latest stages only (`latest`): the line count and last message index
    # of the stages not loaded. Their lines read as compact.UNLOADED (a stored past stands for them).
    base: tuple[int, int] = (0, -1)
    partial: bool = False

    def add(self, msg: Message) -> list[int]:
        """Fold one message in; returns the keys of what changed (for the store)."""
        if msg.index <= self.last_index:
            return []
        self.last_index = msg.index
        if msg.role == "system" and msg.name in ANCHOR_NAMES:
            self.anchors[msg.name] = {"text": msg.content, "round": msg.round, "index": msg.index}
            self._unsaved.add(ANCHORS_KEY)
            return [ANCHORS_KEY]
        number = stage_of(msg.round)
        stage = self.stages.get(number)
        if stage is None:  # the stages before it are complete: rounds only grow
            stage = self.stages[number] = Stage(number, before=self._count())
        stage.add(lines_of(self.domain, msg))
        stage.last_index = msg.index
        self._unsaved.add(number)
        return [number]

    def _count(self) -> tuple[int, int]:
        """The line count and last message index of every stage so far (`Stage.before` of the next)."""
        if not self.stages:
            return self.base
        last = self.stages[max(self.stages)]
        return last.before[0] + len(last.lines), max(last.before[1], last.last_index)

    def settled(self) -> list[int]:
        """The changed keys worth storing now: the anchors, and stages that are complete (a later
        stage has begun). The open stage is not rewritten at every message: a reload refolds it
        from the log (`resume_round`), so the store's copy lags by at most one stage."""
        newest = max(self.stages, default=None)
        keys = sorted(k for k in self._unsaved if k == ANCHORS_KEY or newest is None or k < newest)
        self._unsaved.difference_update(keys)
        return keys

    def lines(self, up_to_round: int | None = None) -> list[SummaryLine]:
        """Every line of rounds <= up_to_round, oldest first. While lines are only added, the same
        list object is handed out and grows in place: a long session's ten thousand lines are not
        copied at every message (a reader keeps the length it read, as the renderer's memos do).
        Any other change (a stage's oldest notes dropped past its cap), and a cut at `up_to_round`,
        give a new list. Do not modify it."""
        key = (self.last_index, up_to_round)
        if self._lines is None or self._lines[0] != key:
            out = self._all()
            cut = len(out)
            while up_to_round is not None and cut and out[cut - 1].round > up_to_round:  # lines are in round order
                cut -= 1
            self._lines = (key, out if cut == len(out) else out[:cut])
        return self._lines[1]

    def _all(self) -> list[SummaryLine]:
        """Every stage's lines in one list: the one joined before, extended, when the stages only
        gained lines since (rounds only grow: the newest stage joined grew, later ones began)."""
        # Stages are held in the order of their numbers (`add`, `resume` and `from_bodies` add them
        # so): the newest ones are the last keys, and a long session's hundreds are not all read.
        joined = self._joined
        if joined is not None:
            out, newest, source, taken = joined
            stage = self.stages.get(newest)
            if stage is not None and stage.lines is source and len(source) >= taken:
                out.extend(source[taken:])
                later = []
                for number in reversed(self.stages):
                    if number <= newest:
                        break
                    later.append(number)
                for number in reversed(later):
                    out.extend(self.stages[number].lines)
            else:
                joined = None
        if joined is None:
            out = [UNLOADED] * self.base[0] + [line for n in sorted(self.stages) for line in self.stages[n].lines]
        last = next(reversed(self.stages), None)
        self._joined = None if last is None else (out, last, self.stages[last].lines, len(self.stages[last].lines))
        return out

    def anchor(self, name: str, up_to_round: int | None = None) -> dict[str, Any] | None:
        a = self.anchors.get(name)
        return a if a is None or up_to_round is None or a["round"] <= up_to_round else None

    # ------------------------------------------------------------------ persistence
    def bodies(self, keys: list[int]) -> dict[int, dict[str, Any]]:
        """The stored form of the stages (and anchors) named by `keys`."""
        return {key: {"anchors": self.anchors, "last_index": self.last_index} if key == ANCHORS_KEY
                else self.stages[key].body() for key in keys}

    @classmethod
    def from_bodies(cls, domain: Domain, bodies: dict[int, dict[str, Any]], latest: bool = False) -> SummaryZone:
        """The zone from its stored stages (and anchors). `latest`: the bodies are the latest stages
        only, the first of them telling what comes before it (`Stage.before`)."""
        zone = cls(domain)
        for key in sorted(bodies):
            body = bodies[key]
            if key == ANCHORS_KEY:
                # Its last_index is not the zone's: the open stage before it may not be stored.
                zone.anchors = body["anchors"]
                continue
            if latest and not zone.stages:
                zone.base, zone.partial = (int(body["before"][0]), int(body["before"][1])), True
            zone.stages[key] = Stage(key, [SummaryLine.from_dict(d) for d in body["lines"]], body["last_index"],
                                     zone._count())
            zone.last_index = max(zone.last_index, body["last_index"])
        return zone

    def resume(self, stage: Stage) -> bool:
        """Take `stage` as the open stage, as stored with its lines so far (`memory.open_stage`), if it
        comes right after the stages held (its `before` is theirs); False, nothing changed, if not."""
        if (self.stages and stage.number <= max(self.stages)) or stage.before != self._count():
            return False
        self.stages[stage.number] = stage
        self.last_index = max(self.last_index, stage.last_index)
        self._unsaved.add(stage.number)  # stored as a complete stage once the next one begins (`settled`)
        return True

    def resume_round(self) -> int:
        """The first round whose messages may not all be folded in yet (derived data may lag
        the log after a crash between the two writes; it never runs ahead of it)."""
        return max(self.stages, default=0) * STAGE_ROUNDS

    @classmethod
    def rebuild(cls, domain: Domain, messages: list[Message]) -> SummaryZone:
        """The zone computed from scratch from the raw log (what the stored zone must equal)."""
        zone = cls(domain)
        for m in messages:
            zone.add(m)
        return zone


def extractive_line(text: str, ctx: dict[str, Any]) -> str:
    """The built-in summarizer: the first sentence of `text` that carries a value or a fact cue
    (else the first sentence), verbatim. Registered as the `extractive` summarizer."""
    language = detect_language(text)
    pieces = sentences(text)
    for sentence in pieces:
        if _value_spans(sentence) or _is_fact(sentence, language):
            return sentence
    return pieces[0] if pieces else ""
