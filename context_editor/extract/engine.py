"""Extract: one message in, candidates out. Pure: no state, no store, no clock.

Four sources of candidates, each tagged with an extractor id for provenance:
- `rule:<id>`: regex rules from the packs a field's `extract` selects;
- `enum:<field>`: the synonyms an enum (or list-of-enum) field declares;
- `ner:<model>@<hash>:<label>`: spans of a domain's trained model (`ner:<model>:<label>` for
  the generic English model), for fields that opt in, combined with rule hits by `outrank`;
- `<extractor>:<label>`: spans of a registered third-party extractor (`extract: [caps.WORD]`,
  entry-point group `context_editor.extractors`);
- `tool:json`: keys of a JSON tool result.
Negation, offers and the replies to them are decided here (they are properties of the text);
what they mean for state is Transform's business. A role a field does not accept yields nothing
for it, except the assistant's offers of user-owned fields: those are `proposal` candidates that
a user's yes (or pick, "the second one") in the next round turns into values (see confirm.py). A
tool result that lists several records offers them as numbered options.

The reply to an assistant message is read in the light of it (`Prior`): the fields the
assistant asked for are parsed from the reply by their type first ("Friday", "4", "no", "一年半"
mean something only as answers), unless the reply clearly says something else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property
from typing import Any

from .. import registry
from ..domain import Domain, FieldSpec
from ..domain.versions import PerVersion
from ..domain.rulepacks import extractor_ref
from ..lang import detect_language
from ..model import NO_PREFERENCE, Candidate, Message, Provenance
from .confirm import AskMatcher, confirmation, decline, offer_spans, pick, thing_questions, yes_no_questions
from .cues import load_cues
from .enums import EnumMatcher, enum_matchers
from .negation import is_negated
from .numbers.bounds import meets
from .prefilter import Present
from .preference import Indifference
from ..domain.kinds import accepts, things_named, with_subject
from .ner import CONFIDENCE as NER_CONFIDENCE, MODEL_ID, Span, ner_label, outrank, scored_spans
from .tools import key_index, parse_json, walk
from .values import TYPED_PARSERS, default_parser, parse_value

PLUGIN_CONFIDENCE = 0.8  # a registered extractor's, unless it has a `confidence` attribute
MAX_SCAN_CHARS = 20_000  # prose beyond this is kept in the log but not scanned (bounded cost)
# A number written with an exponent ("1e999999", "$1e309", "10^1000") is no amount anyone pays or
# counts: a parser reading "1" or "1000" out of it would be wrong, so the mention is rejected.
_EXPONENT_AFTER = re.compile(r"[0-9.]*\s*(?:[eE][+-]?[0-9]|\^\s*[0-9]|\*\*\s*[0-9])")
_EXPONENT_BEFORE = re.compile(r"[0-9]\s*(?:[eE][+-]?|\^\s*|\*\*\s*)$")
_EXPONENT_TOKEN = re.compile(r"[0-9][0-9.,]*\s*(?:[eE][+-]?|\^|\*\*)\s*[0-9]+")
NUMERIC_PARSERS = ("money", "number", "int", "float", "percent", "count")
_WORDLIKE = re.compile(r"\w")
MAX_FREE_ANSWER_CHARS = 60  # a free-text answer is a short reply, not a paragraph
MAX_OPTIONS = 20  # options read from one tool result
MIN_NAMED_CHARS = 3  # an offered value shorter than this ("2", "CA") is not picked by being said again
MIN_NAMED_CJK = 2  # two ideographs are a whole name ("厦门")
# The next name of a list of offered names: after a comma or "or" / "and", capitalised words (with
# the small words titles hold: "Hotel of the Sea", "Mets Vs Dodgers"), at most six.
_NAME_WORD = r"(?:[A-Z0-9](?:[\w'&.:!-]*[\w'&!])?(?:\.(?=\s+[A-Z]))?)"  # "Dr. Strangelove", not "Sematary."
_LIST_ITEM = re.compile(r"(?:\s*,\s*(?:or\s+|and\s+)?|\s+(?:or|and)\s+)(?P<name>" + _NAME_WORD
                        + r"(?:\s+(?:" + _NAME_WORD + r"|of|the|a|an|in|on|at|to|for|and|de|la|le|vs\.?)){0,5}?)"
                        + r"(?=\s*(?:,|\bor\b|\band\b|[?.!;]|$))")
# The same in Chinese: after 、，or 或/或者/还是/和, a run of ideographs ("北京、上海还是广州").
_LIST_ITEM_ZH = re.compile(r"(?:[、，,]\s*(?:或者|或是|或|还是|和)?|或者|或是|或|还是|和)(?P<name>[\u4e00-\u9fff]{2,12}?)"
                           r"(?=[、，,。？?！!；;]|或者|或是|或|还是|和|吗|呢|$)")
_OR = re.compile(r"\bor\b|或|还是", re.IGNORECASE)
_TYPED_ANSWERS = ("time", "date", "datetime", "int", "float", "money", "duration", "percent")


@dataclass(frozen=True)
class Prior:
    """What the assistant's last message left open for the user's reply."""

    round: int  # the round of the question
    asks: tuple[str, ...] = ()  # fields it asked for, in text order
    offered: tuple[str, ...] = ()  # fields it offered values for
    # (field, the words it offered, value) of each offered value: a reply naming one picks it by name
    # ("What about Dumbo, Hellboy or Hotel Mumbai?" "Hellboy is good.")
    named: tuple[tuple[str, str, Any], ...] = ()
    # The round whose offer a reply answers: this one, or an earlier one the user kept open by only
    # asking about it ("How about Sino?" "What's their address?" "12 Main St." "Great, book it").
    offer_round: int | None = None


_shared: PerVersion[tuple[Any, ...], Extractor] = PerVersion()  # domain version and files -> its extractor (`Extractor.shared`)


class Extractor:
    """Compiled extraction for one domain."""

    def __init__(self, domain: Domain):
        self.domain = domain
        self._takers_of: dict[str, tuple[str, ...]] = {}  # model label -> the fields taking its spans

    @classmethod
    def shared(cls, domain: Domain) -> Extractor:
        """The extractor of this domain version in this process. It holds nothing but what it
        compiles from the domain (matchers, ask words, caches), so every editor of the version
        uses one: a new editor (a reopened session) extracts its first messages warm. Keyed by
        where the domain file and its NER weights are too (the version hash names the weights by
        their hash only): a copy elsewhere loads its own files."""
        key = (domain.version_hash, domain.path, tuple(sorted((lang, str(m.path)) for lang, m in domain.ner_models.items())))
        return _shared.get(key, lambda: cls(domain))

    @cached_property
    def ask_matcher(self) -> AskMatcher:
        return AskMatcher(self.domain.fields)

    @property
    def answers_on(self) -> bool:
        return bool(self.domain.dialogue.get("answers", True))

    @property
    def offers_on(self) -> bool:
        return bool(self.domain.dialogue.get("offers", True))

    @property
    def no_preference_on(self) -> bool:
        return bool(self.domain.dialogue.get("no_preference", True))

    @cached_property
    def indifference(self) -> Indifference:
        return Indifference(self.domain.fields)

    def speaks_for_me(self, msg: Message) -> bool:
        """Without the app's `domains` metadata, with `dialogue: {subject: HOTEL}`: a user message
        that names other kinds of thing and not this domain's ("找一家有早餐服务的酒店" for a restaurant
        domain) speaks for those. A message naming none speaks for every domain."""
        subject = self.domain.dialogue.get("subject")
        if not subject or msg.role != "user":
            return True
        named = things_named(msg.content[:MAX_SCAN_CHARS])
        return not named or subject in named

    def asks(self, msg: Message) -> tuple[str, ...]:
        """The fields an assistant message asks for: named by the app (`asks` metadata) or by its questions."""
        named = [a for a in msg.asks if a in self.domain.fields]
        found = [name for name, _ in self.ask_matcher.asked(msg.content[:MAX_SCAN_CHARS])] if self.answers_on else []
        return tuple(dict.fromkeys([*named, *found]))

    @cached_property
    def enum_matchers(self) -> dict[str, EnumMatcher]:
        return enum_matchers(self.domain)  # compiled once per domain version, not per editor

    @cached_property
    def ner_fields(self) -> dict[str, set[str]]:
        """Field -> the entity labels it takes from NER (only fields that opted in)."""
        out = {}
        for name, spec in self.domain.fields.items():
            labels = {label for label in map(ner_label, spec.extract) if label}
            if labels:
                out[name] = labels
        return out

    @cached_property
    def plugin_fields(self) -> dict[str, dict[str, set[str]]]:
        """Field -> {registered extractor -> the labels it takes from it} (fields that opted in)."""
        out: dict[str, dict[str, set[str]]] = {}
        for name, spec in self.domain.fields.items():
            for found in filter(None, map(extractor_ref, spec.extract)):
                out.setdefault(name, {}).setdefault(found[0], set()).add(found[1])
        return out

    @cached_property
    def tool_keys(self) -> dict[str, FieldSpec]:
        return key_index(self.domain)

    def _prov(self, msg: Message, start: int, end: int, text: str, extractor: str, confidence: float) -> Provenance:
        return Provenance(message_index=msg.index, round=msg.round, role=msg.role, span=(start, end), text=text,
                          extractor=extractor, confidence=confidence, domain_version=self.domain.version_hash,
                          message_id=msg.id)

    def extract(self, msg: Message, now: datetime, prior: Prior | None = None,
                held: dict[str, Any] | None = None) -> list[Candidate]:
        """All candidates in `msg`, in field order then text order (deterministic); a user
        message is read as the reply to `prior`, the assistant message before it; an assistant
        message against `held`, the search constraints the session holds (`dialogue: relax`)."""
        if msg.role == "tool":
            data = parse_json(msg.content)
            if data is not None:
                return self._from_tool(msg, data, now)
        text = msg.content[:MAX_SCAN_CHARS]
        questions = offer_spans(text) if msg.role == "assistant" and self.offers_on else []
        out: list[Candidate] = []
        ner_spans: list[Span] | None = None  # one model pass per message, only if a field asks for it
        spans: dict[str, list[Any]] = {}  # one pass of each registered extractor a field asks for
        lang = detect_language(text) if self.ner_fields else ""
        present = Present(text)  # the rules' and enums' literal pre-filter
        for name, spec in self.domain.fields.items():
            proposing = msg.role == "assistant" and msg.role not in spec.sources and "user" in spec.sources
            if msg.role not in spec.sources and not (proposing and questions):
                continue  # role policy: this role cannot speak for this field
            found = self._from_rules(msg, text, present, spec, now)
            if name in self.enum_matchers and spec.enum_match == "text":
                found.extend(self._from_enum(msg, text, present, spec))
            if name in self.ner_fields:
                ner_spans = self._spans(text, lang) if ner_spans is None else ner_spans
                asked = prior.asks if prior is not None and msg.role == "user" else ()
                found = outrank(found, self._from_ner(msg, text, spec, ner_spans, now, asked), self.domain.ner_margin)
            if name in self.plugin_fields:
                found.extend(self._from_plugins(msg, text, spec, spans))
            if proposing:
                found = [replace(c, kind="proposal") for c in found
                         if any(s <= c.provenance.span[0] < e for s, e in questions)]
                if spec.type == "text" and not spec.synonyms and not spec.is_list:
                    found = self._listed(msg, text, found)
            out.extend(found)
        out = self._one_field_per_span(self._inside_longer_names(out),
                                       set(prior.asks) if prior is not None and msg.role == "user" and self.answers_on else set())
        if msg.role != "user":
            return (out + (self._relaxed(msg, text, present, now, held) if msg.role == "assistant" and held else [])
                    + (self._mentioned(msg, text, present) if msg.role == "assistant" else []))
        out = self._landmarks_are_no_mentions(out)
        # "Is it furnished?", "这家酒店有会议室吗？": a value asked about a thing on the table is not a
        # wish, whether or not the domain reads offers (a recommendation is still on the table).
        asking = thing_questions(text) + yes_no_questions(text)
        if asking:  # (the thing a question is about may be named in it: a `mentions: new` name stays)
            out = [c for c in out if c.kind != "value" or self.domain.fields[c.field].mentions == "new"
                   or not any(s <= c.provenance.span[0] < e for s, e in asking)]
        if prior is not None and prior.named and self.offers_on:
            out = self._named_offers(msg, text, prior, out)
        if prior is not None and (prior.asks or prior.offered):
            out = self._answers(msg, text, prior, out, now)
        if self.no_preference_on:
            out = self._no_preference(msg, text, prior, out)
        return out + self._reply_acts(msg, text, prior) + self._new_search(msg, text, out)

    def _new_search(self, msg: Message, text: str, found: list[Candidate]) -> list[Candidate]:
        """With `dialogue: {new_search: <action>}`: a request for a search ("帮我找一家…", "find me
        another…") that states at least one of the action's fields starts a new search; Transform
        clears the earlier constraints it does not restate. It names no field (value: the action)."""
        action = self.domain.actions.get(str(self.domain.dialogue.get("new_search") or ""))
        cue = load_cues().new_search
        m = cue.search(text) if action is not None and cue is not None else None
        if m is None or action is None or not any(c.kind in ("value", "answer") and not c.negated and c.field in action.fields
                                                   for c in found):
            return []
        return [Candidate("", action.name, self._prov(msg, m.start(), m.end(), m.group(0), "dialogue:new_search", 1.0),
                          kind="new_search")]

    @cached_property
    def new_only(self) -> tuple[str, ...]:
        """The enum fields that take only values the conversation has not named before (`mentions: new`)."""
        return tuple(n for n, f in self.domain.fields.items() if f.mentions == "new" and n in self.enum_matchers)

    def _mentioned(self, msg: Message, text: str, present: Present) -> list[Candidate]:
        """The values of `mentions: new` fields an assistant message names ("推荐您去故宫"): Transform
        notes them, so that the user naming one of them later refers to it rather than asks for it."""
        return [replace(c, kind="mention") for name in self.new_only for c in self._from_enum(msg, text, present, self.domain.fields[name])]

    def _landmarks_are_no_mentions(self, found: list[Candidate]) -> list[Candidate]:
        """A name another field's rule reads with its cue ("故宫周边的餐馆": a landmark) is that field's;
        it is no mention of a `mentions: new` field."""
        if not self.new_only:
            return found
        ruled = [c.provenance.span for c in found if c.kind == "value" and c.provenance.extractor.startswith("rule:")]
        return [c for c in found if c.field not in self.new_only or not c.provenance.extractor.startswith("enum:")
                or not any(s < c.provenance.span[1] and c.provenance.span[0] < e for s, e in ruled)]

    @property
    def relax_action(self) -> str | None:
        """`dialogue: {relax: <action>}`: the action whose fields an assistant's offer may relax."""
        name = str(self.domain.dialogue.get("relax") or "")
        return name if name in self.domain.actions else None

    def _relaxed(self, msg: Message, text: str, present: Present, now: datetime, held: dict[str, Any]) -> list[Candidate]:
        """With `dialogue: {relax: <action>}`: an assistant message that states, for a constraint the
        user holds, a value outside it ("人均消费是119元" against "50-100元", "评分4.3分" against
        "4.5分以上", "a 3-star hotel" against "4 stars") offers something the search did not find:
        that constraint was relaxed. A `relax` candidate per such field (value: the value stated);
        Transform clears the constraint. A value that meets it ("人均89元") relaxes nothing, nor does
        one that says no number (an enum is met only by the same value)."""
        action = self.domain.actions.get(self.relax_action or "")
        out: list[Candidate] = []
        for name in action.fields if action is not None else ():
            spec = self.domain.fields.get(name)
            held_value = held.get(name)
            if spec is None or spec.is_list or held_value is None or held_value == NO_PREFERENCE:
                continue
            stated = self._from_rules(msg, text, present, spec, now)
            if spec.synonyms and spec.enum_match == "text":
                stated.extend(self._from_enum(msg, text, present, spec))
            first = next((c for c in stated if c.kind == "value" and not c.negated), None)
            if first is None:
                continue
            met = meets(str(held_value), str(first.value))
            if met is False or met is None and spec.synonyms and first.value != held_value:
                out.append(replace(first, kind="relax"))
        return out

    def _no_preference(self, msg: Message, text: str, prior: Prior | None, found: list[Candidate]) -> list[Candidate]:
        """`found`, plus "any" for the fields the reply says any value of will do ("any date is fine",
        "价格无所谓"; "I don't mind" / "随便" to the field's own question), where it states no value of them."""
        said = {c.field for c in found if c.kind in ("value", "answer")}
        asked = [a for a in prior.asks if a in self.indifference.fields] if prior is not None and self.answers_on else []
        hits = [(h.field, h.span) for h in self.indifference.named(text, tuple(asked))]
        alone = self.indifference.alone(text) if asked else None
        if alone is not None:
            hits += [(name, alone) for name in asked]
        out = list(found)
        for name, (s, e) in hits:
            if name in said:
                continue  # a value said with it is more than no preference ("any time after 5 pm")
            said.add(name)
            is_answer = name in asked
            out.append(Candidate(name, dict(NO_PREFERENCE), self._prov(msg, s, e, text[s:e], "dialogue:no_preference", 0.85),
                                 kind="answer" if is_answer else "value",
                                 asked_round=prior.round if is_answer and prior is not None else None))
        return out

    def _listed(self, msg: Message, text: str, offered: list[Candidate]) -> list[Candidate]:
        """`offered`, plus the names listed right after an offered name ("What about JT LeRoy, Penguin
        Highway or Suburban Birds?": a rule's cue reads the first; the others are offered alike, in
        order, so that "Penguin Highway is good" or "the second one" can pick them)."""
        out = list(offered)
        seen = {c.value for c in offered}
        for c in offered:
            items: list[re.Match[str]] = []
            pos = c.provenance.span[1]
            while len(items) < MAX_OPTIONS and (m := _LIST_ITEM.match(text, pos) or _LIST_ITEM_ZH.match(text, pos)):
                items.append(m)
                pos = m.end()
            if not any(_OR.search(m.group(0)[:m.start("name") - m.start()]) for m in items):
                continue  # alternatives are offered with an "or"; "Anjali Tate, M.D" is one name
            for m in items:
                if m.group("name") not in seen:
                    seen.add(m.group("name"))
                    out.append(replace(c, value=m.group("name"), provenance=self._prov(
                        msg, m.start("name"), m.end("name"), m.group("name"), c.provenance.extractor, c.provenance.confidence)))
        return out

    def _named_offers(self, msg: Message, text: str, prior: Prior, found: list[Candidate]) -> list[Candidate]:
        """`found`, plus the offered values the reply names word for word, for fields the reply says
        nothing else about: naming one of the options picks it ("Hellboy is good"), unless negated
        ("not Hellboy") or inside a question about it ("Is Hellboy scary?" asks)."""
        said = {c.field for c in found if c.kind in ("value", "answer")}
        asking = thing_questions(text) + yes_no_questions(text)
        out = list(found)
        for name, words, value in prior.named:
            spec = self.domain.fields.get(name)
            if name in said or len(words) < (MIN_NAMED_CHARS if words.isascii() else MIN_NAMED_CJK) or spec is None or spec.type != "text" or spec.synonyms:
                continue  # typed values and enums are read from the reply by their own parsers
            left = r"(?<![A-Za-z0-9])" if words[0].isascii() and words[0].isalnum() else ""
            right = r"(?![A-Za-z0-9])" if words[-1].isascii() and words[-1].isalnum() else ""  # no word edges in Chinese
            m = re.search(left + re.escape(words) + right, text, re.IGNORECASE)
            if m is None or is_negated(text, m.start(), m.end()) or any(s <= m.start() < e for s, e in asking):
                continue
            out.append(Candidate(name, value, self._prov(msg, m.start(), m.end(), m.group(0), "offer:named", 0.9)))
            said.add(name)
        return out

    @staticmethod
    def _inside_longer_names(found: list[Candidate]) -> list[Candidate]:
        """A value of one enum found inside a longer value of another ("烤鸭" in "全聚德烤鸭店", "pizza"
        in "Pizza Hut") is part of that name, not a mention of its own."""
        spans = [(c.provenance.span, c.field) for c in found if c.provenance.extractor.startswith("enum:")]
        return [c for c in found if not c.provenance.extractor.startswith("enum:") or not any(
            f != c.field and s <= c.provenance.span[0] and c.provenance.span[1] <= e and e - s > c.provenance.span[1] - c.provenance.span[0]
            for (s, e), f in spans)]

    def _one_field_per_span(self, found: list[Candidate], asked: set[str]) -> list[Candidate]:
        """One span says one value: where fields of the same type read the same words ("leaving on
        the 8th, returning on the 12th": "on" is a start cue before both dates), the field the
        assistant just asked for wins, then the more confident rule ("returning" over "on"); a tie
        keeps both. Enum fields are left alone (a synonym may rightly serve two of them)."""
        def rank(c: Candidate) -> tuple[bool, float]:
            return c.field in asked, c.provenance.confidence

        typed = [c for c in found if c.kind in ("value", "proposal") and c.field and not self.domain.fields[c.field].synonyms]
        if len({c.field for c in typed}) < 2:
            return found
        drop = set()
        for c in typed:
            kind, (s, e) = self.domain.fields[c.field].type, c.provenance.span
            if any(o.field != c.field and o.kind == c.kind and self.domain.fields[o.field].type == kind
                   and o.provenance.span[0] < e and s < o.provenance.span[1] and rank(o) > rank(c) for o in typed):
                drop.add(id(c))
        return [c for c in found if id(c) not in drop]

    def _reply_acts(self, msg: Message, text: str, prior: Prior | None) -> list[Candidate]:
        """Acceptance, decline and picks: about the previous round's offer, so they name no field."""
        out = []
        about = prior.offer_round if prior is not None else None  # None: the previous round's offer
        yes = confirmation(text)
        if yes:
            out.append(Candidate("", True, self._prov(msg, *yes, text[yes[0]:yes[1]], "confirm:yes", 1.0), kind="confirmation",
                                 asked_round=about))
        if not self.offers_on:
            return out
        no = decline(text) if not yes else None
        if no:
            out.append(Candidate("", False, self._prov(msg, *no, text[no[0]:no[1]], "confirm:no", 1.0), kind="decline",
                                 asked_round=about))
        chosen = pick(text)
        if chosen:
            n, s, e = chosen
            out.append(Candidate("", n, self._prov(msg, s, e, text[s:e], "confirm:pick", 1.0), kind="pick", asked_round=about))
        return out

    def keeps_offer_open(self, msg: Message, candidates: list[Candidate]) -> bool:
        """A user reply that only asks (a question; no value, no yes, no, or pick) leaves the offer it
        replies to open for the next reply."""
        text = msg.content[:MAX_SCAN_CHARS]
        return (self.offers_on and ("?" in text or "？" in text)
                and not any(c.kind in ("value", "answer", "confirmation", "decline", "pick") for c in candidates))

    def _answers(self, msg: Message, text: str, prior: Prior, found: list[Candidate], now: datetime) -> list[Candidate]:
        """`found`, with values for the asked fields marked as answers, and the reply parsed by
        each asked field's type where nothing else claimed it."""
        asked = set(prior.asks) if self.answers_on else set()
        out = [replace(c, kind="answer", asked_round=prior.round) if c.field in asked and c.kind == "value" else c
               for c in found]
        claimed = [(c.provenance.span, c) for c in out if c.kind in ("value", "answer")]
        others = any(c.kind == "value" for c in out)
        for name in dict.fromkeys([*(prior.asks if self.answers_on else ()), *prior.offered]):
            spec = self.domain.fields.get(name)
            if spec is None or "user" not in spec.sources or any(c.field == name and c.kind in ("value", "answer") for c in out):
                continue
            is_answer = name in asked
            if not is_answer and spec.type not in _TYPED_ANSWERS:
                continue  # an offered field is re-read only for weak typed forms ("yes, but at 11")
            # A question that offers values ("Which one, Sino or Rosie's?") is answered by naming or
            # accepting one of them, not with free text ("Sounds perfect" is no restaurant).
            got = self._answer_value(spec, text, now, free=is_answer and not others and name not in prior.offered)
            if got is None:
                continue
            value, s, e, how = got
            # An unasked field of the same type reading these words yields to the asked one ("When do
            # you come back?" "On the 12th": "on" is a start cue, but the question asked for the end).
            rivals = [c for (cs, ce), c in claimed if s < ce and cs < e and is_answer and c.field not in asked
                      and c.field and spec.synonyms == {} and self.domain.fields[c.field].type == spec.type]
            if any(s < ce and cs < e and not (s <= cs and ce <= e and e - s > ce - cs) and c not in rivals for (cs, ce), c in claimed):
                continue  # that span already says something else (and no more): don't force it into this field
            if rivals:
                out = [c for c in out if all(c is not r for r in rivals)]
                claimed = [(sp, c) for sp, c in claimed if all(c is not r for r in rivals)]
            prov = self._prov(msg, s, e, text[s:e], f"answer:{how}", 0.85)
            cand = Candidate(name, value, prov, negated=is_negated(text, s, e),
                             kind="answer" if is_answer else "value", asked_round=prior.round if is_answer else None)
            out.append(cand)
            claimed.append(((s, e), cand))
        return out

    def _answer_value(self, spec: FieldSpec, text: str, now: datetime, free: bool) -> tuple[Any, int, int, str] | None:
        """(value, start, end, parser) of `text` read as an answer for `spec`, or None."""
        if spec.type == "bool":
            said = confirmation(text) or decline(text)
            return (said == confirmation(text), said[0], said[1], "bool") if said else None
        parser = default_parser(spec)
        if parser != "text":
            parsed = parse_value(parser, text, spec, now, self.domain.default_currency, answer=True)
            return (parsed.value, parsed.start, parsed.end, parser) if parsed else None
        if (not free or spec.synonyms or spec.is_list or "?" in text or "？" in text or confirmation(text) or decline(text)
                or pick(text) or self.indifference.alone(text)):
            return None  # not a name: a question, a yes or no, a pick ("第三个") or no preference ("Either is fine")
        clause = re.match(r"[^。！!？?；;\n]*", text)
        end = clause.end() if clause else len(text)
        s, e = load_cues().strip_fillers(text[:end])
        if e <= s or e - s > MAX_FREE_ANSWER_CHARS or len(text[s:e].split()) > 6:
            return None
        return " ".join(text[s:e].split()), s, e, "text"

    def _spans(self, text: str, lang: str) -> list[Span]:
        """The spans of the domain's model for the message's language (the generic English model
        when the domain names none)."""
        model = self.domain.ner_models.get(lang)
        if model is not None:
            return [Span(s, e, t, with_subject(label, text), p, f"{model.extractor}:{label}")
                    for s, e, t, label, p in scored_spans(model, text)]
        if self.domain.ner_models or lang != "en":
            return []
        generic = registry.extractors.get("ner")  # the generic English model, a registered extractor
        return [Span(s, e, t, label, NER_CONFIDENCE, f"ner:{MODEL_ID}:{label}") for s, e, t, label in generic(text)]

    def _takers(self, label: str) -> tuple[str, ...]:
        """The fields of the domain that take model spans labelled `label` (from the user, or as
        the assistant's proposals of user-owned fields)."""
        if label not in self._takers_of:
            self._takers_of[label] = tuple(name for name, refs in self.ner_fields.items() if any(accepts(ref, label) for ref in refs))
        return self._takers_of[label]

    def _from_ner(self, msg: Message, text: str, spec: FieldSpec, spans: list[Span], now: datetime,
                  asked: tuple[str, ...] = ()) -> list[Candidate]:
        """The model's spans for `spec`. A span of a kind several fields take (an alarm's time and its
        new time, a song and its album) says what it is, not which of them it fills: it goes to a
        field only when the assistant just asked for that field; otherwise those fields keep their
        rules, whose cues ("change it to 7 pm", "the album X") tell them apart."""
        refs = self.ner_fields[spec.name]
        out = []
        for sp in spans:
            if not any(accepts(ref, sp.label) for ref in refs):
                continue
            if len(self._takers(sp.label)) > 1 and spec.name not in asked:
                continue
            value = self._span_value(spec, sp.text, now)
            if value is not None:
                out.append(Candidate(spec.name, value, self._prov(msg, sp.start, sp.end, sp.text, sp.extractor, sp.score),
                                     negated=is_negated(text, sp.start, sp.end)))
        return out

    def _span_value(self, spec: FieldSpec, raw: str, now: datetime) -> Any:
        """A model span as the field's value: an enum's canonical value, a parsed date/amount/count,
        or the words of the span for text."""
        if spec.synonyms:
            return next((c for _, _, _, c in self.enum_matchers[spec.name].finditer(raw)), None)
        parser = default_parser(spec)
        if parser == "text":
            return " ".join(raw.split())
        parsed = parse_value(parser, raw, spec, now, self.domain.default_currency)
        return parsed.value if parsed else None

    def _from_plugins(self, msg: Message, text: str, spec: FieldSpec, spans: dict[str, list[Any]]) -> list[Candidate]:
        out = []
        for name, labels in sorted(self.plugin_fields[spec.name].items()):
            extractor = registry.extractors.get(name)
            if name not in spans:
                spans[name] = list(extractor(text))
            confidence = float(getattr(extractor, "confidence", PLUGIN_CONFIDENCE))
            out += [Candidate(spec.name, " ".join(t.split()), self._prov(msg, s, e, t, f"{name}:{label}", confidence),
                              negated=is_negated(text, s, e))
                    for s, e, t, label in spans[name] if label in labels]
        return out

    def _from_rules(self, msg: Message, text: str, present: Present, spec: FieldSpec, now: datetime) -> list[Candidate]:
        out = []
        for rule in self.domain.field_rules[spec.name]:
            if not present.could_match(rule.pattern):
                continue  # none of the strings every match contains is here: the scan would find nothing
            typed = (rule.parse or default_parser(spec)) in TYPED_PARSERS
            for m in rule.pattern.finditer(text):
                group = next((g for g in rule.groups if m.group(g) is not None), None)
                if group is None:
                    continue
                raw = m.group(group)
                if typed and not _WORDLIKE.search(raw):
                    continue  # a number, date or count needs a letter, digit or ideograph: ",." holds none
                # The value nearest the cue: a group that opens the match has its cue after it (often
                # as a lookahead, so the cue stays free for the next match), so take its last value.
                nearest = "last" if m.start(group) == m.start() else "first"
                parsed = parse_value(rule.parse or default_parser(spec), raw, spec, now, self.domain.default_currency, nearest)
                if parsed is None:
                    continue
                value, start, end = parsed.value, m.start(group) + parsed.start, m.start(group) + parsed.end
                parser = rule.parse or default_parser(spec)
                if parser in NUMERIC_PARSERS and (_EXPONENT_AFTER.match(text, end) or _EXPONENT_BEFORE.search(text[max(0, start - 12):start])):
                    token = next((t for t in _EXPONENT_TOKEN.finditer(text, max(0, start - 12), end + 24)
                                  if t.start() <= start < t.end() or t.start() < end <= t.end()), None)
                    s0, e0 = (token.start(), token.end()) if token else (start, end)
                    out.append(Candidate(spec.name, text[s0:e0], self._prov(msg, s0, e0, text[s0:e0], f"rule:{rule.id}",
                                                                            rule.confidence), kind="not_a_quantity"))
                    continue
                if spec.synonyms:  # a rule feeding an enum field must land on a canonical value
                    value = next((c for _, _, _, c in self.enum_matchers[spec.name].finditer(str(value))), None)
                    if value is None:
                        continue
                out.append(Candidate(spec.name, value, self._prov(msg, start, end, text[start:end], f"rule:{rule.id}", rule.confidence),
                                     negated=is_negated(text, start, end)))
        return out

    def _from_enum(self, msg: Message, text: str, present: Present, spec: FieldSpec) -> list[Candidate]:
        return [Candidate(spec.name, canonical.lower() == "true" if spec.type == "bool" else canonical,
                          self._prov(msg, s, e, raw, f"enum:{spec.name}", 0.9), negated=is_negated(text, s, e))
                for s, e, raw, canonical in self.enum_matchers[spec.name].matches(text, present)]

    def _from_tool(self, msg: Message, data: Any, now: datetime) -> list[Candidate]:
        """Values of a tool result; a list of several records is a list of options the user picks
        from ("the second one"), offered as numbered proposals rather than set."""
        options = _options(data) if self.offers_on else None
        if options is None:
            return self._tool_values(msg, data, now)
        rest = {k: v for k, v in data.items() if v is not options} if isinstance(data, dict) else None
        out = self._tool_values(msg, rest, now) if rest else []
        for n, item in enumerate(options[:MAX_OPTIONS], start=1):
            out.extend(replace(c, kind="proposal", option=n) for c in self._tool_values(msg, item, now))
        return out

    def _tool_values(self, msg: Message, data: Any, now: datetime) -> list[Candidate]:
        out = []
        for key, value in walk(data):
            spec = self.tool_keys.get(key.lower())
            if spec is None or isinstance(value, (dict, list)) and spec.type not in ("money", "list"):
                continue
            pos = msg.content.find(f'"{key}"')
            start, end = (pos, pos + len(key) + 2) if pos >= 0 else (0, 0)
            normalised = self._tool_value(spec, value, now)
            if normalised is None:
                continue
            out.append(Candidate(spec.name, normalised, self._prov(msg, start, end, msg.content[start:end], "tool:json", 1.0)))
        return out

    def _tool_value(self, spec: FieldSpec, value: Any, now: datetime) -> Any:
        if spec.type == "money":
            if isinstance(value, dict) and "amount" in value:
                return {"amount": value["amount"], "currency": value.get("currency") or self.domain.default_currency}
            parsed = parse_value("money", str(value), spec, now, self.domain.default_currency)
            return parsed.value if parsed else None
        if spec.synonyms:
            items = value if isinstance(value, list) else [value]
            found = [c for item in items for _, _, _, c in self.enum_matchers[spec.name].finditer(str(item))]
            if spec.is_list:
                return sorted(set(found)) or None
            return found[0] if found else None
        if spec.is_list:
            return [str(v) for v in value] if isinstance(value, list) else [str(value)]
        if isinstance(value, bool) or spec.type in ("text",):
            return str(value) if spec.type == "text" else value
        parsed = parse_value(default_parser(spec), str(value), spec, now, self.domain.default_currency)
        return parsed.value if parsed else None


def _records(value: Any) -> list[Any] | None:
    """`value` when it is a list of several records (JSON objects), else None."""
    if isinstance(value, list) and len(value) >= 2 and all(isinstance(x, dict) for x in value):
        return value
    return None


def _options(data: Any) -> list[Any] | None:
    """The records of a tool result that lists several of them (top level, or one key's list)."""
    if isinstance(data, dict):
        lists = [r for v in data.values() if (r := _records(v)) is not None]
        return lists[0] if len(lists) == 1 else None
    return _records(data)
