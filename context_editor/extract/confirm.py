"""Dialogue acts read off the text: offers, acceptance, declines, picks, and asked-for fields.

Assistant text never sets a user-owned field, but it *offers* values: the values it names in a
question ("要黑色的吗？", "Shall I book MU5101?") or in a sentence with an offer cue ("How about
Sino?", "Confirming: a table for 2 at 11:30.", "为您推荐故宫"). A user reply then accepts the offer
("yes", "sounds good", "就这个", "可以" opening the reply and standing alone, so "要红色" or
"okay-ish" accept nothing, nor does a trailing-off "嗯……"), declines it ("no", "不用了"), picks
one of several ("the second one", "第二个") or ignores it. An assistant question also *asks*
for fields: the one whose name, ask text and kind of value ("what time" -> a time) it matches
best; "Anything else?" asks for none. All cue words are data (rules/<lang>/dialogue.yaml).
"""

from __future__ import annotations

import re

from ..domain import FieldSpec
from ..domain.kinds import modifies_a_thing, things_named
from .cues import load_cues

_QUESTION = re.compile(r"[^。！!？?\n]*[？?]")
_SENTENCE = re.compile(r"[^。！!？?\n]*(?:[。！!？?\n]|$)")
# A sentence of a user message: "." ends one too, except inside a number ("1.5").
_USER_SENTENCE = re.compile(r"(?:[^.。！!？?\n]|(?<=[0-9])\.(?=[0-9]))*(?:[.。！!？?\n]+|$)")
_CLAUSE = re.compile(r"[^，,；;]+")
_ONE_THAT = re.compile(r"的(?:吗|么|呢)")  # "有提供奶油蘑菇汤的吗？": one that has it, i.e. a search
_CLAUSE_JOIN = re.compile(r"\s+(?:and|or)\s+|[,，、;；]|和|以及|还有|或者", re.IGNORECASE)
_LATIN_WORD = re.compile(r"[a-z0-9]+")
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]+")
ASK_TEXT_BONUS = 3.0  # the question is the field's own ask text (or contains it)
KIND_BONUS = 1.5  # the question asks for the kind of value the field holds ("what time" -> a time)
WEAK_KIND_BONUS = 0.5  # a yes/no question shape says little about which bool it is
ROLE_BONUS = 1.0  # the question names the end of a span the field is ("when do you come back" -> a return date)
MIN_ASK_SCORE = 1.0
_WHEN = frozenset({"date", "time"})


def confirmation(text: str) -> tuple[int, int] | None:
    """Span of the yes-word (or verdict: "That flight sounds perfect") a reply opens with, or None."""
    cues = load_cues()
    return cues.opens_with(cues.accept, text) or cues.praised(text)


def decline(text: str) -> tuple[int, int] | None:
    """Span of the no-word a reply opens with, or None."""
    cues = load_cues()
    return cues.opens_with(cues.decline, text)


def pick(text: str) -> tuple[int, int, int] | None:
    """(n, start, end) when the reply picks the n-th offered option ("the second one"; -1: the last)."""
    return load_cues().ordinal(text)


def question_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every sentence that ends with a question mark."""
    return [m.span() for m in _QUESTION.finditer(text)]


def offer_spans(text: str) -> list[tuple[int, int]]:
    """Sentences that offer what they name: questions, and sentences with an offer cue."""
    cues = load_cues()
    out = []
    for m in _SENTENCE.finditer(text):
        s, e = m.span()
        if e > s and (text[e - 1] in "?？" or (cues.offer is not None and cues.offer.search(text, s, e))):
            out.append((s, e))
    return out


def thing_questions(text: str) -> list[tuple[int, int]]:
    """(start, end) of the sentences of a user message that ask about a thing on the table rather
    than say what the user wants: "Is it furnished?", "Do they have live music?", "Can you tell me
    if the flat allows pets?", "这家店有wifi吗？". A value named there is asked about, not wanted."""
    pattern = load_cues().about_thing
    if pattern is None:
        return []
    out = []
    for m in _USER_SENTENCE.finditer(text):
        s, e = m.span()
        found = pattern.search(text[s:e]) if e > s else None
        if found:
            out.append((s + found.start(), e))
    return out


def yes_no_questions(text: str) -> list[tuple[int, int]]:
    """(start, end) of the clauses of a user message that ask whether the kind of thing the sentence
    names (a hotel, a restaurant: `domain.kinds.THINGS`) has something, without asking for a
    search: a yes/no particle ("吗", "是否"), a thing named, and neither a search or which word
    ("找", "推荐", "有没有", "哪") nor a thing its words modify ("…的酒店吗"): "酒店有早餐服务吗？",
    "北京丽亭酒店在部分房间提供wifi吗？" ask about the place on the table. A question naming no such
    thing stays a wish ("有黑色吗" to a shop: do you have it in black). (English marks these by its
    word order: `thing_questions`.)"""
    cues = load_cues()
    if cues.yes_no is None:
        return []
    out: list[tuple[int, int]] = []
    for m in _USER_SENTENCE.finditer(text):
        s, e = m.span()
        sentence = text[s:e]
        if (e == s or not cues.yes_no.search(sentence) or not things_named(sentence) or cues.new_search and cues.new_search.search(sentence)
                or cues.which and cues.which.search(sentence) or modifies_a_thing(sentence) or _ONE_THAT.search(sentence)):
            continue
        # Only the clause that asks: "我要从故宫打车到天坛，你能告诉我车型么？" still says where to go.
        out.extend((s + c.start(), s + c.end()) for c in _CLAUSE.finditer(sentence) if cues.yes_no.search(c.group(0)))
    return out


def topic_words(text: str) -> set[str]:
    """Latin words (a plural's final s dropped) and CJK bigrams, without question stopwords."""
    stop = load_cues().stopwords
    out = {w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
           for w in _LATIN_WORD.findall(text.lower()) if w not in stop}
    for run in _CJK_RUN.findall(text):
        for i in range(max(len(run) - 1, 1)):
            gram = run[i:i + 2]
            if gram not in stop:
                out.add(gram)
    return out - stop


def field_kinds(spec: FieldSpec) -> set[str]:
    """The kinds of value a question asks for when it is about this field (the more, the closer)."""
    if spec.type in ("time", "date", "money", "bool"):
        return {spec.type}
    if spec.type == "datetime":
        return {"date", "time"}
    if spec.type == "duration":
        return {"duration", "number"}
    if spec.type in ("int", "float", "percent"):
        return {"number"}
    if any(ref.startswith(("slot.place", "ner.GPE", "ner.LOC", "place")) for ref in spec.extract):
        return {"place"}
    return set()


def field_role(spec: FieldSpec) -> str | None:
    """"start" or "end" when the field's extractors say it is one end of a span (a departure date,
    an origin: `slot.date.start`, `slot.place.from`; a return date, a destination)."""
    refs = " ".join(spec.extract).lower()
    start, end = re.search(r"\.(?:start|from)\b", refs), re.search(r"\.(?:end|to)\b", refs)
    return "start" if start and not end else "end" if end and not start else None


class AskMatcher:
    """Which of a domain's user-owned fields an assistant question asks for."""

    def __init__(self, fields: dict[str, FieldSpec]):
        self.fields = {n: f for n, f in fields.items() if "user" in f.sources}
        self.words = {n: topic_words(n.replace("_", " ") + " " + " ".join(f.ask.values())) for n, f in self.fields.items()}
        # The words of a field's name count twice: "What movie?" asks for movie_name, not for the
        # genre whose ask text says "Genre of the movie".
        self.names = {n: topic_words(n.replace("_", " ")) for n in self.fields}
        self.asks = {n: [_squash(a) for a in f.ask.values() if a] for n, f in self.fields.items()}
        self.kinds = {n: field_kinds(f) for n, f in self.fields.items()}
        self.roles = {n: field_role(f) for n, f in self.fields.items()}

    def asked(self, text: str) -> list[tuple[str, tuple[int, int]]]:
        """(field, span of the clause that asks for it), in text order, each field once."""
        cues = load_cues()
        out: dict[str, tuple[int, int]] = {}
        for qs, qe in question_spans(text):
            question = text[qs:qe]
            if cues.closing is not None and cues.closing.search(question):
                continue  # "Anything else?": about no field, so its "no" is no value
            squashed = _squash(question)
            start = qs
            for part in _CLAUSE_JOIN.split(question):
                clause_start = text.find(part, start) if part else start
                start = max(start, clause_start + len(part))
                name = self._best(part, squashed)
                if name and name not in out:
                    out[name] = (clause_start, clause_start + len(part))
        return sorted(out.items(), key=lambda kv: kv[1])

    def _best(self, clause: str, question: str) -> str | None:
        words = topic_words(clause)
        kinds = load_cues().question_kinds(clause)
        roles = load_cues().question_roles(clause)
        role = next(iter(roles)) if len(roles) == 1 else None  # "when do you leave" -> start; both said: neither
        scores = {}
        for name in self.fields:
            score = float(len(words & self.words[name]) + len(words & self.names[name]))
            for kind in self.kinds[name] & kinds:
                score += WEAK_KIND_BONUS if kind == "bool" else KIND_BONUS
            if role and self.kinds[name] & kinds and self.roles[name] == role:
                score += ROLE_BONUS
            if question and any(a and (a in question or question in a) for a in self.asks[name]):
                score += ASK_TEXT_BONUS
            if score >= MIN_ASK_SCORE:
                scores[name] = score
        if not scores:
            return None
        top = max(scores.values())
        best = [n for n, s in scores.items() if s == top]
        if len(best) > 1 and role is None and all(self.roles[n] and self.kinds[n] & _WHEN for n in best):
            # The dates of one span tie and the question names neither end ("What date would you like
            # to travel?", "When do you want the car?"): a stay or a trip is asked for from its start.
            # (Not places: "Where would you like to go?" asks where to.)
            best = [n for n in best if self.roles[n] == "start"]
        return best[0] if len(best) == 1 else None  # a tie names no field: don't guess


def _squash(text: str) -> str:
    """Lower case without spaces or punctuation, to compare a question with an ask text."""
    return re.sub(r"[\W_]+", "", text.lower())
