"""Inject: state -> the minimal XML context one action needs, within an exact token budget.

What goes in is decided by the action view (its fields, required fields, recent rounds); what
stays when the budget is tight is decided by priority: required fields, missing asks and alerts
first, then optional fields, then recent turns (newest first). Whatever is dropped is dropped
whole and named in <truncated_context>; a value is never cut. The `tokens` attribute is the
exact count of the whole output, itself included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import FileSystemLoader, StrictUndefined, TemplateNotFound
from jinja2.sandbox import SandboxedEnvironment

from ..domain import ActionSpec, Domain, FieldSpec
from ..errors import BudgetError, UnknownActionError
from ..extract import detect_language
from ..model import Message, State
from .tokens import count_tokens
from .xmltext import xml_safe

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"
DEFAULT_TEMPLATE = "default.xml.j2"


def format_value(spec: FieldSpec | None, value: Any) -> str:
    """A value as the model reads it: money as "2000 CNY", lists comma-separated."""
    if isinstance(value, dict) and "amount" in value:
        amount = value["amount"]
        amount = int(amount) if isinstance(amount, float) and amount.is_integer() else amount
        return f"{amount} {value.get('currency', '')}".strip()
    if isinstance(value, list):
        return ", ".join(format_value(None, v) for v in value)
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


def _finalize(value: Any) -> Any:
    return xml_safe(value) if isinstance(value, str) else value


class Renderer:
    """Renders action views of one domain with sandboxed, autoescaping Jinja templates."""

    def __init__(self, domain: Domain, templates_dir: Path = TEMPLATES_DIR, model: str | None = None):
        self.domain, self.model = domain, model
        self.env = SandboxedEnvironment(loader=FileSystemLoader(str(templates_dir)), autoescape=True,
                                        undefined=StrictUndefined, finalize=_finalize, keep_trailing_newline=False)

    def action(self, name: str) -> ActionSpec:
        if name not in self.domain.actions:
            raise UnknownActionError(f"unknown action {name!r} in domain {self.domain.name!r}",
                                     fix=f"use one of: {', '.join(sorted(self.domain.actions))}")
        return self.domain.actions[name]

    def render(self, state: State, action: str, messages: list[Message], budget: int | None = None,
               language: str | None = None) -> RenderedContext:
        spec = self.action(action)
        budget = budget or spec.budget_tokens
        names = list(dict.fromkeys([*spec.fields, *(n for n, f in self.domain.fields.items() if f.shared)]))
        present = [n for n in names if state.get(n) is not None]
        language = language or self._language(messages)
        missing = [{"name": n, "ask": self._ask(n, language)} for n in spec.required if state.get(n) is None]
        concerned = set(names)
        alerts = [{"code": a.code, "round": a.round, "message": a.message}
                  for a in state.alerts if a.field is None or a.field in concerned]
        required = [n for n in present if n in spec.required]
        optional = [n for n in present if n not in spec.required]
        turns = [{"round": m.round, "role": m.role, "content": m.content}
                 for m in messages if m.role in ("user", "assistant", "tool") and m.round > state.round - spec.recent_rounds]
        template = self._template(spec)

        def build(opt: list[str], kept_turns: list[dict]) -> tuple[str, int, list[str]]:
            kept = [n for n in names if n in required or n in opt]
            dropped = _dropped_summary(len(turns) - len(kept_turns), len(optional) - len(opt))
            ctx = {"action": action, "domain": self.domain.name, "round": state.round, "budget": budget,
                   "phase": state.phase, "fields": [self._field(state, n) for n in kept], "missing": missing,
                   "alerts": alerts, "turns": kept_turns, "dropped": ", ".join(dropped)}
            return (*self._fixed_point(template, ctx), dropped)

        kept_opt, kept_turns = list(optional), list(turns)
        xml, tokens, dropped = build(kept_opt, kept_turns)
        while tokens > budget and kept_turns:  # oldest turns go first
            kept_turns = kept_turns[1:]
            xml, tokens, dropped = build(kept_opt, kept_turns)
        while tokens > budget and kept_opt:  # then optional fields, last declared first
            kept_opt = kept_opt[:-1]
            xml, tokens, dropped = build(kept_opt, kept_turns)
        if tokens > budget:
            raise BudgetError(
                f"action {action!r}: the required part of the context needs {tokens} tokens, budget is {budget}"
                f" (required fields: {', '.join(spec.required) or 'none'}; alerts: {len(alerts)})",
                fix=f"raise --budget to at least {tokens}, or declare fewer required fields for this action")
        return RenderedContext(action, xml, tokens, budget, [n for n in names if n in required or n in kept_opt],
                               [m["name"] for m in missing], dropped)

    def _fixed_point(self, template, ctx: dict) -> tuple[str, int]:
        """Render until the `tokens` attribute equals the count of the output that contains it."""
        claimed = 0
        for _ in range(8):
            xml = template.render(**ctx, tokens=claimed)
            actual = count_tokens(xml, self.model)
            if actual == claimed:
                return xml, actual
            claimed = actual
        # A digit-count boundary can oscillate; claim the larger figure and pad with spaces
        # inside the tag so the claim is exact.
        xml = template.render(**ctx, tokens=claimed)
        while count_tokens(xml, self.model) < claimed:
            xml = xml.replace("<context ", "<context  ", 1)
        return xml, count_tokens(xml, self.model)

    def _template(self, spec: ActionSpec):
        name = spec.template or (f"{spec.name}.xml.j2" if (TEMPLATES_DIR / f"{spec.name}.xml.j2").exists() else DEFAULT_TEMPLATE)
        try:
            return self.env.get_template(name)
        except TemplateNotFound:
            return self.env.get_template(DEFAULT_TEMPLATE)

    def _field(self, state: State, name: str) -> dict:
        fs = state.fields[name]
        return {"name": name, "round": fs.set_round, "source": fs.source,
                "text": format_value(self.domain.fields.get(name), fs.value)}

    def _ask(self, name: str, language: str) -> str:
        ask = self.domain.fields[name].ask
        return ask.get(language) or next(iter(ask.values()), f"Please provide {name}.")

    def _language(self, messages: list[Message]) -> str:
        for m in reversed(messages):
            if m.role == "user":
                return detect_language(m.content)
        return self.domain.languages[0]


def _dropped_summary(turns: int, fields: int) -> list[str]:
    out = []
    if turns:
        out.append(f"{turns} turn{'s' if turns != 1 else ''}")
    if fields:
        out.append(f"{fields} field{'s' if fields != 1 else ''}")
    return out
