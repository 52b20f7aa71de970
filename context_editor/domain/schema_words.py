"""JSON Schema findings in plain words: what is wrong, in the author's terms, and how to fix it.

The schema is the machine-readable contract (editors use it for completion); its validator's
messages (`'3d' is not valid under any of the given schemas`) are for schema authors, not for
domain authors. Each kind of finding is translated here; the validator's own message is never
shown.
"""

from __future__ import annotations

import difflib
import json
from typing import TYPE_CHECKING, Any, Iterator

from ..errors import DomainProblem, Entry, Errors
from ..resources import schema_path
from .yamlines import LinedYaml

if TYPE_CHECKING:
    import jsonschema

SCHEMA_PATH = schema_path()

_TYPE_WORDS = {"object": "a mapping (key: value)", "array": "a list", "string": "text", "integer": "a whole number",
               "number": "a number", "boolean": "true or false", "null": "null"}
# What a schema `pattern` asks for, said as a person would.
_PATTERN_WORDS = {
    "^[a-z][a-z0-9_]*$": "lower_snake_case: a-z, digits and _, starting with a letter (e.g. budget_max)",
    "^[A-Z][A-Z0-9_]*$": "UPPER_SNAKE_CASE, e.g. MISSING_DEPARTURE_DATE",
    "^[A-Z]{3}$": "a three-letter ISO currency code such as CNY, USD or EUR",
    "^[A-Za-z_][A-Za-z0-9_]*\\.py$": "a Python file name such as my_rules.py",
    "^[A-Za-z_][A-Za-z0-9_]*\\.[A-Za-z_][A-Za-z0-9_]*$": "module.function, e.g. my_rules.check_budget",
    "^[A-Za-z0-9_.\\-]+$": "letters, digits, '.', '_' and '-' only",
    "^[1-9][0-9]{0,4}d$": "a number of days followed by d, e.g. 180d (1d to 99999d)",
}
_DOCS = "see docs/domain-format.md"

_validator: jsonschema.Draft202012Validator | None = None


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text("utf-8"))
    return loaded


def validator() -> jsonschema.Draft202012Validator:
    global _validator
    if _validator is None:
        import jsonschema  # ~50 ms; only a process that reads a domain file pays it

        _validator = jsonschema.Draft202012Validator(schema())
    return _validator


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return f"the boolean {str(v).lower()}"
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    if v is None:
        return "nothing"
    if isinstance(v, (int, float)):
        return f"the number {v}"
    text = str(v)
    return f"the text '{text[:40]}{'…' if len(text) > 40 else ''}'"


def _name(path: list[str]) -> str:
    """How to call the place in words: "`ttl` of field 'color'", "item 2 of `states`"."""
    if not path:
        return "the file"
    *parent, last = path
    if last.isdigit():
        return f"item {int(last) + 1} of `{parent[-1] if parent else 'the list'}`"
    if len(parent) >= 2 and parent[-2] in ("fields", "actions", "tools"):
        return f"`{last}` of {parent[-2][:-1]} '{parent[-1]}'"
    if parent and parent[-1] in ("fields", "actions", "tools"):
        return f"{parent[-1][:-1]} '{last}'"
    return f"`{last}`"


def _describe(sub: dict[str, Any]) -> str:
    """An alternative of a oneOf/anyOf, in words."""
    if "enum" in sub:
        return "one of " + ", ".join(map(str, sub["enum"]))
    if "$ref" in sub:
        return "a mapping" if sub["$ref"].endswith(("rule", "field", "action")) else _DOCS
    t = sub.get("type")
    if t == "object" and sub.get("required"):
        return "a mapping with " + ", ".join(f"`{r}`" for r in sub["required"])
    if isinstance(t, list):
        return " or ".join(_TYPE_WORDS.get(str(x), str(x)) for x in t)
    if t:
        return _TYPE_WORDS.get(str(t), str(t))
    if sub.get("required"):
        return " and ".join(f"`{r}`" for r in sub["required"])
    return "a value described in the docs"


def _matches_type(v: Any, t: Any) -> bool:
    types = t if isinstance(t, list) else [t]
    checks = {"object": isinstance(v, dict), "array": isinstance(v, list), "string": isinstance(v, str),
              "integer": isinstance(v, int) and not isinstance(v, bool),
              "number": isinstance(v, (int, float)) and not isinstance(v, bool),
              "boolean": isinstance(v, bool), "null": v is None}
    return any(checks.get(x, False) for x in types)


def _resolve_ref(sub: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in sub:
        target: dict[str, Any] = schema()["$defs"][sub["$ref"].rsplit("/", 1)[-1]]
        return target
    return sub


def _alternatives(err: jsonschema.ValidationError, doc: LinedYaml) -> Iterator[DomainProblem] | None:
    """oneOf/anyOf: when the value's shape picks one alternative, report that alternative's findings."""
    alternatives: Any = err.validator_value
    subs = [_resolve_ref(s) for s in alternatives]
    fitting = [i for i, s in enumerate(subs) if "type" in s and _matches_type(err.instance, s["type"])]
    if len(fitting) == 1:
        inner = [e for e in err.context or [] if e.relative_schema_path and e.relative_schema_path[0] == fitting[0]]
        if inner:
            return (p for e in inner for p in translate(e, doc))
    return None


def _problem(doc: LinedYaml, path: list[str], message: str, fix: str, entry: Entry[Any] = Errors.SCHEMA,
             severity: str = "error") -> DomainProblem:
    return entry.problem(line=doc.line(path), path="/".join(path), severity=severity, problem=message, fix=fix)


def translate(err: jsonschema.ValidationError, doc: LinedYaml) -> Iterator[DomainProblem]:
    """One validator finding -> problems in plain words (the validator's message is never used)."""
    path = [str(p) for p in err.absolute_path]
    kind = str(err.validator)
    want: Any = err.validator_value  # typed loosely by jsonschema: what the schema asked for
    v: Any = err.instance
    here: Any = err.schema
    where = _name(path)
    if "propertyNames" in err.relative_schema_path:
        rule = _PATTERN_WORDS.get(want, f"names matching {want}") if kind == "pattern" else _DOCS
        yield _problem(doc, path + [str(v)], f"the name '{v}' in {where} is not allowed: names are {rule}",
                       f"rename it to {rule}")
    elif kind == "additionalProperties":
        known = sorted((here.get("properties") or {}).keys())
        for key in sorted(set(v) - set(known)) if isinstance(v, dict) else []:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean `{close[0]}`? " if close else ""
            yield _problem(doc, path + [str(key)], f"unknown key '{key}' in {where} (it is ignored)",
                           f"{hint}remove it, or use one of: {', '.join(known)}", Errors.UNKNOWN_KEY_IGNORED, severity="warning")
    elif kind == "required":
        for key in [k for k in want if isinstance(v, dict) and k not in v]:
            yield _problem(doc, path, f"{where} is missing `{key}`", f"add `{key}:` ({_DOCS})")
    elif kind == "type":
        yield _problem(doc, path, f"{where} must be {_describe({'type': want})}, not {_kind(v)}",
                       f"write {where} as {_describe({'type': want})} ({_DOCS})")
    elif kind == "enum":
        close = difflib.get_close_matches(str(v), [str(x) for x in want], n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        yield _problem(doc, path, f"{where} is {_kind(v)}, which is not an allowed value",
                       f"{hint}use one of: {', '.join(map(str, want))}")
    elif kind == "pattern":
        rule = _PATTERN_WORDS.get(want, f"text matching the regular expression {want}")
        yield _problem(doc, path, f"{where} is {_kind(v)}; it must be {rule}", f"write it as {rule}")
    elif kind in ("minItems", "minProperties"):
        what = "at least one item" if want == 1 else f"at least {want} items"
        yield _problem(doc, path, f"{where} is empty or too short: it needs {what}", f"add {what}, or remove the key")
    elif kind == "uniqueItems":
        yield _problem(doc, path, f"{where} lists the same item more than once", "remove the repeated item")
    elif kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        words = {"minimum": "at least", "exclusiveMinimum": "greater than", "maximum": "at most",
                 "exclusiveMaximum": "less than"}[kind]
        yield _problem(doc, path, f"{where} is {_kind(v)}; it must be {words} {want}", f"use a number {words} {want}")
    elif kind in ("oneOf", "anyOf"):
        inner = _alternatives(err, doc)
        if inner is not None:
            yield from inner
            return
        subs = [_resolve_ref(s) for s in want]
        if all(set(s) == {"required"} for s in subs):
            options = " or ".join(_describe(s) for s in subs)
            yield _problem(doc, path, f"{where} needs exactly one of: {options}",
                           f"keep {options.replace(' or ', ', or ')} — not both, not neither")
            return
        options = " or ".join(_describe(s) for s in subs)
        yield _problem(doc, path, f"{where} must be {options}, not {_kind(v)}", f"write it as {options} ({_DOCS})")
    else:
        yield _problem(doc, path, f"{where} has a value that is not allowed here ({_kind(v)})", f"check it against {_DOCS}")


def schema_problems(doc: LinedYaml) -> list[DomainProblem]:
    """Every structural finding of the domain document, in plain words."""
    out: list[DomainProblem] = []
    for err in sorted(validator().iter_errors(doc.data), key=lambda e: [str(p) for p in e.absolute_path]):
        out.extend(translate(err, doc))
    return out
