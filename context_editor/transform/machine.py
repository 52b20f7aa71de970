"""Transform, part 2: the domain's state machine, compiled to a `transitions` Machine.

A transition fires when a message sets one of the fields in its `when` to a listed value
(e.g. `user_intent: order`), or when a message completes its `when_complete` list (all set, one
of them by this message). Its guards are field names (must be set) or sandboxed expressions;
a failing guard raises the transition's `on_fail` alert instead of moving (`on_fail: null`:
silently), and once the transition happens that alert is resolved. Effects set or clear
fields. Everything it does is an edit with source `machine`, so the phase is as auditable as
any value.
"""

from __future__ import annotations

from typing import Any, Callable

import re

from transitions import Machine

from ..domain import Domain
from ..domain.model import TransitionSpec
from ..expressions import evaluate
from ..model import Edit, Message, State
from .fields import edit

_FIELD_NAME = re.compile(r"[a-z][a-z0-9_]*")


def _fires(t: TransitionSpec, changed: dict[str, Any], values: dict[str, Any]) -> bool:
    """Did this message's accepted values trigger `t`?"""
    if any(f in changed and (changed[f] in allowed or "*" in allowed) for f, allowed in t.when.items()):
        return True
    complete = t.when_complete
    return bool(complete) and any(f in changed for f in complete) and all(values.get(f) is not None for f in complete)


class _Phase:
    """The model object `transitions` moves between states (it adds `trigger` to it)."""

    state: str
    trigger: Callable[..., bool]


def guard_failures(t: TransitionSpec, values: dict[str, Any]) -> list[str]:
    """The guards of `t` that do not hold for these field values."""
    failed = []
    for cond in t.conditions:
        if _FIELD_NAME.fullmatch(cond):
            ok = values.get(cond) is not None
        else:
            try:
                ok = bool(evaluate(cond, values))
            except Exception:  # a guard that cannot be evaluated does not hold
                ok = False
        if not ok:
            failed.append(cond)
    return failed


class PhaseMachine:
    """The compiled machine of one domain; `step` is pure given (state, edits so far)."""

    def __init__(self, domain: Domain):
        spec = domain.machine
        if spec is None:
            raise ValueError(f"domain {domain.name!r} declares no machine")  # callers build one only when it does
        self.domain, self.spec = domain, spec
        self._model = _Phase()
        self._machine = Machine(
            model=self._model, states=list(spec.states), initial=spec.initial, auto_transitions=False,
            ignore_invalid_triggers=True, send_event=True,
            transitions=[{"trigger": t.trigger, "source": list(t.source) if t.source != ("*",) else "*", "dest": t.dest,
                          "conditions": [lambda ev, t=t: not guard_failures(t, ev.kwargs["values"])]}
                         for t in spec.transitions])

    def initial_edit(self, msg: Message) -> Edit:
        return edit(msg, self.domain, "transition", None, None, self.spec.initial, "machine", reason="INITIAL", stage="machine")

    def step(self, state: State, msg: Message, accepted: list[Edit]) -> list[Edit]:
        """Transitions (or guard alerts) caused by this message's accepted edits."""
        changed = {e.field: e.after for e in accepted if e.op == "set" and e.field is not None}
        if not changed:
            return []  # a transition fires only on a value this message set (`_fires`)
        values = state.values()
        for e in accepted:
            if e.field is not None:
                values[e.field] = e.after
        phase = state.phase or self.spec.initial
        out: list[Edit] = []
        for t in self.spec.transitions:
            if not _fires(t, changed, values):
                continue
            self._machine.set_state(phase)
            if not self._machine.get_transitions(trigger=t.trigger, source=phase, dest=t.dest):
                continue  # not allowed from this phase: nothing happens, as `transitions` says
            if not self._model.trigger(t.trigger, values=values):
                failed = guard_failures(t, values)
                concerns = failed[0] if _FIELD_NAME.fullmatch(failed[0]) else None
                if t.on_fail is not None:  # `on_fail: null` keeps this guard silent
                    out.append(edit(msg, self.domain, "alert", concerns, None,
                                    f"cannot {t.trigger}: missing or invalid {', '.join(failed)}", "machine",
                                    reason=t.on_fail, stage="machine"))
                continue
            for a in state.alerts:  # the guard held: its alert is news no more
                if a.code == t.on_fail:
                    out.append(edit(msg, self.domain, "resolve", a.field, None, None, "machine", reason=a.code, stage="machine"))
            out.append(edit(msg, self.domain, "transition", None, phase, t.dest, "machine", reason=t.trigger, stage="machine"))
            for fname, value in t.set.items():
                if values.get(fname) != value:
                    out.append(edit(msg, self.domain, "set", fname, values.get(fname), value, "machine", reason=t.trigger, stage="machine"))
                    values[fname] = value
            for fname in t.clear:
                if values.get(fname) is not None:
                    out.append(edit(msg, self.domain, "clear", fname, values[fname], None, "machine", reason=t.trigger, stage="machine"))
                    values[fname] = None
            phase = t.dest
        return out
