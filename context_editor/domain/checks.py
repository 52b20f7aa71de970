"""Lint checks a schema cannot express: references, expressions and likely mistakes.

Each check is a small function of one `Lint` context that yields problems; they all run in one
pass together with the structural findings, so an author sees everything at once (as
`rasa data validate` and spaCy's config validation do). Checks read the document defensively:
a malformed part is the structural findings' business, not a reason to stop.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml
from jinja2 import nodes
from jinja2.sandbox import SandboxedEnvironment

from .. import registry
from ..errors import DomainProblem, Entry, Errors, NerModelError
from ..expressions import TemplateSyntaxError, budget_problem, compile_expression, expression_names
from ..resources import domains_dir, templates_dir
from .kinds import served_label
from .local import Resolution, field_refs
from .nermodel import configured_models
from .rulepacks import NER_LABELS, extractor_ref, ner_label, select_rules
from .yamlines import LinedYaml

_FIELD_NAME = re.compile(r"[a-z][a-z0-9_]*")
# Types a rule's numeric bounds apply to, and types whose values a list or exclusion makes sense of.
_BOUNDED = ("int", "float", "money", "percent", "duration", "text", "list")
_TEXT_ROLES = ("user", "assistant", "system")
_HOW_TO_ADD_A_RULE = ("add a pack beside the domain file: `rule_packs: [./rules]` and rules/<name>.yaml holding "
                      "`rules: [{id: %s, pattern: '…(?P<value>…)'}]`, or write it inline: "
                      "`extract: [{pattern: '…', parse: …}]` (docs/domain-format.md#your-own-rules)")


def _map(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


@dataclass
class Lint:
    doc: LinedYaml
    data: dict[str, Any]
    res: Resolution
    base: Path

    @property
    def fields(self) -> dict[str, Any]:
        return _map(self.data.get("fields"))

    def problem(self, msg: str, path: str, fix: str, entry: Entry[Any] = Errors.REFERENCE,
                severity: str = "error") -> DomainProblem:
        return entry.problem(line=self.doc.line(path), path=path, severity=severity, problem=msg, fix=fix)

    def unknown_field(self, name: Any, path: str) -> Iterator[DomainProblem]:
        if isinstance(name, str) and name in self.fields:
            return
        close = difflib.get_close_matches(str(name), list(self.fields), n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        yield self.problem(f"unknown field '{name}'", path,
                           f"{hint}declare it under `fields:` or use one of: {', '.join(sorted(self.fields))}")

    def expression(self, expr: Any, path: str) -> Iterator[DomainProblem]:
        try:
            compile_expression(str(expr))
            names = expression_names(str(expr))
        except TemplateSyntaxError as exc:
            yield self.problem(f"invalid expression: {exc.message}", path,
                               "write a Python-like expression such as `days_between(a, b) >= 1`", Errors.BAD_EXPRESSION)
            return
        if why := budget_problem(str(expr)):
            yield self.problem(why, path, "", Errors.EXPRESSION_BUDGET)
        for n in sorted(names - set(self.fields)):
            yield self.problem(f"expression reads unknown name '{n}'", path,
                               "use a declared field or a helper (days_between, amount, len, min, max, abs, today)", Errors.BAD_EXPRESSION)
        yield from money_against_numbers(self, str(expr), path)


def field_shapes(c: Lint) -> Iterator[DomainProblem]:
    for name, f in c.fields.items():
        f, base = _map(f), f"fields/{name}"
        ftype = f.get("type")
        if ftype == "enum" and not f.get("values") and not f.get("gazetteer"):
            yield c.problem(f"enum field '{name}' has no `values`", base,
                            "list its canonical values with their synonyms under `values:`, or name a `gazetteer:` file")
        if ftype == "bool" and {str(k).lower() for k in (f.get("values") or {})} - {"true", "false"}:
            yield c.problem(f"bool field '{name}' has values other than true and false", f"{base}/values",
                            "list the synonyms of yes under `true:` and of no under `false:`")
        if f.get("prefer") and ftype not in ("date", "datetime"):
            yield c.problem(f"`prefer` applies to date and datetime fields, not '{ftype}'", f"{base}/prefer",
                            "remove `prefer` or change the type")
        if f.get("memory") and f.get("scope", "session") != "user":
            yield c.problem("`memory` applies to fields with `scope: user`", f"{base}/memory",
                            "add `scope: user` or remove `memory`")
        if ftype == "list" and not f.get("items"):
            yield c.problem(f"list field '{name}' has no `items`", base,
                            "say what the list holds, e.g. `items: {type: enum, values: {...}}`")
        if f.get("constraints") and ftype not in _BOUNDED:
            yield c.problem(f"constraints do not apply to type '{ftype}'", f"{base}/constraints", "remove `constraints` or change the type")
        if isinstance(f.get("pattern"), str):
            try:
                re.compile(f["pattern"])
            except re.error as exc:
                yield c.problem(f"invalid regular expression: {exc}", f"{base}/pattern", "fix the pattern (Python `re` syntax)")


def ner_models(c: Lint) -> Iterator[DomainProblem]:
    """The trained models named by `ner:` exist (their cards are read; weights are not loaded)."""
    if c.data.get("ner"):
        try:
            configured_models(c.data["ner"], c.base)
        except NerModelError as exc:
            yield c.problem(exc.message, "ner", exc.fix or "", Errors.NER_MODEL)


def _model_labels(c: Lint) -> list[str] | None:
    """The labels `ner.X` may name: the trained models' (None: the generic English model's)."""
    if not c.data.get("ner"):
        return None
    try:
        return sorted({label for m in configured_models(c.data["ner"], c.base).values() for label in m.labels})
    except NerModelError:
        return []  # reported by `ner_models`


def extract_refs(c: Lint) -> Iterator[DomainProblem]:
    labels = _model_labels(c)
    for name, f in c.fields.items():
        for i, ref in enumerate(_list(_map(f).get("extract"))):
            path = f"fields/{name}/extract/{i}"
            if not isinstance(ref, str):
                continue  # inline rules are compiled (and reported) by the resolver
            label = ner_label(ref)
            if label is not None:
                served = served_label(label, labels) == label if labels is not None else label in NER_LABELS  # kind prefix, or a subject of a learnt plain kind
                if not served and labels != []:  # [] : the model is missing, reported once by `ner_models`
                    names = labels if labels is not None else NER_LABELS
                    yield c.problem(f"unknown entity label in '{ref}'", path,
                                    f"use one of: {', '.join('ner.' + x for x in names)}", Errors.UNKNOWN_EXTRACTOR)
                continue
            if extractor_ref(ref) is not None:
                continue  # a registered extractor's label: the extractor decides what it finds
            if not select_rules(c.res.library, ref):
                family = ref.split(".")[0]
                close = sorted({rid.rsplit(".", 1)[0] for rid in c.res.library if rid.split(".")[0] == family})
                known = f"known rules with that prefix: {', '.join(close[:12])}; or " if close else ""
                yield c.problem(f"unknown extraction rule '{ref}' (not in the bundled packs or the domain's rule_packs)",
                                path, known + _HOW_TO_ADD_A_RULE % ref, Errors.UNKNOWN_EXTRACTOR)


def asks(c: Lint) -> Iterator[DomainProblem]:
    langs = _list(c.data.get("languages")) or ["zh", "en"]
    registered = registry.languages.names()
    for i, code in enumerate(langs if c.data.get("languages") else []):
        if code not in registered:
            yield c.problem(f"language '{code}' is not registered", f"languages/{i}",
                            f"use one of: {', '.join(registered)}, or install the package that registers it "
                            "(docs/adding-a-language.md)")
    for name, f in c.fields.items():
        ask = _map(_map(f).get("ask"))
        for lang in langs:
            if ask and lang not in ask:
                yield c.problem(f"field '{name}' has no ask text in '{lang}'", f"fields/{name}/ask",
                                f"add `{lang}:` to its `ask` (the domain declares languages {langs})")


def _transitions(c: Lint) -> list[tuple[str, dict[str, Any]]]:
    m = _map(c.data.get("machine"))
    return [(f"machine/transitions/{i}", _map(t)) for i, t in enumerate(_list(m.get("transitions")))]


def machine_states(c: Lint) -> Iterator[DomainProblem]:
    m = _map(c.data.get("machine"))
    states = [s for s in _list(m.get("states")) if isinstance(s, str)]
    if not m:
        return
    if m.get("initial") and m["initial"] not in states:
        yield c.problem(f"initial state '{m['initial']}' is not in `states`", "machine/initial", f"use one of: {', '.join(states)}")
    for base, t in _transitions(c):
        srcs = t.get("source")
        for s in [srcs] if isinstance(srcs, str) else _list(srcs):
            if s != "*" and s not in states:
                yield c.problem(f"unknown source state '{s}'", f"{base}/source", f"use '*' or one of: {', '.join(states)}")
        if "dest" in t and t.get("dest") not in states:
            yield c.problem(f"unknown dest state '{t.get('dest')}'", f"{base}/dest", f"use one of: {', '.join(states)}")


def transition_triggers(c: Lint) -> Iterator[DomainProblem]:
    """A transition fires on `when` (a value was set) or `when_complete` (a list became complete)."""
    for base, t in _transitions(c):
        if not t.get("when") and not t.get("when_complete"):
            yield c.problem(f"transition '{t.get('trigger')}' has neither `when` nor `when_complete`, so it never fires",
                            base, "add `when: {field: value}` (fires when a message sets it) or "
                                  "`when_complete: [field, …]` (fires when all are set)", Errors.NEVER_FIRES)


def transition_refs(c: Lint) -> Iterator[DomainProblem]:
    for base, t in _transitions(c):
        for fname in _map(t.get("when")):
            yield from c.unknown_field(fname, f"{base}/when/{fname}")
        for j, fname in enumerate(_list(t.get("when_complete"))):
            yield from c.unknown_field(fname, f"{base}/when_complete/{j}")
        for fname in _map(t.get("set")):
            yield from c.unknown_field(fname, f"{base}/set/{fname}")
        for j, fname in enumerate(_list(t.get("clear"))):
            yield from c.unknown_field(fname, f"{base}/clear/{j}")
        for j, cond in enumerate(_list(t.get("conditions"))):
            path = f"{base}/conditions/{j}"
            if isinstance(cond, str) and _FIELD_NAME.fullmatch(cond):
                yield from c.unknown_field(cond, path)
            elif isinstance(cond, str):
                yield from c.expression(cond, path)


def business_rules(c: Lint) -> Iterator[DomainProblem]:
    plugins = [p for p in _list(c.data.get("plugins")) if isinstance(p, str)]
    for i, name in enumerate(plugins):
        if not (c.base / name).exists():
            yield c.problem(f"plugin module '{name}' not found next to the domain file", f"plugins/{i}",
                            f"create {c.base / name} or remove it from `plugins`", Errors.PLUGIN_MODULE)
    for i, r in enumerate(_list(c.data.get("rules"))):
        r = _map(r)
        if isinstance(r.get("check"), str):
            yield from c.expression(r["check"], f"rules/{i}/check")
        elif isinstance(r.get("plugin"), str):
            module = r["plugin"].split(".")[0] + ".py"
            if module not in plugins:
                yield c.problem(f"rule '{r.get('id')}' uses plugin module '{module}', which is not listed under `plugins`",
                                f"rules/{i}/plugin", f"add '{module}' to `plugins:`", Errors.PLUGIN_MODULE)
            for j, fname in enumerate(_list(r.get("fields"))):
                yield from c.unknown_field(fname, f"rules/{i}/fields/{j}")


def actions(c: Lint) -> Iterator[DomainProblem]:
    for aname, a in _map(c.data.get("actions")).items():
        a, base = _map(a), f"actions/{aname}"
        scope = a.get("scope", aname)
        fields = _list(a.get("fields"))
        for j, fname in enumerate(fields):
            yield from c.unknown_field(fname, f"{base}/fields/{j}")
            scopes = _map(c.fields.get(fname) if isinstance(fname, str) else None).get("scopes")
            if scopes and scope not in scopes:
                yield c.problem(f"field '{fname}' is visible only to scopes {scopes}, action '{aname}' has scope '{scope}'",
                                f"{base}/fields/{j}", f"remove '{fname}' from this action, or add '{scope}' to the field's `scopes`")
        for j, fname in enumerate(_list(a.get("required"))):
            if fname not in fields:
                yield c.problem(f"required field '{fname}' is not in the action's `fields`", f"{base}/required/{j}",
                                f"add '{fname}' to `fields` of action '{aname}'")
        tpl = a.get("template")
        if isinstance(tpl, str) and tpl not in c.res.templates and not (templates_dir() / tpl).exists():
            yield c.problem(f"template '{tpl}' not found (neither in the domain's `templates` nor the bundled ones)",
                            f"{base}/template", "create it in the directory `templates:` names, or remove `template` to use the default")
    for key in ("new_search", "relax"):
        search = _map(c.data.get("dialogue")).get(key)
        if isinstance(search, str) and search not in _map(c.data.get("actions")):
            yield c.problem(f"`dialogue: {{{key}: {search}}}` names no action of this domain", f"dialogue/{key}",
                            "name the action whose fields are the search's constraints (`actions:`)")


# ---------------------------------------------------------------- warnings: likely mistakes
def _fillable_from_text(c: Lint, name: str, f: dict[str, Any]) -> bool:
    """Rules, values or a gazetteer find it in text; or, with dialogue answers on (the default),
    the user's reply to its `ask` does (issue 10's answers: any type, yes/no for bool)."""
    items = _map(f.get("items"))
    answers = _map(c.data.get("dialogue")).get("answers", True) is not False
    answerable = answers and bool(f.get("ask")) and "user" in (_list(f.get("sources")) or ["user"])
    return bool(field_refs(f, name) or f.get("values") or f.get("gazetteer") or items.get("values") or items.get("gazetteer")
                or answerable)


def unreachable_fields(c: Lint) -> Iterator[DomainProblem]:
    """A field that no extractor, tool or machine effect can ever fill."""
    set_by_machine = {k for _, t in _transitions(c) for k in _map(t.get("set"))}
    for name, f in c.fields.items():
        f = _map(f)
        sources = _list(f.get("sources")) or ["user", "tool"]
        if name in set_by_machine or not any(r in sources for r in _TEXT_ROLES) or _fillable_from_text(c, name, f):
            continue
        tool = f"only a tool result with the key '{name}' can set it" if "tool" in sources else "nothing can set it"
        yield c.problem(f"field '{name}' (type {f.get('type')}) has no `extract` rules, no values and no `ask`, so no message "
                        f"fills it; {tool}",
                        f"fields/{name}", "add `extract: [...]` (a bundled rule, a rule from your own pack, or an inline "
                                          "`{pattern: …}`), `values:`, a `gazetteer:`, or an `ask` (the user's answer fills it); "
                                          "or `sources: [tool]` if only tools set it",
                        Errors.NEVER_FILLED, "warning")


def duplicate_synonyms(c: Lint) -> Iterator[DomainProblem]:
    """The same phrase under two values of one enum (its `values` and its gazetteer's rows
    together): the first one silently wins."""
    for name, f in c.fields.items():
        for base, holder in ((f"fields/{name}", _map(f)), (f"fields/{name}/items", _map(_map(f).get("items")))):
            gazetteer = holder.get("gazetteer")
            rows = c.res.gazetteers.get(gazetteer, {}) if isinstance(gazetteer, str) else {}
            entries = [(f"{base}/values/{k}", k, v) for k, v in _map(holder.get("values")).items()]
            entries += [(f"{base}/gazetteer", k, v) for k, v in rows.items()]
            owner: dict[str, str] = {}
            for where, canonical, synonyms in entries:
                for phrase in [str(canonical), *(str(s) for s in _list(synonyms))]:
                    key = phrase.lower().lstrip("!")
                    if key in owner and owner[key] != str(canonical) and not phrase.startswith("!"):
                        yield c.problem(f"'{phrase}' is a synonym of both '{owner[key]}' and '{canonical}' in field '{name}'"
                                        + (f" (gazetteer {gazetteer})" if where.endswith("/gazetteer") else ""),
                                        where, f"keep it under one value; as it is, '{owner[key]}' always wins",
                                        Errors.DUPLICATE_SYNONYM, "warning")
                    owner.setdefault(key, str(canonical))


def policy_types(c: Lint) -> Iterator[DomainProblem]:
    for name, f in c.fields.items():
        f, base = _map(f), f"fields/{name}"
        ftype = f.get("type")
        if f.get("policy") == "accumulate" and ftype != "list":
            yield c.problem(f"`policy: accumulate` on field '{name}' of type {ftype}: only a list can accumulate; "
                            "each new value just replaces the old one", f"{base}/policy",
                            "use `type: list` with `items:`, or `policy: latest`", Errors.POLICY_TYPE, "warning")
        if f.get("mentions") == "negated" and ftype not in ("list", "enum"):
            yield c.problem(f"`mentions: negated` on field '{name}' of type {ftype}: a negated {ftype} (\"not 2000\") "
                            "says what is excluded, not a value", f"{base}/mentions",
                            "use negated mentions for exclusion lists (`type: list` of enum values), or remove `mentions`",
                            Errors.POLICY_TYPE, "warning")


_env = SandboxedEnvironment()


def money_against_numbers(c: Lint, expr: str, path: str) -> Iterator[DomainProblem]:
    """`budget_max > 1000` compares a money value ({amount, currency}) with a number: never true."""
    money = {n for n, f in c.fields.items() if _map(f).get("type") == "money"}
    try:
        tree = _env.parse("{{ " + expr + " }}")
    except TemplateSyntaxError:
        return
    for cmp in tree.find_all(nodes.Compare):
        sides = [cmp.expr, *(op.expr for op in cmp.ops)]
        names = [s.name for s in sides if isinstance(s, nodes.Name) and s.name in money]
        numbers = [s for s in sides if isinstance(s, nodes.Const) and isinstance(s.value, (int, float))]
        if names and numbers:
            yield c.problem(f"expression compares money field '{names[0]}' with a bare number; a money value is "
                            "{amount, currency}, so the comparison never holds", path,
                            f"compare its amount: amount({names[0]}) …", Errors.MONEY_VS_NUMBER, "warning")


@functools.lru_cache(maxsize=256)
def _other_fields(path: Path, mtime: float) -> dict[str, str] | None:
    """Field name -> type of another domain file (None: not a domain file); `mtime` keys the cache."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    fields = _map(data).get("fields") if isinstance(data, dict) else None
    return {str(k): str(_map(v).get("type")) for k, v in fields.items()} if isinstance(fields, dict) else None


def _domain_file(c: Lint, domain: str) -> Path | None:
    """Where a carry's source domain lives: beside this file (a conversation's domains sit
    together, as an importer writes them), else among the bundled domains."""
    for path in (c.base / f"{domain}.yaml", c.base / f"{domain}.yml", domains_dir() / f"{domain}.yaml"):
        if path.is_file():
            return path
    return None


def carries(c: Lint) -> Iterator[DomainProblem]:
    """`carry: {field: [domain.field, …]}`: the field is this domain's, each source names another
    domain (a file beside this one or a bundled one) and a field it has, of the same type."""
    own = c.data.get("domain")
    for name, sources in _map(c.data.get("carry")).items():
        yield from c.unknown_field(name, f"carry/{name}")
        for i, ref in enumerate(_list(sources)):
            path = f"carry/{name}/{i}"
            domain, _, source = str(ref).partition(".")
            if not source:
                continue  # not `domain.field`: the schema says so
            if domain == own:
                yield c.problem(f"carry source '{ref}' names this domain itself", path,
                                "carry from another domain of the conversation; within one domain, give the field one name",
                                Errors.CARRY)
                continue
            where = _domain_file(c, domain)
            fields = _other_fields(where, where.stat().st_mtime) if where else None
            if where is None or fields is None:
                siblings = sorted(p.stem for p in c.base.glob("*.y*ml") if p.stem != own)
                close = difflib.get_close_matches(domain, siblings, n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                yield c.problem(f"carry source '{ref}': no domain '{domain}' (looked for {c.base / (domain + '.yaml')} "
                                "and the bundled domains)", path,
                                f"{hint}put {domain}.yaml beside this file, or name one of: {', '.join(siblings) or 'none here'}",
                                Errors.CARRY)
            elif source not in fields:
                close = difflib.get_close_matches(source, list(fields), n=1)
                hint = f"did you mean '{domain}.{close[0]}'? " if close else ""
                yield c.problem(f"carry source '{ref}': domain '{domain}' has no field '{source}'", path,
                                f"{hint}use one of: {', '.join(sorted(fields))}", Errors.CARRY)
            elif name in c.fields and (mine := str(_map(c.fields[name]).get("type"))) != fields[source]:
                yield c.problem(f"carry source '{ref}' is a {fields[source]}, field '{name}' a {mine}: its values "
                                "would not fit", path, f"carry from a field of type {mine}", Errors.CARRY)


CHECKS: tuple[Callable[[Lint], Iterator[DomainProblem]], ...] = (
    field_shapes, ner_models, extract_refs, asks, machine_states, transition_triggers, transition_refs, business_rules, actions,
    unreachable_fields, duplicate_synonyms, policy_types, carries)


def semantic_problems(doc: LinedYaml, res: Resolution, base: Path, structure_ok: bool) -> list[DomainProblem]:
    """Every check's findings. With structural errors present, a check that trips over the broken
    shape is skipped (that shape is already reported); on a well-formed file nothing is skipped."""
    c = Lint(doc, doc.data, res, base)
    out: list[DomainProblem] = []
    for check in CHECKS:
        try:
            out.extend(check(c))
        except (TypeError, AttributeError, KeyError, ValueError):
            if structure_ok:
                raise
    return out
