"""The `minimal` form of an action's context: each value the action needs once.

A context that shows the state, the turn a value came from and a summary line of that turn says
the same thing three times. With `minimal: true` on an action (docs/domain-format.md#minimal):

- the state is shown as short lines (`name: value rN`), the envelope without the attributes
  that only repeat the domain file, the turns as text lines without a wrapper element;
- a turn or summary line whose value-like spans (numbers, dates, identifiers, quoted strings,
  names, the domain's enum and gazetteer phrases: `memory.summary`) the state as rendered holds
  (a present value, or the provenance span of one: `held`) or read and moved on from (a value
  the user restated, a search cleared: `moved_on`) adds nothing and is left out, and so is a
  line with no value at all; a line with a value the state does not hold stays until the
  state covers it or the budget forces it out (then it is named in `<truncated_context>`),
  reduced to its clauses with such values when it is the assistant's or a tool's, or the
  user's from before the loaded window (`open_clauses`: a digest of older turns); the lines of
  one message are one line;
- the latest user message stays verbatim; the assistant's sentences with values stay for
  REPLY_ROUNDS rounds (an offer the user takes later), and any longer while the state logged an
  offer in them that is still open; the message the user replies to stays whole while the reply
  holds a value the state did not read (the question gives it its meaning), or while the reply
  names nothing and answers a statement no value was read from (`bare`: "That would be great."
  after "The giants vs dodgers game at oracle park."); an earlier answer with no value-like span,
  from which no value was read, stays with the question it answers while it is in the loaded
  window (`answered`: "What type of film?" "A scary one.");
- a message the app said speaks for other domains (`domains` metadata) gives this context no
  lines: its values are those domains' to keep; while the whole conversation is loaded, those of
  a domain a held value was carried from speak for it too (`carried`: "a cab there" means the
  attraction the assistant named for the travel domain);
- while the whole conversation is loaded (`recent_rounds + history_rounds` reach its first
  message), the conversation as the user said it is the other candidate: every user turn
  verbatim, of the assistant's and tools' turns only the clauses holding a value-like span no
  user turn says or a present value was read from (`said_lines`: what was offered, found or
  stated; questions and pleasantries hold none; a lowercase name after a word names often follow,
  `cued`: "a restaurant called india beach", counts as such a span), the sentences of one message
  on one line, and only the state values no shown turn or clause was the source of. Both are
  counted exactly and the smaller one is sent (`render.Renderer._cheaper`).

Everything here is a choice among what the plan already holds (turns, summary lines and their
open values, fields and their provenance, the offers the state logged): nothing is extracted
or rewritten.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache
from typing import Mapping, Sequence

from ..domain import Domain
from ..domain.regexcheck import literal_values
from ..domain.versions import PerVersion
from ..lang.lexicon import Lexicon, alternation, lexicon
from ..model import FieldState, Message, Provenance, State
from . import compact, history

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


def _question(text: str) -> bool:
    """Whether `text` (a message or a sentence) ends in a question mark."""
    return text.rstrip().endswith(("?", "？"))


def bare(summaries: Sequence[Sequence[compact.SummaryLine]], reply: Sequence[Message], replied: Sequence[Unit],
         absorbed: compact.Absorbed) -> bool:
    """Whether the latest user message (of `reply`, the latest unit) is a bare reply to `replied`
    (`pending`): statements with no value-like span to any domain of the envelope (`summaries`:
    each domain's lines, scanned from the newest), and no state read a value from it or from the
    message it replies to ("That would be great." after "The giants vs dodgers game at oracle
    park.", "那就这家吧。"). What it takes or turns down is then named only in that message; an
    offer the state took ("Sure, that works." to "How about Rosie's?") is in the state."""
    users = {m.index for m in reply if m.role == "user"}
    before = [m for u in replied for m in u]
    if not users or not before or any(absorbed[0].get(m.index) for m in [*reply, *before]):
        return False
    # A question the reply answers ("Shall I book it?", "Anything else?") is the offer and asks
    # mechanisms' to read: what it offered is logged and stays while open (`open_offers`).
    if _question(before[-1].content):
        return False
    found = set()
    for summary in summaries:
        for line in reversed(summary):
            if line.index < min(users):
                break
            if line.index in users:
                if line.spans or _question(line.text):
                    return False
                found.add(line.index)
    return found == users


def answered(summaries: Sequence[Sequence[compact.SummaryLine]], messages: Sequence[Message], before: int,
             absorbed: compact.Absorbed, hidden: history.Hidden, elsewhere: set[int]) -> list[compact.ZoneLine]:
    """The user's answers no rule read, with the questions they answer, among `messages` (the
    loaded window, oldest first; `summaries`: each domain's lines, scanned from the newest): a user
    message right after an assistant message that ends in a question asking for something (its
    question sentence holds no value-like span: it offers or confirms nothing), whose sentences
    hold no value-like span to any domain and ask nothing, and no state read a value from either
    ("What type of film?" "A scary one.", "您想吃什么口味的？" "清淡一点的。"). The words say what the
    user wants and the question says what of; no field holds it, so the state form would lose both.
    Kept as facts (their turns shown verbatim hide them) while the answer is in the loaded window;
    a sentence too short to be a summary line ("Not yet.") says nothing to keep. Inject cannot tell
    a yes/no question from one that asks for a value (the cue words are extract's): the answer to
    "Should I book it?" stays too, when it is long enough to be a line. None of messages that speak
    for other domains (`elsewhere`)."""
    pairs = [(asked, reply) for asked, reply in zip(messages, messages[1:])
             if asked.role == "assistant" and reply.role == "user" and reply.index < before and _question(asked.content)
             and asked.index not in elsewhere and reply.index not in elsewhere
             and not absorbed[0].get(asked.index) and not absorbed[0].get(reply.index)]
    if not pairs:  # most renders: the summary lines are not scanned
        return []
    first = pairs[0][0].index
    by: dict[int, list[compact.SummaryLine]] = {}
    for summary in summaries:
        for line in reversed(summary):
            if line.index < first:
                break
            by.setdefault(line.index, []).append(line)
    out: list[compact.ZoneLine] = []
    for asked, reply in pairs:
        question, said = merged([by.get(asked.index, [])]), merged([by.get(reply.index, [])])
        if not question or not said or question[-1].spans or not _question(question[-1].text) \
                or any(line.spans or _question(line.text) for line in said):
            continue
        out.extend(compact.ZoneLine(compact.mask(line, hidden), line.round, (line.index,), compact.FACT,
                                    compact.stage_of(line.round), line.role) for line in [question[-1], *said])
    return out


def held(states: Sequence[State]) -> compact.Absorbed:
    """What the rendered state holds: the provenance spans of the present values and the present
    values' texts, over every state of the envelope; and the provenance spans of the values the
    state read and then moved on from (`moved_on`): the turn said nothing the state has not
    weighed. Only present values absorb by their text: a value the state let go of, said again
    elsewhere, is still open there."""
    spans = dict(taken(states))
    texts: list[str] = []
    for state in states:
        for fs in state.fields.values():
            for p in moved_on(fs):
                spans[p.message_index] = spans.get(p.message_index, ()) + (p.span,)
            if fs.present:
                texts.extend(str(v).lower() for v in compact.leaves(fs.value))
    return spans, texts


def taken(states: Sequence[State]) -> dict[int, tuple[tuple[int, int], ...]]:
    """Message index -> the spans the present values of `states` were read from (`read_at`)."""
    spans: dict[int, tuple[tuple[int, int], ...]] = {}
    for state in states:
        for fs in state.fields.values():
            index = read_at(fs)
            if fs.present and fs.provenance is not None and index >= 0:
                spans[index] = spans.get(index, ()) + (fs.provenance.span,)
    return spans


def read_at(fs: FieldState) -> int:
    """The message of this conversation a field's value was read from: its own, or for a value
    carried from another domain of the conversation (transform/carry.py: message index -1) the
    message the source read it from, the same message in every domain's session ("Vancouver, BC"
    said for the weather is the hotel's "Vancouver" too: `named` grows it to the whole name there).
    -1 for none (a user memory's message is another conversation's)."""
    p = fs.provenance
    if p is None:
        return -1
    if p.message_index >= 0:
        return p.message_index
    return p.given_from()[1] if fs.source == "carry" else -1


def moved_on(fs: FieldState) -> list[Provenance]:
    """Where the values a field took and no longer holds were read: replaced by a newer value of
    the field, or cleared (a new search, the user's no, the search relaxed). A request the user
    restated supersedes the older one, and its line goes; CrossWOZ users restate constraints
    across five domains, and each stale request kept a line. (Among the entries kept in memory:
    a capped state's oldest ones are the log's, `ContextEditor.why`.)"""
    return [h.provenance for h in fs.history
            if h.status == "accepted" and h.provenance is not None and h.provenance.message_index >= 0
            and not (fs.present and h.value == fs.value)]


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


def carried(parts: Sequence[tuple[Mapping[str, Sequence[str]], State]]) -> set[str]:
    """The domains the present values of an envelope were carried from: for each field a domain
    declares a `carry:` for (`parts`: each domain's declarations and state), the source its value
    names (provenance extractor `carry:<domain>.<field>`, transform/carry.py). "A cab there" after
    an attraction search takes the attraction's city; the place the user means is in the words of
    the conversation that domain had (the attraction the assistant named), so its messages speak
    for this context too (`foreign`) while the carried value is held and the whole conversation is
    loaded. Not once the conversation is longer than the loaded window: another domain's older
    lines then cost more than they keep (SGD dev 10-39: +7 and +20.5 tokens of the median for +0.6
    and +0.8 points)."""
    out = set()
    for carry, state in parts:
        for name, sources in carry.items():
            fs = state.fields.get(name)
            if fs is None or not fs.present or fs.source != "carry" or fs.provenance is None:
                continue
            ref = fs.provenance.extractor.partition(":")[2]
            if ref in sources:
                out.add(ref.partition(".")[0])
    return out


def foreign(summary: Sequence[compact.SummaryLine], domains: set[str]) -> set[int]:
    """The messages the app said speak for other domains than `domains` (a message's `domains`
    metadata): their values are not this context's to keep."""
    return {line.index for line in summary if line.domains and not domains.intersection(line.domains)}


def zone(lines: dict[str, list[compact.ZoneLine]], offers: Offers, since: int, elsewhere: set[int],
         user_clauses: bool = False) -> dict[str, list[compact.ZoneLine]]:
    """The summary lines a minimal context keeps: no notes (they hold no value), the user's facts
    and open values, and of the assistant's and tools' sentences with open values those of rounds
    from `since` on (what a window of as many rounds would still show) and those holding an offer
    still open; none of messages that speak for other domains (`elsewhere`). `user_clauses`: the
    user's lines of the loaded window are reduced to their clauses with open values too."""
    def offered(z: compact.ZoneLine) -> bool:
        text = z.text.lower()
        return any(t and t in text for i in z.sources for t in offers.get(i, ()))

    def own(z: compact.ZoneLine) -> bool:
        return not elsewhere.issuperset(z.sources)

    out = {"notes": [], "replies": [z for z in lines["replies"] if own(z) and (z.round >= since or offered(z))],
           "values": [z for z in lines["values"] if own(z)], "facts": [z for z in lines["facts"] if own(z) and z.open]}
    # The assistant's and tools' lines hold only their clauses with open values; the user's own
    # words too once their turn is older than the loaded window (a digest of older turns), or with
    # `user_clauses` any user line (the latest user message is a turn, verbatim): a request whose
    # values the state took is said by the state ("人均消费是1000元以上的…4.5分以上的饭店" once
    # `price_per_person` and `rating` hold them), the clause with the value it did not take stays.
    return {tier: [replace(z, text=open_clauses(z)) if tier == "replies" or z.stage < 0 or user_clauses else z
                   for z in kept] for tier, kept in out.items()}


def open_clauses(z: compact.ZoneLine) -> str:
    """A line reduced to its clauses that hold an open value ("好的，吃完饭我想找一个评分4.5分以上的，
    …，给我推荐一个吧。" keeps "吃完饭我想找一个评分4.5分以上的"): the rest of it the state holds or
    it holds no value (a digest of an older turn; the turn itself is `why mN`'s)."""
    low = z.text.lower()
    spans = [(i, i + len(v)) for v in z.open if v and (i := low.find(v)) >= 0]
    return _clauses(z.text, spans) if spans else z.text


def whole(messages: Sequence[Message]) -> bool:
    """Whether `messages` (the loaded window) hold the conversation from its first message."""
    return bool(messages) and messages[0].index == 0 and messages[0].round <= 1


def says(text: str, piece: str) -> bool:
    """Whether lowercased `text` says `piece` (lowercased) word for word: an ASCII letter or
    digit at either end of it must not continue a longer word or number there ("8" is not said
    by "8th", "3" not by "0.3"; Chinese has no word edges)."""
    left = r"(?<![a-z0-9])(?<![0-9][.,:/-])" if piece[:1].isascii() and piece[:1].isalnum() else ""
    right = r"(?![a-z0-9])(?![.,:/-][0-9])" if piece[-1:].isascii() and piece[-1:].isalnum() else ""
    return re.search(left + re.escape(piece) + right, text) is not None


def _word(c: str) -> bool:
    return c.isascii() and c.isalnum()


# The half of the day written after a time ("8:05 am", "7 p.m."): part of the time it follows.
_MERIDIEM = re.compile(r"\s?(?:[ap]\.m\.|[ap]m\b)", re.IGNORECASE)


def words_of(line: compact.SummaryLine) -> list[tuple[int, int]]:
    """The line's value-like spans grown to the whole ASCII words they are part of ("7" of "7pm" is
    "7pm", "8" of "8th" is "8th") and a time over the half of the day after it ("8:05 am" is not
    the "8:05 pm" said later): what a reader sees said, compared word for word by `says`."""
    out = []
    for a, b in line.spans:
        while a > 0 and _word(line.text[a - 1]) and _word(line.text[a]):
            a -= 1
        while b < len(line.text) and _word(line.text[b]) and _word(line.text[b - 1]):
            b += 1
        if line.text[b - 1:b].isdigit() and (half := _MERIDIEM.match(line.text, b)):
            b = half.end()
        out.append((a, b))
    return out


_LOWER_WORD = re.compile(r"\s+([a-z][a-z'&-]*)")


@lru_cache(maxsize=4)
def _naming(lex: Lexicon) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None, frozenset[str]]:
    """The `memory/name_after` words of every language, as two patterns: of the languages matched
    by whole words, and of those matched as substrings (a name of 2-12 Han characters, up to one of
    the language's `memory/name_end` words); and the stopwords no name is made of."""
    words: list[str] = []
    substrings: list[str] = []
    ends: list[str] = []
    for data in lex.per_language.values():
        memory = data.get("memory") or {}
        (words if memory.get("match", "words") == "words" else substrings).extend(str(w) for w in memory.get("name_after") or ())
        ends.extend(str(w) for w in memory.get("name_end") or ())
    return (re.compile(alternation(words, whole_words=True), re.IGNORECASE) if words else None,
            re.compile(rf"{alternation(substrings)}([\u4e00-\u9fff]{{2,12}}?){alternation(ends)}")
            if substrings and ends else None,
            frozenset(w.lower() for w in lex.words("dialogue/stopwords")))


def cued(line: compact.SummaryLine) -> list[tuple[int, int]]:
    """The lowercase names of `line` (spans relative to its text) after a word names often follow
    (`memory/name_after`: "in half moon bay", "a place called little noodle bar", "一家叫巷口面馆的店"),
    where no capital or number marks them: two or more lowercase words right after it, up to a
    stopword or anything else (one word is mostly an idiom: "in mind", "at least"); in a language
    without spaces, the characters up to the end word ("的") with no stopword among them. Not
    inside a value-like span."""
    after_word, after_sub, stop = _naming(lexicon())
    text, out = line.text, []
    for m in after_word.finditer(text) if after_word else ():
        pos, first, last, n = m.end(), -1, -1, 0
        while (w := _LOWER_WORD.match(text, pos)) is not None and w.group(1) not in stop:
            first = w.start(1) if first < 0 else first
            last, pos, n = w.end(1), w.end(), n + 1
        if n >= 2:
            out.append((first, last))
    for m in after_sub.finditer(text) if after_sub else ():
        if not any(s in m.group(1) for s in stop):
            out.append(m.span(1))
    return [(a, b) for a, b in out if not any(a < y and x < b for x, y in line.spans)]


def said_lines(summary: Sequence[compact.SummaryLine], user_text: str, hidden: history.Hidden,
               elsewhere: set[int], present: Mapping[int, compact.Spans]) -> list[compact.ZoneLine]:
    """For the conversation as the user said it: the assistant's and tools' sentences holding a
    value-like span that no user turn says (`user_text`, lowercased, as shown), or that a present
    value was read from (`present`, by message). Judged against the words, not the state: a value
    the state misread, or an offer the user took without the offer mechanism seeing it, stays in
    its sentence; a question ("What city?") or pleasantry holds no value and goes. The clause a
    present value was read from is shown in place of the value's state line (`Renderer._talk`
    leaves that out): the state may hold less of it than was said ("John MD" of "Alchemy John MD
    is a general practitioner", "Aaron Tward" of "Aaron Tward, M.D."), the words hold it all, once.
    Only the spans no user turn says are `open` (what the state form must say to compete). None
    of messages that speak for other domains (`elsewhere`)."""
    out = []
    for line in summary:
        if line.role == "user" or line.index in elsewhere:
            continue
        names = cued(line)
        if not line.spans and not names:
            continue
        read = read_in(line, present)
        unsaid = [(a, b) for a, b in words_of(line) if not says(user_text, line.text[a:b].lower())
                  and not any(p0 <= a and b <= p1 for p0, p1 in read)]
        # A lowercase name (`cued`: "what about alejandro sanz at cal coast credit union
        # amphitheater") no value was read from.
        unsaid += [(a, b) for a, b in names if not says(user_text, line.text[a:b].lower())
                   and not any(p0 < b and a < p1 for p0, p1 in read)]
        # A value read from part of a name ("John MD" of "Alchemy John MD"): the whole name is a
        # span the state form does not say.
        unsaid += [n for p in read if (n := named(line.text, *p)) != p and not says(user_text, line.text[n[0]:n[1]].lower())]
        if unsaid or read:
            # Only its clauses that hold such a span ("抱歉，…，推荐您去讲礼驴肉馆。" keeps the last);
            # whole where part of the message is hidden from this action (masked by its offsets).
            text = line.text if hidden.spans.get(line.index) else _clauses(line.text, unsaid + read)
            out.append(compact.ZoneLine(compact.mask(replace(line, text=text), hidden), line.round, (line.index,),
                                        compact.VALUE, compact.stage_of(line.round), line.role,
                                        tuple(dict.fromkeys(line.text[a:b].lower() for a, b in unsaid))))
    return out


def read_in(line: compact.SummaryLine, present: Mapping[int, compact.Spans]) -> list[tuple[int, int]]:
    """The spans of `line` (relative to its text) a present value was read from (`present`, by message)."""
    end = line.start + len(line.text)
    return [(p0 - line.start, p1 - line.start) for p0, p1 in present.get(line.index, ())
            if line.start >= 0 and line.start <= p0 and p1 <= end]


_CLAUSE = re.compile(r"[^，,；;]+[，,；;]?\s*")
# Between the words of a name: one space, or a comma, a dash, a slash or an ampersand and a space
# ("Sydney, Australia", "Access Dental - Santa Rosa", "Bayhill Dental Care / Dr. Diaz", "Paradise
# Sushi & Grill"), after a word that may end in a full stop (a title or an initial: a line is one
# sentence, so a stop followed by a space and a capital inside it is one of those,
# `memory.summary._SENTENCE`).
_JOIN = r"\.?(?:,| -| /| &)? "
_CAPITALS_BEFORE = re.compile(rf"(?:(?<![A-Za-z0-9'])[A-Z][A-Za-z]*{_JOIN})+$")
_CAPITALS_AFTER = re.compile(rf"(?:{_JOIN}[A-Z][A-Za-z]*(?![A-Za-z0-9']))+")


def named(text: str, a: int, b: int) -> tuple[int, int]:
    """The span a..b of `text` grown over the capitalised words right before and after it, one
    space or a comma, dash, slash or ampersand and a space apart (`_JOIN`): the whole name a value
    was read from part of ("Alchemy John MD" around "John MD", "Lotus Thai" around "Lotus", "推荐Golden
    Sino" around "Sino", "Sydney, Australia" around "Australia", "Anne Han, M" of "Anne Han, M.D.",
    "Access Dental - Santa Rosa" around "Access Dental", "Bayhill Dental Care / Dr. Diaz F Luisa"
    around "Bayhill Dental Care", "Paradise Sushi & Grill" around "Paradise Sushi"). Latin words
    only: a Chinese name is a span of its own."""
    before = _CAPITALS_BEFORE.search(text, 0, a)
    after = _CAPITALS_AFTER.match(text, b)
    return (before.start() if before else a, after.end() if after else b)


def _clauses(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """The clauses of `text` (cut at commas and semicolons) that overlap one of `spans`, in order;
    a clause cut off before the end leaves its comma out."""
    kept = [m.group(0) for m in _CLAUSE.finditer(text) if any(a < m.end() and m.start() < b for a, b in spans)]
    return "".join(kept).strip().rstrip("，,；;") if kept else text


def unread_user(summary: Sequence[compact.SummaryLine], absorbed: compact.Absorbed, before: int,
                elsewhere: set[int], vocabulary: set[str], values: frozenset[str]) -> tuple[str, ...]:
    """The user's sentences of messages before `before` (the latest user message) that say
    something no rule read, which the state form leaves out and the conversation form says. None
    of messages that speak for other domains (`elsewhere`).
    - A statement (not a question) with no value-like span that no value was read from (by any
      state of the envelope: `absorbed`), and that is about the action as a note must be (as
      many words of its `vocabulary`: compact.NOTE_OVERLAP): words no rule took ("I am in the
      mood for cambodian food.", "门票还是免费的。"); not pleasantries ("那太好了，帮我省钱了啊。").
      A sentence with value-like spans is said by the state form or held by `spans_of`; a
      question asks for something, its values are its spans or the answer's.
    - A sentence a value was read from that holds, outside what was read and its value-like
      spans, a word the envelope's rules read as a value (`values`: `value_words`): "免费" of
      "我想去一个免费的评分5分的景点玩2小时 - 3小时，能帮我推荐一个吗？" once the rating and the
      duration are read (no ticket rule fired: its cue is not next to it), "pasta" of "pizza and
      pasta" once "pizza" is read. A request that is a question states what it wants too."""
    out = []
    for line in summary:
        if line.role != "user" or line.index >= before or line.index in elsewhere or line.start < 0:
            continue
        read = _overlapping(line, absorbed[0].get(line.index, ()))
        if read:
            rest = _cut(line.text, [*line.spans, *read]).lower()
            if any(says(rest, v) for v in values):
                out.append(line.text)
        elif not line.spans and not _question(line.text) \
                and len(history.words(line.text) & vocabulary) >= compact.NOTE_OVERLAP:
            out.append(line.text)
    return tuple(out)


_values: PerVersion[str, frozenset[str]] = PerVersion()


def value_words(domain: Domain) -> frozenset[str]:
    """The words the rules of a domain's fields read as values word for word, whatever their cue
    (`regexcheck.literal_values`: "免费" of a ticket price, "pasta" of a cuisine, "noon" of a
    time), but the dialogue stopwords, which are values only next to their cue ("a" room, "one"
    star). Made once per domain version."""
    def made() -> frozenset[str]:
        stop = _naming(lexicon())[2]
        return frozenset(v for rules in domain.field_rules.values() for r in rules
                         for v in literal_values(r.pattern, r.groups) if v not in stop)

    return _values.get(domain.version_hash, made)


def _overlapping(line: compact.SummaryLine, spans: compact.Spans) -> list[tuple[int, int]]:
    """The parts of `spans` (message offsets) inside `line`, relative to its text."""
    end = line.start + len(line.text)
    return [(max(p0, line.start) - line.start, min(p1, end) - line.start) for p0, p1 in spans if p0 < end and line.start < p1]


def _cut(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """`text` with `spans` blanked out (spaces in their place: the words either side stay apart,
    and overlapping spans keep their offsets)."""
    for a, b in spans:
        text = text[:a] + " " * (b - a) + text[b:]
    return text


def spans_of(user: Sequence[compact.SummaryLine], said: Sequence[compact.ZoneLine],
             present: Mapping[int, compact.Spans]) -> tuple[str, ...]:
    """The value-like spans (lowercased) a form of the whole conversation must say word for word
    to lose none: those of the user's sentences, each whole name a present value was read part of
    there ("Sydney, Australia" around `Australia`: `named`), and the open ones of the assistant's
    (`said_lines`)."""
    pieces = [line.text[a:b].lower() for line in user for a, b in words_of(line)]
    names: list[str] = []
    wholes: list[str] = []
    for line in user:
        read = read_in(line, present)
        # ... its lowercase names no value was read from (`cued`: "in half moon bay"),
        names += [line.text[a:b].lower() for a, b in cued(line) if not any(p0 < b and a < p1 for p0, p1 in read)]
        wholes += [line.text[n[0]:n[1]].lower() for p in read if (n := named(line.text, *p)) != p]
    return tuple(dict.fromkeys([*pieces, *names, *wholes, *(v for z in said for v in z.open)]))


def merged(summaries: Sequence[Sequence[compact.SummaryLine]]) -> list[compact.SummaryLine]:
    """The summary lines of one conversation as the domains of an envelope cut them, one per
    sentence, with the value-like spans of every domain (a hotel type, "经济型", is a value to the
    hotel's domain only), in the conversation's order. For the conversation as the user said it."""
    by: dict[tuple[int, int, str], compact.SummaryLine] = {}
    for lines in summaries:
        for line in lines:
            key = (line.index, line.start, line.text)
            known = by.get(key)
            by[key] = line if known is None else replace(known, spans=tuple(sorted(set(known.spans) | set(line.spans))))
    return sorted(by.values(), key=lambda line: (line.index, line.start))
