"""Validate, part 2: business rules declared in the domain (sandboxed expressions, or functions of
an explicitly enabled plugin module for rules that need code).

A rule is checked only when every field it reads has a value; a violation rejects the edits of
the current message that touched those fields (the earlier accepted values stay) and raises an
alert with the rule's code.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from ..domain import Domain
from ..domain.model import RuleSpec
from ..expressions import evaluate
from ..model import is_no_preference


def violations(domain: Domain, values: dict[str, Any], today: date | None,
               changed: set[str] | None = None) -> list[tuple[RuleSpec, str]]:
    """Rules that do not hold for these values, with a message each. `changed`: only the rules
    that read one of these fields are evaluated (the others' verdicts cannot have changed)."""
    out = []
    for rule in domain.rules:
        if changed is not None and changed.isdisjoint(rule.fields):
            continue
        if any(values.get(f) is None or is_no_preference(values[f]) for f in rule.fields):
            continue  # a field without a value, or with no preference ("any date"), leaves nothing to check
        try:
            if rule.plugin is not None:
                verdict = rule.plugin({f: values[f] for f in rule.fields}, today)
            else:
                verdict = bool(evaluate(rule.check or "", values, today))
        except Exception as exc:  # a rule that cannot be evaluated on these values is a violation
            out.append((rule, f"{rule.message} (could not evaluate: {exc})"))
            continue
        if verdict is False or isinstance(verdict, str):  # a plugin may explain the violation
            out.append((rule, verdict if isinstance(verdict, str) else rule.message))
    return out
