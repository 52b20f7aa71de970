"""No preference: the user says any value of a field will do, and the field holds "any".

"Any date will do", "any kind of show is fine", "I don't care about the price", "the director
doesn't matter", "价格无所谓", "哪天都行", "我不在乎价格" name the field they are indifferent
about; "I don't mind", "随便", "都可以" as a reply to the assistant's question about a field say it
of that field. Either way the field gets `model.NO_PREFERENCE`: a value like any other (an agent
must not ask again for a date the user said any of will do), which a value the user states later
replaces.

The words naming the field are matched against the field's own words: the parts of its name
(which count double), the topic words of its ask text and description, and the kind of value it
holds ("哪天" -> a date); the best field wins, a tie names none. Guards, all data in the
`dialogue:` lexicon sections: "any" is followed only by the field's words or a modifier ("any
available device", not "any Italian restaurant"), and not after a search or a negation ("are there
any …", "I don't want any …"); "any other …" names nothing. A list field (things wanted) has no
"any": it is left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..domain import FieldSpec
from .confirm import field_kinds, topic_words
from .cues import load_cues

_TOKEN = re.compile(r"[A-Za-z][A-Za-z'-]*|[0-9]+|[\u4e00-\u9fff]+")
_CLAUSE_END = re.compile(r"[,，.。!！?？;；:：\n]|\s(?:and|but|or)\s|但|而且|并且")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_SENTENCE_END = re.compile(r"[.。!！?？\n]")
MAX_WORDS = 4  # words naming a field next to an indifference ("the type of the show")
MAX_CJK = 8  # characters naming a field before "都可以" ("对于价格方面")
NAME_WEIGHT = 2.0  # a part of the field's name says more than a word of its description
# Words that join the words naming a field without naming anything ("the type of the show").
_JOINERS = frozenset({"the", "a", "an", "of", "which", "what", "about", "for", "on", "my", "its", "their"})
_AFTER_REPLY = re.compile(r"\s*[吧啊呀哦嘛了的]?\s*(?:$|[,，。.!！;；~～]|\s+(?:is|will|works|would|should|please|thanks)\b)", re.IGNORECASE)


def _stem(word: str) -> str:
    w = word.lower().strip("'-")
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


@dataclass(frozen=True)
class Hit:
    """A no-preference statement about `field`, at `span` of the message."""

    field: str
    span: tuple[int, int]


class Indifference:
    """Which of a domain's user-owned fields a message says any value of will do."""

    def __init__(self, fields: dict[str, FieldSpec]):
        self.fields = {n: f for n, f in fields.items() if "user" in f.sources and not f.is_list}
        self.names = {n: {_stem(w) for w in n.split("_") if w} - _JOINERS for n in self.fields}
        self.cjk_names = {n: n for n in self.fields if _CJK.search(n)}
        self.topics = {n: {_stem(w) for w in topic_words(" ".join([*f.ask.values(), f.description]))}
                       for n, f in self.fields.items()}
        self.kinds = {n: field_kinds(f) for n, f in self.fields.items()}
        self.vocabulary = set().union(*self.names.values(), *self.topics.values()) if self.fields else set()

    def named(self, text: str, asked: tuple[str, ...] = ()) -> list[Hit]:
        """Statements of no preference that name their field, in text order, each field once; words
        that name several fields equally name the one the assistant just asked for ("哪天都行")."""
        cues = load_cues()
        out: dict[str, Hit] = {}
        for m in cues.any_words.finditer(text) if cues.any_words else ():
            if not m.group(0).isascii() or self._blocked(text, m.start()):
                continue
            words = self._words_after(text, m.end(), strict=True)
            self._add(out, words, asked, (m.start(), m.end() if not words else words[-1][2]))
        for m in cues.indifferent_before.finditer(text) if cues.indifferent_before else ():
            words = self._words_after(text, m.end(), strict=False)
            self._add(out, words, asked, (m.start(), m.end() if not words else words[-1][2]))
        for m in cues.indifferent_after.finditer(text) if cues.indifferent_after else ():
            words = self._words_before(text, m.start())
            for n in range(1, len(words) + 1):  # the words nearest the cue first: "restaurant price doesn't matter"
                if self._add(out, words[-n:], asked, (words[-n][1], m.end())):
                    break
        return sorted(out.values(), key=lambda h: h.span)

    def alone(self, text: str) -> tuple[int, int] | None:
        """Span of a reply that is itself no preference ("I don't mind.", "随便吧", "Either is fine")."""
        pattern = load_cues().indifferent_alone
        m = pattern.match(text) if pattern else None
        if m is None or not _AFTER_REPLY.match(text, m.end()):
            return None  # "any Italian place", "anything with a view": a wish, not indifference
        return m.span("cue")

    def _blocked(self, text: str, start: int) -> bool:
        """"Are there any …", "don't want any …", "any other …", and any "any" in a question ("Do you
        know any dentists?", "Do they have any live bands?"): a search or a negation, not indifference."""
        pattern = load_cues().any_blocked
        before = text[max(0, start - 40):start]
        end = _SENTENCE_END.search(text, start)
        return (bool(pattern and pattern.search(before)) or bool(end and end.group(0) in "?？")
                or bool(re.match(r"any\s+(?:other|more|else|of)\b", text[start:], re.IGNORECASE)))

    def _words_after(self, text: str, pos: int, strict: bool) -> list[tuple[str, int, int]]:
        """The words after a cue up to the end of its clause; `strict` ("any"): only the domain's
        field words, modifiers and joiners, so "any Italian restaurant" names no field."""
        out = []
        stop = _CLAUSE_END.search(text, pos)
        for m in _TOKEN.finditer(text, pos, stop.start() if stop else len(text)):
            word = m.group(0)
            if _CJK.match(word):
                out.append((word[:MAX_CJK], m.start(), m.start() + min(len(word), MAX_CJK)))
                break
            w = _stem(word)
            if strict and w not in self.vocabulary and w not in load_cues().any_modifiers and w not in _JOINERS:
                return out if out and out[-1][0] not in _JOINERS else []  # a value word: "any Italian place"
            out.append((w, m.start(), m.end()))
            if len(out) >= MAX_WORDS:
                break
        while out and out[-1][0] in _JOINERS:
            out.pop()
        return out

    def _words_before(self, text: str, pos: int) -> list[tuple[str, int, int]]:
        """The words of the clause before a cue ("the price" of "the price doesn't matter")."""
        starts = [m.end() for m in _CLAUSE_END.finditer(text, max(0, pos - 80), pos)]
        begin = starts[-1] if starts else max(0, pos - 80)
        tokens = list(_TOKEN.finditer(text, begin, pos))
        if tokens and _CJK.match(tokens[-1].group(0)):
            m = tokens[-1]
            s = max(m.start(), m.end() - MAX_CJK)
            return [(text[s:m.end()], s, m.end())]
        return [(_stem(m.group(0)), m.start(), m.end()) for m in tokens[-MAX_WORDS:]]

    def _add(self, out: dict[str, Hit], words: list[tuple[str, int, int]], asked: tuple[str, ...],
             span: tuple[int, int]) -> bool:
        """Record the field `words` name, if any; whether they named one."""
        name = self._best([w for w, _, _ in words], asked)
        if name is not None and name not in out:
            out[name] = Hit(name, span)
        return name is not None

    def _best(self, words: list[str], asked: tuple[str, ...]) -> str | None:
        """The field these words name: most name parts, topic words and kind; a tie names none."""
        if not words:
            return None
        latin = {w for w in words if not _CJK.match(w)}
        cjk = "".join(w for w in words if _CJK.match(w))
        kinds = load_cues().question_kinds(" ".join(words)) if cjk else set()
        grams = topic_words(cjk) if cjk else set()
        scores = {}
        for name in self.fields:
            score = NAME_WEIGHT * len(latin & self.names[name]) + len(latin & self.topics[name])
            if cjk:
                score += NAME_WEIGHT * (name in self.cjk_names and name in cjk) + len(grams & self.topics[name])
                score += len(kinds & self.kinds[name])
            if score > 0:
                scores[name] = score
        if not scores:
            return None
        top = max(scores.values())
        best = [n for n, s in scores.items() if s == top]
        if len(best) > 1:
            best = [n for n in best if n in asked]
        return best[0] if len(best) == 1 else None
