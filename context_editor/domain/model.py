"""The domain file: loading, linting and the typed view every stage reads.

`lint_domain` reports every problem it can find (schema, references, expressions) with file,
line and fix; `load_domain` refuses a file with any problem. The domain's `version_hash` covers
the file's canonical content and the rule packs it uses, so provenance and replay can name the
exact configuration that produced a value.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import types
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

import jsonschema

from ..errors import DomainError, DomainProblem
from ..expressions import TemplateSyntaxError, compile_expression, expression_names
from ..lang import lexicon_fingerprint
from ..model import canonical_json
from ..resources import domains_dir, schema_path, templates_dir
from .rulepacks import NER_LABELS, Rule, load_rule_library, ner_label, select_rules
from .yamlines import LinedYaml, load_lined_yaml

DOMAINS_DIR = domains_dir()
SCHEMA_PATH = schema_path()
# Who may set a field by default: what the user says and what tools return. Assistant text only
# proposes; system messages are instructions, not facts about the user.
DEFAULT_SOURCES = ("user", "tool")


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: str
    values: dict[str, list[str]] = field(default_factory=dict)  # enum synonyms
    items: dict[str, Any] = field(default_factory=dict)
    pattern: str | None = None
    unit: str | None = None
    constraints: dict[str, Any] = field(default_factory=dict)
    cls: str = "anchor"
    ttl: Any = "session"
    critical: bool = False
    shared: bool = False
    sources: tuple[str, ...] = ("user", "tool")
    policy: str = "latest"
    mentions: str = "affirmed"
    ask: dict[str, str] = field(default_factory=dict)
    extract: tuple[str, ...] = ()
    tool_keys: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()  # empty: visible to every action
    description: str = ""

    @property
    def is_list(self) -> bool:
        return self.type == "list"

    @property
    def synonyms(self) -> dict[str, list[str]]:
        """Canonical value -> phrases, for an enum field or a list of enums."""
        return self.values or self.items.get("values") or {}


@dataclass(frozen=True)
class TransitionSpec:
    trigger: str
    source: tuple[str, ...]
    dest: str
    when: dict[str, list[Any]]
    conditions: tuple[str, ...]
    on_fail: str | None
    set: dict[str, Any]
    clear: tuple[str, ...]


@dataclass(frozen=True)
class MachineSpec:
    states: tuple[str, ...]
    initial: str
    transitions: tuple[TransitionSpec, ...]


@dataclass(frozen=True)
class RuleSpec:
    id: str
    check: str | None  # a sandboxed expression, or
    code: str
    message: str
    fields: tuple[str, ...]
    plugin: Callable[..., Any] | None = None  # a function of an explicitly enabled plugin module


@dataclass(frozen=True)
class ActionSpec:
    name: str
    fields: tuple[str, ...]
    required: tuple[str, ...]
    recent_rounds: int
    budget_tokens: int
    template: str | None
    description: str
    scope: str = ""
    history_rounds: int = 20
    max_history: int = 6
    safety_margin: int = 0


@dataclass(frozen=True)
class ToolSpec:
    keep: tuple[str, ...] = ()
    max_items: int = 3


@dataclass(frozen=True)
class Domain:
    name: str
    version: str
    version_hash: str
    languages: tuple[str, ...]
    default_currency: str
    fields: dict[str, FieldSpec]
    machine: MachineSpec | None
    rules: tuple[RuleSpec, ...]
    actions: dict[str, ActionSpec]
    tools: dict[str, ToolSpec]
    path: str
    source: dict[str, Any]  # the loaded document, stored with the log so replay uses this exact version
    rule_library: dict[str, Rule] = field(repr=False, compare=False, default_factory=dict)

    @cached_property
    def field_rules(self) -> dict[str, list[Rule]]:
        """Field name -> the compiled rules its `extract` list selects."""
        return {name: [r for ref in f.extract for r in select_rules(self.rule_library, ref)]
                for name, f in self.fields.items()}


def resolve_domain_path(domain: str | Path) -> Path:
    """A path, or the name of a bundled domain (`ecommerce` -> domains/ecommerce.yaml)."""
    p = Path(domain)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    bundled = DOMAINS_DIR / f"{domain}.yaml"
    if bundled.exists():
        return bundled
    names = ", ".join(sorted(x.stem for x in DOMAINS_DIR.glob("*.yaml")))
    raise DomainError([DomainProblem(
        f"no domain file '{domain}'", line=None,
        fix=f"pass a path to a .yaml file or one of the bundled domains: {names}", code="CE103")], file=str(domain))


_schema_validator = None


def _validator() -> jsonschema.Draft202012Validator:
    global _schema_validator
    if _schema_validator is None:
        _schema_validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text("utf-8")))
    return _schema_validator


def _schema_problems(doc: LinedYaml) -> list[DomainProblem]:
    out = []
    for err in sorted(_validator().iter_errors(doc.data), key=lambda e: [str(p) for p in e.absolute_path]):
        path = [str(p) for p in err.absolute_path]
        if err.validator == "additionalProperties":
            extra = re.findall(r"'([^']+)' was unexpected", err.message)
            fix = "remove it, or check its spelling against the domain format (docs/domain-format.md)"
            for key in extra or [None]:
                kp = path + [key] if key else path
                out.append(DomainProblem(f"unknown key '{key}'", line=doc.line(kp), path="/".join(kp), fix=fix, code="CE104"))
            continue
        if err.validator == "required":
            fix = "add the missing key"
        elif err.validator == "enum":
            fix = "use one of: " + ", ".join(map(str, err.validator_value))
        elif err.validator == "pattern":
            fix = f"the value must match {err.validator_value}"
        elif err.validator == "type":
            fix = f"give a value of type {err.validator_value}"
        else:
            fix = "see the JSON Schema context_editor/data/domain.schema.json"
        out.append(DomainProblem(err.message, line=doc.line(path), path="/".join(path), fix=fix, code="CE104"))
    return out


def _semantic_problems(doc: LinedYaml, library: dict[str, Rule], doc_dir: Path) -> list[DomainProblem]:
    """Cross-references a schema cannot express: every name used must exist."""
    d = doc.data
    fields = d.get("fields") or {}
    langs = d.get("languages") or ["zh", "en"]
    out: list[DomainProblem] = []

    def problem(msg: str, path: str, fix: str, code: str = "CE105") -> None:
        out.append(DomainProblem(msg, line=doc.line(path), path=path, fix=fix, code=code))

    def known_field(name: str, path: str) -> None:
        if name not in fields:
            close = difflib.get_close_matches(name, list(fields), n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            problem(f"unknown field '{name}'", path, f"{hint}declare it under `fields:` or use one of: {', '.join(sorted(fields))}")

    for name, f in fields.items():
        base = f"fields/{name}"
        ftype = f.get("type")
        if ftype == "enum" and not f.get("values"):
            problem(f"enum field '{name}' has no `values`", base, "list its canonical values with their synonyms under `values:`")
        if ftype == "list" and not f.get("items"):
            problem(f"list field '{name}' has no `items`", base, "say what the list holds, e.g. `items: {type: enum, values: {...}}`")
        if f.get("constraints") and ftype not in ("int", "float", "money", "percent", "duration", "text", "list"):
            problem(f"constraints do not apply to type '{ftype}'", f"{base}/constraints", "remove `constraints` or change the type")
        for key in ("pattern",):
            if f.get(key):
                try:
                    re.compile(f[key])
                except re.error as exc:
                    problem(f"invalid regular expression: {exc}", f"{base}/{key}", "fix the pattern (Python `re` syntax)")
        for i, ref in enumerate(f.get("extract") or []):
            if ner_label(ref) is not None:
                if ner_label(ref) not in NER_LABELS:
                    problem(f"unknown entity label in '{ref}'", f"{base}/extract/{i}",
                            f"use one of: {', '.join('ner.' + x for x in NER_LABELS)}", "CE106")
                continue
            if not select_rules(library, ref):
                close = sorted({rid.rsplit(".", 1)[0] for rid in library if rid.split(".")[0] == ref.split(".")[0]})
                hint = f"known rules with that prefix: {', '.join(close)}" if close else "see the packs under rules/"
                problem(f"unknown extraction rule '{ref}'", f"{base}/extract/{i}", hint, "CE106")
        ask = f.get("ask") or {}
        for lang in langs:
            if ask and lang not in ask:
                problem(f"field '{name}' has no ask text in '{lang}'", f"{base}/ask", f"add `{lang}:` to its `ask` (the domain declares languages {langs})")

    def check_expr(expr: str, path: str) -> None:
        try:
            compile_expression(expr)
            names = expression_names(expr)
        except TemplateSyntaxError as exc:
            problem(f"invalid expression: {exc.message}", path, "write a Python-like expression such as `days_between(a, b) >= 1`", "CE107")
            return
        for n in sorted(names - set(fields)):
            problem(f"expression reads unknown name '{n}'", path, "use a declared field or a helper (days_between, amount, len, min, max, abs, today)", "CE107")

    m = d.get("machine")
    if m:
        states = m.get("states") or []
        if m.get("initial") and m["initial"] not in states:
            problem(f"initial state '{m['initial']}' is not in `states`", "machine/initial", f"use one of: {', '.join(states)}")
        for i, t in enumerate(m.get("transitions") or []):
            base = f"machine/transitions/{i}"
            srcs = t.get("source")
            for s in ([srcs] if isinstance(srcs, str) else srcs or []):
                if s != "*" and s not in states:
                    problem(f"unknown source state '{s}'", f"{base}/source", f"use '*' or one of: {', '.join(states)}")
            if t.get("dest") not in states:
                problem(f"unknown dest state '{t.get('dest')}'", f"{base}/dest", f"use one of: {', '.join(states)}")
            for fname in (t.get("when") or {}):
                known_field(fname, f"{base}/when/{fname}")
            for fname in (t.get("set") or {}):
                known_field(fname, f"{base}/set/{fname}")
            for j, fname in enumerate(t.get("clear") or []):
                known_field(fname, f"{base}/clear/{j}")
            for j, cond in enumerate(t.get("conditions") or []):
                if re.fullmatch(r"[a-z][a-z0-9_]*", cond):
                    known_field(cond, f"{base}/conditions/{j}")
                else:
                    check_expr(cond, f"{base}/conditions/{j}")
    plugins = d.get("plugins") or []
    for i, name in enumerate(plugins):
        if not (doc_dir / name).exists():
            problem(f"plugin module '{name}' not found next to the domain file", f"plugins/{i}",
                    f"create {doc_dir / name} or remove it from `plugins`", "CE108")
    for i, r in enumerate(d.get("rules") or []):
        if "check" in r:
            check_expr(r["check"], f"rules/{i}/check")
            continue
        module = r["plugin"].split(".")[0] + ".py"
        if module not in plugins:
            problem(f"rule '{r['id']}' uses plugin module '{module}', which is not listed under `plugins`",
                    f"rules/{i}/plugin", f"add '{module}' to `plugins:`", "CE108")
        for j, fname in enumerate(r["fields"]):
            known_field(fname, f"rules/{i}/fields/{j}")
    for aname, a in (d.get("actions") or {}).items():
        base = f"actions/{aname}"
        scope = a.get("scope", aname)
        for j, fname in enumerate(a.get("fields") or []):
            known_field(fname, f"{base}/fields/{j}")
            scopes = (fields.get(fname) or {}).get("scopes")
            if scopes and scope not in scopes:
                problem(f"field '{fname}' is visible only to scopes {scopes}, action '{aname}' has scope '{scope}'",
                        f"{base}/fields/{j}", f"remove '{fname}' from this action, or add '{scope}' to the field's `scopes`")
        for j, fname in enumerate(a.get("required") or []):
            if fname not in (a.get("fields") or []):
                problem(f"required field '{fname}' is not in the action's `fields`", f"{base}/required/{j}", f"add '{fname}' to `fields` of action '{aname}'")
        tpl = a.get("template")
        if tpl and not (templates_dir() / tpl).exists():
            problem(f"template '{tpl}' not found in templates/", f"{base}/template", "create it or remove `template` to use the default")
    return out


def _problems(path: Path) -> tuple[Any, list[DomainProblem], dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, [DomainProblem("file not found", line=None, fix="check the path", code="CE103")], {}
    except UnicodeDecodeError as exc:
        return None, [DomainProblem(f"not UTF-8 text: {exc.reason} at byte {exc.start}", line=None,
                                    fix="save the file as UTF-8", code="CE102")], {}
    doc = load_lined_yaml(text, str(path))
    if doc.problems and doc.data is None:
        return doc, doc.problems, {}
    if not isinstance(doc.data, dict):
        return doc, [DomainProblem("a domain file must be a YAML mapping (domain:, version:, fields:, actions:)",
                                   line=1, fix="start from domains/ecommerce.yaml", code="CE104")], {}
    library = load_rule_library()
    problems = doc.problems + _schema_problems(doc)
    if not problems:  # references are only meaningful in a structurally valid file
        problems = _semantic_problems(doc, library, path.parent)
    return doc, problems, library


def lint_domain(domain: str | Path) -> tuple[Path, list[DomainProblem]]:
    """Every problem in a domain file, in file order. An empty list means it loads."""
    path = resolve_domain_path(domain)
    _, problems, _ = _problems(path)
    return path, sorted(problems, key=lambda p: (p.line or 0))


def _build(doc_data: dict[str, Any], path: Path, library: dict[str, Rule]) -> Domain:
    d = doc_data
    fields = {}
    for name, f in d["fields"].items():
        values = {str(k): [str(s) for s in (v or [])] for k, v in (f.get("values") or {}).items()}
        items = dict(f.get("items") or {})
        if "values" in items:
            items["values"] = {str(k): [str(s) for s in (v or [])] for k, v in items["values"].items()}
        fields[name] = FieldSpec(
            name=name, type=f["type"], values=values, items=items, pattern=f.get("pattern"), unit=f.get("unit"),
            constraints=dict(f.get("constraints") or {}), cls=f.get("class", "anchor"), ttl=f.get("ttl", "session"),
            critical=bool(f.get("critical", False)), shared=bool(f.get("shared", False)), sources=tuple(f.get("sources") or DEFAULT_SOURCES),
            policy=f.get("policy", "accumulate" if f["type"] == "list" else "latest"),
            mentions=f.get("mentions", "affirmed"), ask=dict(f.get("ask") or {}),
            extract=tuple(f.get("extract") or ()), tool_keys=tuple(f.get("tool_keys") or (name,)),
            scopes=tuple(f.get("scopes") or ()), description=f.get("description", ""),
        )
    machine = None
    if d.get("machine"):
        m = d["machine"]
        transitions = []
        for t in m.get("transitions") or []:
            src = t["source"]
            when = {k: (v if isinstance(v, list) else [v]) for k, v in (t.get("when") or {}).items()}
            transitions.append(TransitionSpec(
                trigger=t["trigger"], source=(src,) if isinstance(src, str) else tuple(src), dest=t["dest"],
                when=when, conditions=tuple(t.get("conditions") or ()), on_fail=t.get("on_fail"),
                set=dict(t.get("set") or {}), clear=tuple(t.get("clear") or ())))
        machine = MachineSpec(tuple(m["states"]), m.get("initial", m["states"][0]), tuple(transitions))
    modules = _plugin_modules(d.get(PLUGIN_CODE) or {})
    rules = tuple(
        RuleSpec(r["id"], r["check"], r["code"], r.get("message", r["code"]), tuple(sorted(expression_names(r["check"]))))
        if "check" in r else
        RuleSpec(r["id"], None, r["code"], r.get("message", r["code"]), tuple(r["fields"]),
                 plugin=getattr(modules[r["plugin"].split(".")[0]], r["plugin"].split(".")[1]))
        for r in d.get("rules") or [])
    actions = {
        name: ActionSpec(name, tuple(a["fields"]), tuple(a.get("required") or ()), int(a.get("recent_rounds", 2)),
                         int(a.get("budget_tokens", 800)), a.get("template"), a.get("description", ""),
                         scope=a.get("scope", name), history_rounds=int(a.get("history_rounds", 20)),
                         max_history=int(a.get("max_history", 6)), safety_margin=int(a.get("safety_margin", 0)))
        for name, a in d["actions"].items()}
    tools = {name: ToolSpec(tuple(t.get("keep") or ()), int(t.get("max_items", 3))) for name, t in (d.get("tools") or {}).items()}
    used_rules = sorted({r.id for f in fields.values() for ref in f.extract for r in select_rules(library, ref)})
    fingerprint = canonical_json({
        "domain": d, "lexicons": lexicon_fingerprint(), "rules": {rid: [library[rid].pattern.pattern, library[rid].parse, library[rid].confidence] for rid in used_rules}})
    version_hash = hashlib.sha256(fingerprint.encode("utf-8")).hexdigest()[:16]
    return Domain(
        name=d["domain"], version=str(d["version"]), version_hash=version_hash,
        languages=tuple(d.get("languages") or ("zh", "en")), default_currency=d.get("default_currency", "CNY"),
        fields=fields, machine=machine, rules=rules, actions=actions, tools=tools, path=str(path), source=d, rule_library=library)


PLUGIN_CODE = "_plugin_code"  # plugin sources kept in the stored document: replay runs the same code


def _plugins_refused(path: str) -> DomainError:
    return DomainError([DomainProblem(
        "this domain declares Python plugin rules, which run code; they are not loaded unless enabled", line=None,
        fix="pass --allow-plugins (CLI) or allow_plugins=True (Python) if you trust this domain's plugin modules",
        code="CE109")], file=path)


def _plugin_modules(code: dict[str, str]) -> dict[str, types.ModuleType]:
    """Execute each plugin's source in a module of its own (only ever called once enabled)."""
    modules = {}
    for filename, text in sorted(code.items()):
        name = filename[:-3]
        module = types.ModuleType(f"context_editor_plugin_{name}")
        exec(compile(text, filename, "exec"), module.__dict__)  # noqa: S102 - explicitly enabled plugin code
        modules[name] = module
    return modules


def load_domain(domain: str | Path, allow_plugins: bool = False) -> Domain:
    """Load and check a domain file (a path or a bundled name). Raises DomainError on any problem.

    A domain with `plugins:` is refused unless `allow_plugins` is true: plugin modules are Python."""
    path = resolve_domain_path(domain)
    doc, problems, library = _problems(path)
    if problems:
        raise DomainError(sorted(problems, key=lambda p: p.line or 0), file=str(path))
    data = doc.data
    if data.get("plugins"):
        if not allow_plugins:
            raise _plugins_refused(str(path))
        data = {**data, PLUGIN_CODE: {n: (path.parent / n).read_text("utf-8") for n in data["plugins"]}}
    return _build(data, path, library)


def domain_from_source(source: dict[str, Any], path: str = "<stored>", allow_plugins: bool = False) -> Domain:
    """Rebuild a domain from the document stored with a session (for replay)."""
    if source.get(PLUGIN_CODE) and not allow_plugins:
        raise _plugins_refused(path)
    return _build(source, Path(path), load_rule_library())
