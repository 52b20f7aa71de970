"""Inject: state -> the minimal XML context one action needs, within an exact token budget.

What goes in is decided by the action view (its fields, required fields, recent rounds); what
stays when the budget is tight is decided by priority: required fields and missing asks
first, then optional fields, then alerts (newest first), then recent turns (newest first). Whatever is dropped is dropped
whole and named in <truncated_context>; a value is never cut. The `tokens` attribute is the
exact count of the whole output, itself included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from jinja2 import ChoiceLoader, DictLoader, FileSystemLoader, StrictUndefined, Template, TemplateNotFound
from jinja2.sandbox import SandboxedEnvironment

from ..domain import ActionSpec, Domain
from ..errors import Errors
from ..lang import detect_language
from ..model import Message, State
from ..resources import templates_dir
from . import compact, history
from .tokens import count_tokens, max_token_bytes
from .xmltext import xml_safe

CRITICAL_COMPRESSION_FAILURE = "CRITICAL_COMPRESSION_FAILURE"
_TOKENS_SLOT = "TOKENS-SLOT-7F3A"  # placeholder for the `tokens` attribute, filled after counting
TEMPLATES_DIR = templates_dir()
DEFAULT_TEMPLATE = "default.xml.j2"


def format_value(value: Any) -> str:
    """A value as the model reads it: money as "2000 CNY", lists comma-separated."""
    if isinstance(value, dict) and "amount" in value:
        amount = value["amount"]
        amount = int(amount) if isinstance(amount, float) and amount.is_integer() else amount
        return f"{amount} {value.get('currency', '')}".strip()
    if isinstance(value, list):
        return ", ".join(format_value(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class RenderedContext:
    action: str
    xml: str
    tokens: int
    budget: int
    fields: list[str]
    missing: list[str]
    dropped: list[str] = field(default_factory=list)
    source_tokens: int = 0  # tokens of the raw messages the context was compacted from

    @property
    def compaction_ratio(self) -> float:
        """Context tokens / tokens of the raw window it stands for (the first post-compaction check;
        the second, survival of every critical field, is enforced when rendering)."""
        return self.tokens / self.source_tokens if self.source_tokens else 1.0


def lost_fields(xml: str, expected: dict[str, str]) -> list[str]:
    """The protected fields (name -> rendered value) the context has no `<field name=…>` element
    for, holding that value. A substring test is not enough: "no layovers" in a recent turn must
    not pass for a dropped `flight_exclusions: layover`. A context that is not XML loses them all."""
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError:
        return list(expected)
    shown = {(el.get("name"), (el.text or "").strip()) for el in root.iter("field")}
    return [n for n, text in expected.items() if (n, xml_safe(text).strip()) not in shown]


def _finalize(value: Any) -> Any:
    return xml_safe(value) if isinstance(value, str) else value


class Renderer:
    """Renders action views of one domain with sandboxed, autoescaping Jinja templates."""

    def __init__(self, domain: Domain, templates_dir: Path = TEMPLATES_DIR, model: str | None = None,
                 scorer: history.Scorer | None = None):
        self.domain, self.model, self.scorer = domain, model, scorer
        # The domain's own templates (stored with its version) first, then the bundled ones.
        loader = ChoiceLoader([DictLoader(domain.templates), FileSystemLoader(str(templates_dir))])
        self.env = SandboxedEnvironment(loader=loader, autoescape=True,
                                        undefined=StrictUndefined, finalize=_finalize, keep_trailing_newline=False)

    def action(self, name: str) -> ActionSpec:
        if name not in self.domain.actions:
            raise Errors.UNKNOWN_ACTION(action=name, domain=self.domain.name, known=", ".join(sorted(self.domain.actions)))
        return self.domain.actions[name]

    def render(self, state: State, action: str, messages: list[Message], budget: int | None = None,
               language: str | None = None, _template: str | None = None, _alerts: list[Any] | None = None) -> RenderedContext:
        """`messages`: the session's messages from at least `recent_rounds + history_rounds` rounds back."""
        spec = self.action(action)
        budget = budget or spec.budget_tokens
        limit = budget - spec.safety_margin
        names = list(dict.fromkeys([*spec.fields, *(n for n, f in self.domain.fields.items() if f.shared)]))
        present = [n for n in names if state.get(n) is not None and self._shown(n, state)]
        language = language or self._language(messages)
        # Ask for what the action needs and for every critical fact it lost (the seeds' forgetting test).
        wanted = [n for n in names if n in spec.required or self.domain.fields[n].critical]
        missing = [{"name": n, "ask": self._ask(n, language)} for n in wanted if state.get(n) is None]
        # A field's alert stays until the field gets a valid value; an alert about no field
        # (a context loop, say) is news only while its round is among the recent ones.
        alerts = [{"code": a.code, "round": a.round, "message": a.message} for a in state.alerts
                  if a.field in names or (a.field is None and a.round > state.round - max(spec.recent_rounds, 1))]
        # Critical fields are protected like required ones: compaction must never lose them.
        protected = [n for n in present if n in spec.required or self.domain.fields[n].critical]
        optional = [n for n in present if n not in protected]
        recent_from = state.round - spec.recent_rounds
        # A message that cannot fit even alone is dropped whole up front, without tokenising it.
        too_big = max_token_bytes(self.model) * limit
        visible = [m for m in messages if m.role != "system" and len(m.content) <= too_big]
        oversized = sum(1 for m in messages if m.role != "system" and len(m.content) > too_big)
        recent = history.chains(history.dedupe_tool_results([m for m in visible if m.round > recent_from]))
        older = [m for m in visible if recent_from - spec.history_rounds < m.round <= recent_from]
        vocabulary = history.action_vocabulary(self.domain, spec, state)
        ranked = history.select_history(spec, state, older, vocabulary, self.scorer)[: spec.max_history]
        # What the model may see of each message: trimmed tool JSON, out-of-scope spans masked.
        # Digest and entity graph are built from these texts too, so nothing hidden leaks through them.
        hidden = history.hidden_spans(self.domain, spec, state)
        seen = {m.index: history.turn(self.domain, m, hidden) for m in visible}
        entities = compact.entity_graph([seen[m.index]["content"] for m in visible],
                                        [v for v in (state.get(n) for n in names) if isinstance(v, str)])
        template = self.env.get_template(_template) if _template else self._template(spec)

        def build(kept: dict[str, int]) -> tuple[str, int, list[str]]:
            """Render with the first kept[tier] items of each tier."""
            hist = sorted(ranked[: kept["history"]], key=lambda u: u.messages[0].index)
            turns = [m for unit in recent[len(recent) - kept["recent"]:] for m in unit]
            shown = {m.index for u in hist for m in u.messages} | {m.index for m in turns}
            lines = compact.distil([(m, seen[m.index]["content"]) for m in older if m.index not in shown], vocabulary,
                                   {seen[i]["content"] for i in shown})
            digest = lines[len(lines) - min(kept["digest"], len(lines)):]
            fields = [n for n in names if n in protected or n in optional[: kept["optional"]]]
            dropped = _dropped_summary(len(recent) - kept["recent"], len(optional) - kept["optional"],
                                       len(ranked) - kept["history"], oversized, len(lines) - len(digest),
                                       len(alerts) - kept["alerts"])
            ctx = {"action": action, "domain": self.domain.name, "round": state.round, "budget": budget,
                   "phase": state.phase, "fields": [self._field(state, n) for n in fields], "missing": missing,
                   "alerts": alerts[len(alerts) - kept["alerts"]:] + (_alerts or []), "dropped": ", ".join(dropped),
                   "entities": entities[: kept["entities"]],
                   "digest": [{"round": d.round, "sources": " ".join(f"m{i}" for i in d.sources), "text": d.text}
                              for d in digest],
                   "history": [seen[m.index] for u in hist for m in u.messages],
                   "turns": [seen[m.index] for m in turns]}
            return (*self._fixed_point(template, ctx), dropped)

        # Tiers in the order they give way: the entity graph, digest lines (oldest first), older
        # history (lowest score first), recent turns (oldest first), alerts (oldest first),
        # optional fields (last declared first). Within a tier the token count only grows with
        # what is kept, so the most that fits is found by bisection.
        kept = {"entities": len(entities), "digest": compact.MAX_LINES, "history": len(ranked),
                "recent": len(recent), "alerts": len(alerts), "optional": len(optional)}
        xml, tokens, dropped = build(kept)
        for tier in kept:
            if tokens <= limit:
                break
            lo, hi = 0, kept[tier]  # invariant: keeping hi is too many
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if build({**kept, tier: mid})[1] <= limit:
                    lo = mid
                else:
                    hi = mid - 1
            kept[tier] = lo
            xml, tokens, dropped = build(kept)
        if tokens > limit:
            raise Errors.OVER_BUDGET(action=action, tokens=tokens, limit=limit, protected=", ".join(protected) or "none",
                                     missing=", ".join(m["name"] for m in missing) or "none", alerts=len(alerts),
                                     needed=tokens + spec.safety_margin)
        fields = [n for n in names if n in protected or n in optional[: kept["optional"]]]
        lost = lost_fields(xml, {n: self._field(state, n)["text"] for n in protected})
        if lost:
            if template.name == DEFAULT_TEMPLATE:
                raise Errors.CRITICAL_LOST(lost=lost)
            # The action's template dropped a critical fact: keep the plain default rendering instead.
            alert = {"code": CRITICAL_COMPRESSION_FAILURE, "round": state.round,
                     "message": f"template {template.name} lost protected fields {', '.join(lost)}; default template used"}
            return self.render(state, action, messages, budget, language, _template=DEFAULT_TEMPLATE, _alerts=[alert])
        source = count_tokens("\n".join(f"{m.role}: {m.content}" for m in visible), self.model)
        return RenderedContext(action, xml, tokens, budget, fields, [m["name"] for m in missing], dropped, source)

    def _shown(self, name: str, state: State) -> bool:
        """Transient fields are instructions: shown only in the round they were given."""
        spec = self.domain.fields[name]
        return spec.cls != "transient" or state.fields[name].set_round == state.round

    def _fixed_point(self, template: Template, ctx: dict[str, Any]) -> tuple[str, int]:
        """Render once, then settle the `tokens` attribute on the exact count of the output containing it."""
        draft: str = template.render(**ctx, tokens=_TOKENS_SLOT)

        def fill(n: int, pad: int = 0) -> str:
            return draft.replace(_TOKENS_SLOT, str(n), 1).replace("<context ", "<context " + " " * pad, 1)

        claimed = count_tokens(fill(0), self.model)
        for _ in range(4):
            actual = count_tokens(fill(claimed), self.model)
            if actual == claimed:
                return fill(claimed), actual
            claimed = actual
        # The count can oscillate across a digit boundary: pad the tag until claim and count meet
        # (both only grow, so this ends).
        for pad in range(1, 256):
            xml = fill(claimed, pad)
            actual = count_tokens(xml, self.model)
            if actual == claimed:
                return xml, actual
            claimed = max(claimed, actual)
        raise Errors.TOKENS_UNSETTLED()

    def _template(self, spec: ActionSpec) -> Template:
        own = f"{spec.name}.xml.j2"
        name = spec.template or (own if own in self.domain.templates or (TEMPLATES_DIR / own).exists() else DEFAULT_TEMPLATE)
        try:
            return self.env.get_template(name)
        except TemplateNotFound:
            return self.env.get_template(DEFAULT_TEMPLATE)

    def _field(self, state: State, name: str) -> dict[str, Any]:
        fs = state.fields[name]
        return {"name": name, "round": fs.set_round, "source": fs.source,
                "text": format_value(fs.value)}

    def _ask(self, name: str, language: str) -> str:
        ask = self.domain.fields[name].ask
        return ask.get(language) or next(iter(ask.values()), f"Please provide {name}.")

    def _language(self, messages: list[Message]) -> str:
        for m in reversed(messages):
            if m.role == "user":
                return detect_language(m.content)
        return self.domain.languages[0]


def _dropped_summary(turns: int, fields: int, older: int, oversized: int, digest: int, alerts: int = 0) -> list[str]:
    parts = [(turns, "recent turn"), (fields, "field"), (older, "older message"), (oversized, "oversized message"),
             (digest, "digest line"), (alerts, "alert")]
    return [f"{n} {label}{'s' if n != 1 else ''}" for n, label in parts if n]
