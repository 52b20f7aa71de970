"""Dialogue cues: the `dialogue:` word lists of the lexicons (`rules/<lang>/lexicon.yaml`), compiled once.

They say how a reply accepts, declines or picks from an offer ("sounds good", "不用了", "the
second one"), which assistant sentences offer something ("How about …", "为您推荐 …"), which
questions ask about no field ("Anything else?") and what kind of value a question asks for
("what time" -> a time). All of it is data: a language brings its own in its lexicon, which the
domain version hash covers. An acceptance opens with one of the lexicons' `yes_words` or
`dialogue/accept` phrases, followed by at most one of the `yes_particles`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..lang import Lexicon, lexicon

# After a cue: at most a particle, then punctuation, a space or the end ("好啊", "yes,"), never more
# letters ("okay-ish") or a trailing-off "ok..." / "嗯……" (hesitation is no answer).
_STANDS_ALONE = r"(?=[{particles}]?(?:$|(?!\.\.|……)[\s，。！!,.;；~～…]))"


def _first_chars(words: list[str]) -> str:
    """A class of the characters a cue can start with. Leading a pattern with it as a lookahead
    lets a position that starts no cue fail in one step instead of trying every alternative, so a
    hostile run (64 KB of spaces, digits or punctuation) costs one pass, not one per cue."""
    chars = {c for w in words if w for c in (w[0], w[0].lower(), w[0].upper())}
    return "(?=[" + "".join(re.escape(c) for c in sorted(chars)) + "])"


def _alternation(words: list[str]) -> str:
    out = []
    for w in sorted(set(words), key=len, reverse=True):
        body = re.escape(w).replace(r"\ ", r"\s+")
        out.append((r"(?<![A-Za-z])" + body) if w[:1].isascii() and w[:1].isalpha() else body)
    return "|".join(out)


def _opening(words: list[str], particles: list[str]) -> re.Pattern[str] | None:
    """A cue that opens the text and stands alone."""
    if not words:
        return None
    after = _STANDS_ALONE.format(particles="".join(re.escape(p) for p in particles) or "\\s")
    # `\s*+`: no cue starts with a space, so the run is never given back to retry the cues.
    return re.compile(r"\s*+(?P<cue>" + _alternation(words) + r")" + after, re.IGNORECASE)


def _anywhere(words: list[str]) -> re.Pattern[str] | None:
    if not words:
        return None
    return re.compile(_first_chars(words) + r"(?:" + _alternation(words) + r")(?![A-Za-z])", re.IGNORECASE)


def _ordinals(table: dict[int, list[str]]) -> re.Pattern[str] | None:
    """One matcher for every ordinal, a named group per number (`n3`, `n_1` for -1): one scan
    finds the first pick, where a pattern per number would scan the text once each."""
    parts = [f"(?P<n{str(n).replace('-', '_')}>{_alternation(ws)})" for n, ws in sorted(table.items()) if ws]
    if not parts:
        return None
    words = [w for ws in table.values() for w in ws]
    return re.compile(_first_chars(words) + "(?:" + "|".join(parts) + r")(?![A-Za-z])", re.IGNORECASE)


@dataclass(frozen=True)
class Cues:
    """Compiled cues of all languages together (a reply may mix them: "OK，就这个")."""

    accept: re.Pattern[str] | None
    decline: re.Pattern[str] | None
    ordinals: re.Pattern[str] | None
    closing: re.Pattern[str] | None
    offer: re.Pattern[str] | None
    new_search: re.Pattern[str] | None  # a request for a new search ("帮我找一家…", "find me another…")
    kinds: tuple[tuple[str, re.Pattern[str]], ...]
    roles: tuple[tuple[str, re.Pattern[str]], ...]  # "start" / "end": which end of a span a question asks for
    stopwords: frozenset[str]
    lead: re.Pattern[str] | None  # a filler opening an answer ("in", "I'd like", "我想")
    trail: re.Pattern[str] | None  # a filler closing it ("please", "吧")
    # A yes/no question about a thing already on the table ("Is it furnished?", "Do they have live
    # music?", "这家有wifi吗？"): it asks for information, it states no wish.
    about_thing: re.Pattern[str] | None
    yes_no: re.Pattern[str] | None  # a yes/no particle ("吗", "是否"): see confirm.yes_no_questions
    which: re.Pattern[str] | None  # "哪": a question that picks among several is a search
    # No preference (extract/preference.py): "any" before the words naming a field, what may stand
    # between them, what makes an "any" a search or a negation ("are there any", "don't want any"),
    # and the indifference said before / after those words or as a whole reply ("I don't mind").
    any_words: re.Pattern[str] | None
    any_modifiers: frozenset[str]
    any_blocked: re.Pattern[str] | None  # matches at the end of the text before an `any`
    indifferent_before: re.Pattern[str] | None
    indifferent_after: re.Pattern[str] | None
    indifferent_alone: re.Pattern[str] | None
    # A verdict on the thing offered, opening a reply: "That flight sounds perfect", "这家挺好".
    praise: re.Pattern[str] | None

    def opens_with(self, pattern: re.Pattern[str] | None, text: str) -> tuple[int, int] | None:
        m = pattern.match(text) if pattern else None
        return m.span("cue") if m else None

    def ordinal(self, text: str) -> tuple[int, int, int] | None:
        """(n, start, end) of the first ordinal pick in `text` (n = -1: the last one)."""
        m = self.ordinals.search(text) if self.ordinals else None
        if m is None or m.lastgroup is None:
            return None  # at one position the lowest number is tried first, as its own scan would win
        return int(m.lastgroup[1:].replace("_", "-")), m.start(), m.end()

    def praised(self, text: str) -> tuple[int, int] | None:
        """Span of the verdict a reply opens with ("That flight works for me"), unless the sentence
        asks it ("这家好吗？", "That one is good?")."""
        m = self.praise.match(text) if self.praise else None
        if m is None:
            return None
        rest = _SENTENCE_REST.match(text, m.end())
        return None if rest and rest.group(0).endswith(("?", "？", "吗")) else m.span("cue")

    def question_kinds(self, text: str) -> set[str]:
        return {kind for kind, pattern in self.kinds if pattern.search(text)}

    def question_roles(self, text: str) -> set[str]:
        return {role for role, pattern in self.roles if pattern.search(text)}

    def strip_fillers(self, text: str) -> tuple[int, int]:
        """The span of `text` left once leading and trailing fillers and punctuation are cut."""
        start, end = 0, len(text)
        while start < end:
            m = _EDGE.match(text, start, end) or (self.lead.match(text, start, end) if self.lead else None)
            if not m or m.end() == start:
                break
            start = m.end()
        while start < end:
            m = _EDGE_END.search(text, start, end) or (self.trail.search(text, start, end) if self.trail else None)
            if not m or m.start() == end:
                break
            end = m.start()
        return start, end


_EDGE = re.compile(r"[\s,，.。!！?？;；~～、:：]+")
_SENTENCE_REST = re.compile(r"[^.。!！?？\n]*(?:[?？]|吗|$)?")
_EDGE_END = re.compile(r"[\s,，.。!！?？;；~～、:：]+$")


def _about_thing(lex: Lexicon) -> re.Pattern[str] | None:
    """A sentence opening (after any discourse words) with a yes/no verb whose subject is not the
    assistant, "there" or the user ("Is it …", "Are pets allowed", "Can you tell me if they …"),
    or a question naming the thing by a reference word ("这家…吗"). Subjects that are the assistant
    or "there" make a search ("Do you have any furnished flats?", "Are there Thai places?")."""
    aux, searchers = lex.words("dialogue/yes_no_verbs"), lex.words("dialogue/search_subjects")
    embed, refs = lex.words("dialogue/embedded_question"), lex.words("dialogue/thing_references")
    lead = lex.words("dialogue/sentence_openers")
    parts = []
    if aux:
        opener = (r"(?:(?:" + _alternation(lead) + r")[\s,，]+)*") if lead else ""
        subject = r"(?!(?:" + _alternation(searchers) + r")(?![A-Za-z]))" if searchers else ""
        clause = r"(?:^|[,，;；:]|(?<![A-Za-z])(?:and|or)(?![A-Za-z]))\s*"  # the question may follow a clause
        parts.append(clause + opener + r"(?:(?:" + _alternation(aux) + r")\s+" + subject + r"[A-Za-z]"
                     + (r"|(?:" + _alternation(embed) + r")\s+" + subject + r"[A-Za-z]" if embed else "")
                     + r")[^?？\n]*[?？]\s*$")
    if refs:
        parts.append(r"(?:" + _alternation(refs) + r")[^?？。！!\n]*[?？]\s*$")
    return re.compile("|".join(parts), re.IGNORECASE) if parts else None


def _praise(lex: Lexicon) -> re.Pattern[str] | None:
    """A reply opening (after any discourse words) with a verdict on what was offered: a subject
    pointing at it, a verb and a word of praise ("That flight sounds perfect", "It's fine", "这家听起来
    不错"; a Chinese verb may be left out: "这个可以"); a subject and a verb of fit ("That one works
    for me"); or a phrase of taking and a subject ("I'm interested in that flight", "就订这家")."""
    def split(key: str) -> tuple[list[str], list[str]]:
        ws = lex.words(f"dialogue/{key}")
        return [w for w in ws if w.isascii()], [w for w in ws if not w.isascii()]

    (subj, zh_subj), (verbs, zh_verbs), (praise, zh_praise) = split("praise_subjects"), split("praise_verbs"), split("praise_words")
    (takes, zh_takes), (suits, _), (adverbs, _) = split("take_phrases"), split("suits_verbs"), split("praise_adverbs")
    alt = _alternation
    parts = []
    if subj and verbs and praise:
        subject = rf"(?:{alt(subj)})(?:\s+[A-Za-z]+)?"  # at most one noun: "that flight"
        adverb = rf"(?:(?:{alt(adverbs)})\s+)?" if adverbs else ""
        verdict = rf"{adverb}(?:{alt(praise)})(?![A-Za-z])(?!\s+to\s+(?:know|hear))"  # "good to know" is no verdict
        parts.append(rf"(?:{subject}\s*)?(?:{alt(verbs)})\s+{verdict}")  # "Sounds alright with me" says it of the offer too
        if suits:
            parts.append(rf"{subject}\s+(?:{alt(suits)})(?![A-Za-z])")
        if takes:
            parts.append(rf"(?:{alt(takes)})\s+(?:{alt(subj)})(?![A-Za-z])")
    if zh_subj and zh_praise:
        verb = rf"(?:{alt(zh_verbs)})?" if zh_verbs else ""
        parts.append(rf"(?:{alt(zh_subj)}){verb}(?:{alt(zh_praise)})(?!不)")  # "好不好" asks
        if zh_takes:
            parts.append(rf"(?:{alt(zh_takes)})(?:{alt(zh_subj)})")
    if not parts:
        return None
    lead = lex.words("dialogue/sentence_openers") + lex.words("yes_words")
    opener = rf"(?:(?:{alt(lead)})[\s,，!！.]+)*" if lead else ""
    return re.compile(rf"\s*+(?P<cue>{opener}(?:{'|'.join(parts)}))", re.IGNORECASE)


def load_cues() -> Cues:
    """The cues of every registered language (the lexicon is cached, and so is this)."""
    return _compile(lexicon())


@lru_cache(maxsize=2)
def _compile(lex: Lexicon) -> Cues:
    def words(key: str) -> list[str]:
        return lex.words(f"dialogue/{key}")

    ordinals = {int(n): ws for n, ws in lex.table("dialogue/ordinals").items()}
    kinds = lex.table("dialogue/question_kinds")
    fillers = words("fillers")
    particles = lex.words("yes_particles")
    return Cues(
        accept=_opening(lex.words("yes_words") + words("accept"), particles), decline=_opening(words("decline"), particles),
        ordinals=_ordinals(ordinals),
        closing=_anywhere(words("closing")), offer=_anywhere(words("offer")), new_search=_anywhere(words("new_search")),
        kinds=tuple((k, p) for k, ws in sorted(kinds.items()) if (p := _anywhere(ws)) is not None),
        roles=tuple((k, p) for k, ws in sorted(lex.table("dialogue/question_roles").items()) if (p := _anywhere(ws)) is not None),
        stopwords=frozenset(w.lower() for w in words("stopwords")),
        lead=_anywhere(fillers), about_thing=_about_thing(lex), yes_no=_anywhere(words("yes_no_particles")),
        which=_anywhere(words("which_words")),
        trail=re.compile(r"(?<![A-Za-z])(?:" + _alternation(fillers) + r")$", re.IGNORECASE) if fillers else None,
        any_words=_anywhere(words("any_words")), any_modifiers=frozenset(w.lower() for w in words("any_modifiers")),
        any_blocked=(re.compile(r"(?<![A-Za-z])(?:" + _alternation(words("any_blockers")) + r")\s+(?:[A-Za-z]+\s+)?$", re.IGNORECASE)
                     if words("any_blockers") else None),
        indifferent_before=_anywhere(words("indifferent_before")), indifferent_after=_anywhere(words("indifferent_after")),
        indifferent_alone=_opening(words("indifferent_alone"), particles), praise=_praise(lex))
