"""Extract: one message in, candidates out. Pure: no state, no store, no clock.

Four sources of candidates, each tagged with an extractor id for provenance:
- `rule:<id>`: regex rules from the packs a field's `extract` selects;
- `enum:<field>`: the synonyms an enum (or list-of-enum) field declares;
- `ner:<model>:<label>`: entities, for fields that opt in;
- `<extractor>:<label>`: spans of a registered third-party extractor (`extract: [caps.WORD]`,
  entry-point group `context_editor.extractors`);
- `tool:json`: keys of a JSON tool result.
Negation, proposals and confirmations are decided here (they are properties of the text); what
they mean for state is Transform's business. A role a field does not accept yields nothing for
it, except the assistant's questions about user-owned fields: those are `proposal` candidates
that a user's plain yes in the next round turns into values (see confirm.py).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from functools import cached_property
from typing import Any

from .. import registry
from ..domain import Domain, FieldSpec
from ..domain.rulepacks import extractor_ref
from ..lang import detect_language
from ..model import Candidate, Message, Provenance
from .confirm import confirmation, question_spans
from .enums import EnumMatcher
from .negation import is_negated
from .ner import CONFIDENCE as NER_CONFIDENCE, MODEL_ID, ner_label
from .tools import key_index, parse_json, walk
from .values import default_parser, parse_value

PLUGIN_CONFIDENCE = 0.8  # a registered extractor's, unless it has a `confidence` attribute
MAX_SCAN_CHARS = 20_000  # prose beyond this is kept in the log but not scanned (bounded cost)


class Extractor:
    """Compiled extraction for one domain."""

    def __init__(self, domain: Domain):
        self.domain = domain

    @cached_property
    def enum_matchers(self) -> dict[str, EnumMatcher]:
        return {name: EnumMatcher(spec) for name, spec in self.domain.fields.items() if spec.synonyms}

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

    def extract(self, msg: Message, now: datetime) -> list[Candidate]:
        """All candidates in `msg`, in field order then text order (deterministic)."""
        if msg.role == "tool":
            data = parse_json(msg.content)
            if data is not None:
                return self._from_tool(msg, data, now)
        text = msg.content[:MAX_SCAN_CHARS]
        questions = question_spans(text) if msg.role == "assistant" else []
        out: list[Candidate] = []
        ents: list[Any] | None = None  # one model pass per message, only if a field asks for it
        spans: dict[str, list[Any]] = {}  # one pass of each registered extractor a field asks for
        english = detect_language(text) == "en" if self.ner_fields else False
        for name, spec in self.domain.fields.items():
            proposing = msg.role == "assistant" and msg.role not in spec.sources and "user" in spec.sources
            if msg.role not in spec.sources and not (proposing and questions):
                continue  # role policy: this role cannot speak for this field
            found = self._from_rules(msg, text, spec, now)
            if name in self.enum_matchers:
                found.extend(self._from_enum(msg, text, spec))
            if name in self.ner_fields and english:
                ents = registry.extractors.get("ner")(text) if ents is None else ents
                found.extend(self._from_ner(msg, text, spec, ents))
            if name in self.plugin_fields:
                found.extend(self._from_plugins(msg, text, spec, spans))
            if proposing:
                found = [replace(c, kind="proposal") for c in found
                         if any(s <= c.provenance.span[0] < e for s, e in questions)]
            out.extend(found)
        yes = confirmation(text) if msg.role == "user" else None
        if yes:
            out.append(Candidate("", True, self._prov(msg, *yes, text[yes[0]:yes[1]], "confirm:yes", 1.0), kind="confirmation"))
        return out

    def _from_ner(self, msg: Message, text: str, spec: FieldSpec, ents: list[Any]) -> list[Candidate]:
        labels = self.ner_fields[spec.name]
        return [Candidate(spec.name, " ".join(t.split()),
                          self._prov(msg, s, e, t, f"ner:{MODEL_ID}:{label}", NER_CONFIDENCE), negated=is_negated(text, s, e))
                for s, e, t, label in ents if label in labels]

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

    def _from_rules(self, msg: Message, text: str, spec: FieldSpec, now: datetime) -> list[Candidate]:
        out = []
        for rule in self.domain.field_rules[spec.name]:
            for m in rule.pattern.finditer(text):
                group = next((g for g in rule.groups if m.group(g) is not None), None)
                if group is None:
                    continue
                raw = m.group(group)
                # The value nearest the cue: a group that opens the match has its cue after it (often
                # as a lookahead, so the cue stays free for the next match), so take its last value.
                nearest = "last" if m.start(group) == m.start() else "first"
                parsed = parse_value(rule.parse or default_parser(spec), raw, spec, now, self.domain.default_currency, nearest)
                if parsed is None:
                    continue
                value, start, end = parsed.value, m.start(group) + parsed.start, m.start(group) + parsed.end
                if spec.synonyms:  # a rule feeding an enum field must land on a canonical value
                    value = next((c for _, _, _, c in self.enum_matchers[spec.name].finditer(str(value))), None)
                    if value is None:
                        continue
                out.append(Candidate(spec.name, value, self._prov(msg, start, end, text[start:end], f"rule:{rule.id}", rule.confidence),
                                     negated=is_negated(text, start, end)))
        return out

    def _from_enum(self, msg: Message, text: str, spec: FieldSpec) -> list[Candidate]:
        return [Candidate(spec.name, canonical, self._prov(msg, s, e, raw, f"enum:{spec.name}", 0.9),
                          negated=is_negated(text, s, e))
                for s, e, raw, canonical in self.enum_matchers[spec.name].finditer(text)]

    def _from_tool(self, msg: Message, data: Any, now: datetime) -> list[Candidate]:
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
