"""Inject: state -> the minimal XML context one action needs, within an exact token budget.

What goes in is decided by the action view (its fields, required fields, recent rounds) and
assembled in the articles' order (system, goal, subtask, state, summary zone, history, recent
turns); what stays when the budget is tight is decided by priority (TIERS, below): required and
critical fields and missing asks always; the latest user message last of all. Whatever is
dropped is dropped whole and named in <truncated_context>; a value is never cut. The `tokens` attribute is the
exact count of the whole output, itself included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from xml.etree import ElementTree

from markupsafe import Markup, escape
from jinja2 import ChoiceLoader, DictLoader, FileSystemLoader, StrictUndefined, Template, TemplateNotFound
from jinja2.sandbox import SandboxedEnvironment

from ..domain import ActionSpec, Domain
from ..errors import Errors
from ..lang import detect_language
from ..model import Message, State
from ..resources import templates_dir
from . import compact, history
from .compact import STAGE_ROUNDS
from .budget import Window, resolve_budget
from .tokens import count_tokens, max_token_bytes, tokenizer_for
from .xmltext import text_node, xml_safe

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
    estimated: bool = False  # counted by an estimate (a model without a published tokenizer), not exactly
    alerts: list[dict[str, Any]] = field(default_factory=list)  # about the render, for the caller (not in the XML)

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
    if isinstance(value, Markup):  # already made safe by the `text` filter
        return value
    return xml_safe(value) if isinstance(value, str) else value


# Tiers in the order they give way to the budget. Within a tier the oldest (or, for history,
# the lowest scored) goes first; the token count only grows with what is kept, so the most
# that fits is found by bisection. The latest user message outlives every optional field, and
# facts of the summary zone give way only after the optional fields.
TIERS = ("entities", "notes", "history", "values", "recent", "alerts", "optional", "facts", "latest")


@dataclass
class _Plan:
    """Everything one render needs that does not depend on what the budget keeps."""

    action: str
    spec: ActionSpec
    budget: int
    limit: int
    template: Template
    names: list[str]
    protected: list[str]
    optional: list[str]
    missing: list[dict[str, Any]]
    alerts: list[dict[str, Any]]  # the state's alerts, oldest first (droppable)
    fixed_alerts: list[dict[str, Any]]  # the render's own (scorer fallback, template fallback): always shown
    anchors: dict[str, dict[str, Any]]
    seen: dict[int, dict[str, Any]]  # message index -> the turn as the model may see it
    recent: list[list[Message]]  # recent units, oldest first, the latest user unit excluded
    latest: list[list[Message]]  # the unit of the latest user message (0 or 1 unit)
    ranked: list[history.Unit]
    entities: list[compact.Entity]
    zone: dict[str, list[compact.ZoneLine]]  # tier -> lines, oldest first
    window_from: int
    oversized: int

    def sizes(self) -> dict[str, int]:
        return {"entities": len(self.entities), "notes": len(self.zone["notes"]), "history": len(self.ranked),
                "values": len(self.zone["values"]), "recent": len(self.recent), "alerts": len(self.alerts),
                "optional": len(self.optional),
                "facts": len(self.zone["facts"]), "latest": len(self.latest)}


class Renderer:
    """Renders action views of one domain with sandboxed, autoescaping Jinja templates."""

    def __init__(self, domain: Domain, templates_dir: Path = TEMPLATES_DIR, model: str | None = None,
                 scorer: history.Scorer | None = None, system: str | None = None, window: Window | None = None,
                 condense: Callable[[str], str] | None = None):
        """`condense`: how a `class: trace` field's text becomes one line (the pipeline gives the
        checked distillation of context_editor.llm); without it the text is shown as it is."""
        self.domain, self.model, self.scorer, self.system, self.window = domain, model, scorer, system, window
        self.condense = condense
        # The domain's own templates (stored with its version) first, then the bundled ones.
        loader = ChoiceLoader([DictLoader(domain.templates), FileSystemLoader(str(templates_dir))])
        self.env = SandboxedEnvironment(loader=loader, autoescape=True,
                                        undefined=StrictUndefined, finalize=_finalize, keep_trailing_newline=False)
        self.env.filters["text"] = text_node

    def action(self, name: str) -> ActionSpec:
        if name not in self.domain.actions:
            raise Errors.UNKNOWN_ACTION(action=name, domain=self.domain.name, known=", ".join(sorted(self.domain.actions)))
        return self.domain.actions[name]

    def render(self, state: State, action: str, messages: list[Message], budget: int | str | None = None,
               language: str | None = None, summary: list[compact.SummaryLine] | None = None,
               anchors: dict[str, dict[str, Any]] | None = None, _template: str | None = None,
               _alerts: list[Any] | None = None) -> RenderedContext:
        """`messages`: the session's messages from at least `recent_rounds + history_rounds` rounds back.
        `summary`: the session's summary-zone lines up to the recent window (`context_editor.memory`);
        `anchors`: the task goal and subtask ({"goal": {"text", "round"}, …})."""
        plan = self._plan(state, action, messages, budget, language, summary or [], anchors or {}, _template, _alerts)
        kept, (xml, tokens, dropped) = self._fit(plan, state)
        if tokens > plan.limit:
            raise Errors.OVER_BUDGET(action=action, tokens=tokens, limit=plan.limit, protected=", ".join(plan.protected) or "none",
                                     missing=", ".join(m["name"] for m in plan.missing) or "none", alerts=len(plan.alerts),
                                     needed=tokens + plan.spec.safety_margin)
        fields = self._kept_fields(plan, kept)
        lost = lost_fields(xml, {n: self._field(state, n)["text"] for n in plan.protected})
        if lost:
            return self._fallback(plan, state, messages, lost, summary, anchors)
        visible = [m for m in messages if m.role != "system"]
        source = count_tokens("\n".join(f"{m.role}: {m.content}" for m in visible), self.model)
        return RenderedContext(action, xml, tokens, plan.budget, fields, [m["name"] for m in plan.missing], dropped, source,
                               tokenizer_for(self.model).estimated)

    def _fallback(self, plan: _Plan, state: State, messages: list[Message], lost: list[str],
                  summary: list[compact.SummaryLine] | None, anchors: dict[str, dict[str, Any]] | None) -> RenderedContext:
        """The action's template dropped a critical fact: keep the plain default rendering instead."""
        if plan.template.name == DEFAULT_TEMPLATE:
            raise Errors.CRITICAL_LOST(lost=lost)
        alert = {"code": CRITICAL_COMPRESSION_FAILURE, "round": state.round,
                 "message": f"template {plan.template.name} lost protected fields {', '.join(lost)}; default template used"}
        return self.render(state, plan.action, messages, plan.budget, None, summary, anchors,
                           _template=DEFAULT_TEMPLATE, _alerts=[alert])

    def _plan(self, state: State, action: str, messages: list[Message], budget: int | str | None,
              language: str | None, summary: list[compact.SummaryLine], anchors: dict[str, dict[str, Any]],
              template_name: str | None, extra_alerts: list[Any] | None) -> _Plan:
        spec = self.action(action)
        resolved = resolve_budget(budget, spec.budget_tokens, self.window)
        limit = resolved - spec.safety_margin
        names = list(dict.fromkeys([*spec.fields, *(n for n, f in self.domain.fields.items() if f.shared)]))
        present = [n for n in names if state.get(n) is not None and self._shown(n, state)]
        language = language or self._language(messages)
        # Ask for what the action needs and for every critical fact it lost (the seeds' forgetting test).
        wanted = [n for n in names if n in spec.required or self.domain.fields[n].critical]
        missing = [{"name": n, "ask": self._ask(n, language)} for n in wanted if state.get(n) is None]
        # Critical fields are protected like required ones: compaction must never lose them.
        protected = [n for n in present if n in spec.required or self.domain.fields[n].critical]
        recent_from = state.round - spec.recent_rounds
        window_from = recent_from - spec.history_rounds + 1
        # A message that cannot fit even alone is dropped whole up front, without tokenising it.
        too_big = max_token_bytes(self.model) * limit
        # Identical tool results are shown once, the latest, across history and recent turns alike.
        visible = history.dedupe_tool_results([m for m in messages if m.role != "system" and len(m.content) <= too_big])
        units = history.chains([m for m in visible if m.round > recent_from])
        latest = _latest_user_unit(units)
        older = [m for m in visible if window_from <= m.round <= recent_from]
        vocabulary = history.action_vocabulary(self.domain, spec, state)
        # What the model may see of each message: trimmed tool JSON, out-of-scope spans masked.
        # The summary zone and the entity graph are built from these texts too, so nothing hidden leaks.
        hidden = history.hidden_spans(self.domain, spec, state)
        seen = {m.index: history.turn(self.domain, m, hidden) for m in visible}
        ranked = history.select_history(spec, state, older, vocabulary, self.scorer, anchors)[: spec.max_history]
        scorer_alerts: list[dict[str, Any]] = getattr(self.scorer, "drain_alerts", list)()
        lines = compact.zone_lines([line for line in summary if line.round <= recent_from], window_from,
                                   vocabulary, compact.covered_spans(state), hidden.spans)
        return _Plan(
            action=action, spec=spec, budget=resolved, limit=limit,
            template=self.env.get_template(template_name) if template_name else self._template(spec),
            names=names, protected=protected, optional=[n for n in present if n not in protected], missing=missing,
            alerts=self._alerts(state, spec, names), fixed_alerts=scorer_alerts + (extra_alerts or []), anchors=anchors, seen=seen,
            recent=[u for u in units if u is not latest], latest=[latest] if latest else [],
            ranked=ranked,
            entities=compact.entity_graph([seen[m.index]["content"] for m in visible],
                                          [v for n in names if isinstance(v := state.get(n), str)
                                           and self.domain.fields[n].cls != "trace"],
                                          self._relations(state, present)),
            zone={tier: [line for line in lines if line.rank == rank]
                  for tier, rank in (("notes", compact.NOTE), ("values", compact.VALUE), ("facts", compact.FACT))},
            window_from=window_from, oversized=sum(1 for m in messages if m.role != "system" and len(m.content) > too_big))

    def _alerts(self, state: State, spec: ActionSpec, names: list[str]) -> list[dict[str, Any]]:
        """A field's alert stays until the field gets a valid value; an alert about no field
        (a context loop, say) is news only while its round is among the recent ones."""
        return [{"code": a.code, "round": a.round, "message": a.message} for a in state.alerts
                if a.field in names or (a.field is None and a.round > state.round - max(spec.recent_rounds, 1))]

    def _fit(self, plan: _Plan, state: State) -> tuple[dict[str, int], tuple[str, int, list[str]]]:
        """The most of each tier that fits the budget, tiers giving way in TIERS order."""
        kept = plan.sizes()
        result = self._build(plan, state, kept)
        for tier in TIERS:
            if result[1] <= plan.limit:
                break
            lo, hi = 0, kept[tier]  # invariant: keeping hi is too many
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if self._build(plan, state, {**kept, tier: mid})[1] <= plan.limit:
                    lo = mid
                else:
                    hi = mid - 1
            kept[tier] = lo
            result = self._build(plan, state, kept)
        return kept, result

    def _kept_fields(self, plan: _Plan, kept: dict[str, int]) -> list[str]:
        return [n for n in plan.names if n in plan.protected or n in plan.optional[: kept["optional"]]]

    def _build(self, plan: _Plan, state: State, kept: dict[str, int]) -> tuple[str, int, list[str]]:
        """Render with the first kept[tier] items of each tier; returns the XML, its tokens and what was dropped."""
        hist = sorted(plan.ranked[: kept["history"]], key=lambda u: u.messages[0].index)
        units = plan.recent[len(plan.recent) - kept["recent"]:] + plan.latest[: kept["latest"]]
        turns = sorted((m for unit in units for m in unit), key=lambda m: m.index)
        shown = {m.index for u in hist for m in u.messages} | {m.index for m in turns}
        shown_text = "\n".join(plan.seen[i]["content"] for i in shown)
        zone, lost, zone_dropped = _kept_zone(plan, kept, shown, shown_text)
        dropped = _dropped_summary(plan, kept, zone_dropped)
        ctx = {"action": plan.action, "domain": self.domain.name, "round": state.round, "budget": plan.budget,
               "tokens_estimated": tokenizer_for(self.model).estimated,
               "phase": state.phase, "system": self.system, "goal": plan.anchors.get("goal"),
               "subtask": plan.anchors.get("subtask"),
               "fields": [self._field(state, n) for n in self._kept_fields(plan, kept)], "missing": plan.missing,
               "alerts": plan.alerts[len(plan.alerts) - kept["alerts"]:] + plan.fixed_alerts,
               "dropped": ", ".join(dropped), "lost": " ".join(f"m{i}" for i in lost),
               "entities": plan.entities[: kept["entities"]], "summary": _zone_groups(zone, plan.window_from),
               "history": [plan.seen[m.index] for u in hist for m in u.messages],
               "turns": [plan.seen[m.index] for m in turns]}
        return (*self._fixed_point(plan.template, ctx), dropped)

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
        text = format_value(fs.value)
        if self.condense is not None and self.domain.fields[name].cls == "trace":
            text = self.condense(text)
        return {"name": name, "round": fs.set_round, "source": fs.source, "text": text}

    def _relations(self, state: State, present: list[str]) -> list[str]:
        """The values of the action's `class: relation` fields: the seeds of the entity graph."""
        values: list[str] = []
        for name in present:
            if self.domain.fields[name].cls == "relation":
                value = state.get(name)
                values.extend(format_value(v) for v in (value if isinstance(value, list) else [value]))
        return values

    def _ask(self, name: str, language: str) -> str:
        ask = self.domain.fields[name].ask
        return ask.get(language) or next(iter(ask.values()), f"Please provide {name}.")

    def _language(self, messages: list[Message]) -> str:
        for m in reversed(messages):
            if m.role == "user":
                return detect_language(m.content)
        return self.domain.languages[0]


def _latest_user_unit(units: list[list[Message]]) -> list[Message] | None:
    for unit in reversed(units):
        if any(m.role == "user" for m in unit):
            return unit
    return None


def _kept_zone(plan: _Plan, kept: dict[str, int], shown: set[int],
               shown_text: str) -> tuple[list[compact.ZoneLine], list[int], int]:
    """The summary lines kept (newest of each tier), leaving out what is shown verbatim; and the
    sources of the facts and open values the budget pushed out (named in <truncated_context>)."""
    out: list[compact.ZoneLine] = []
    lost: list[int] = []
    dropped = 0
    for tier in ("notes", "values", "facts"):
        candidates = [z for z in plan.zone[tier] if not set(z.sources) <= shown and z.text not in shown_text]
        n = min(kept[tier], len(candidates))
        out.extend(candidates[len(candidates) - n:])
        dropped += len(candidates) - n
        if tier != "notes":
            lost.extend(z.sources[-1] for z in candidates[: len(candidates) - n])
    return sorted(out, key=lambda z: (z.round, z.sources)), sorted(lost), dropped


def _zone_groups(lines: list[compact.ZoneLine], window_from: int) -> list[dict[str, Any]]:
    """Lines grouped as the template shows them: the rolled-up session summary, then each stage."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for z in lines:
        # A sentence said many times names its first and latest source and how often it was said.
        src = z.sources if len(z.sources) <= 2 else (z.sources[0], z.sources[-1])
        groups.setdefault(z.stage, []).append({"round": z.round, "sources": " ".join(f"m{i}" for i in src),
                                               "times": len(z.sources) if len(z.sources) > 2 else None, "text": z.text})
    out = []
    for stage in sorted(groups):
        first, last = (1, window_from - 1) if stage < 0 else (stage * STAGE_ROUNDS + 1, (stage + 1) * STAGE_ROUNDS)
        out.append({"level": "session" if stage < 0 else "stage", "rounds": f"{first}-{last}", "lines": groups[stage]})
    return out


def _dropped_summary(plan: _Plan, kept: dict[str, int], zone_lines: int) -> list[str]:
    sizes = plan.sizes()
    parts = [(sizes["recent"] + sizes["latest"] - kept["recent"] - kept["latest"], "recent turn"),
             (sizes["optional"] - kept["optional"], "field"), (sizes["history"] - kept["history"], "older message"),
             (plan.oversized, "oversized message"), (zone_lines, "summary line"), (sizes["alerts"] - kept["alerts"], "alert")]
    return [f"{n} {label}{'s' if n != 1 else ''}" for n, label in parts if n > 0]
