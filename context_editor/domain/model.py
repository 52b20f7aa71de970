"""The domain file: loading, linting and the typed view every stage reads.

`lint_domain` reports every problem it can find in one pass (structure in plain words, the
resources beside the file, references, likely mistakes as warnings) with file, line and fix;
`load_domain` refuses a file with any error. The loaded document is stored with everything
resolved into it (the rules the fields use, gazetteers, templates, plugin code), and the
domain's `version_hash` is the hash of that document, so provenance and replay name, and
replay runs, the exact configuration that produced a value.
"""

from __future__ import annotations

import hashlib
import types
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from ..errors import DomainError, DomainProblem, Errors
from ..expressions import expression_names
from ..lang import Lexicon, lexicon
from ..lang.lexicon import merged
from ..model import canonical_json
from ..resources import domains_dir
from .checks import semantic_problems
from .local import RESOLVED, Resolution, field_refs, library_of, resolve, stored
from .nermodel import MARGIN, STORED_KEY, NerModel, configured_models, reloaded_models, stored_models
from .regexcheck import superlinear_problem
from .rulepacks import Rule, load_rule_library, select_rules
from .schema_words import SCHEMA_PATH, schema_problems
from .yamlines import load_lined_yaml

DOMAINS_DIR = domains_dir()
# Who may set a field by default: what the user says and what tools return. Assistant text only
# proposes; system messages are instructions, not facts about the user.
DEFAULT_SOURCES = ("user", "tool")
GUARD_FAILED = "GUARD_FAILED"  # the alert of a failing guard whose transition names no `on_fail`


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
    # `text`: an enum's values are found wherever they are written; `rules`: only in what the
    # field's rules find (a landmark before "周边", not every place named in the conversation).
    enum_match: str = "text"
    ask: dict[str, str] = field(default_factory=dict)
    extract: tuple[str, ...] = ()
    tool_keys: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()  # empty: visible to every action
    description: str = ""
    prefer: str = "future"  # a date without a year points forward (a booking) or back (an incident)
    # `scope: user`: the value outlives the session, for the same tenant and user (memory/user.py),
    # weighted by `importance`, halved every `half_life_days` (None: no decay) since it was last
    # said or used, and no longer given to new sessions below `forget_below`.
    scope: str = "session"
    importance: float = 1.0
    half_life_days: float | None = None
    forget_below: float = 0.1
    pii: str | None = None  # mask | hash | drop: how a context shows the value (inject/pii.py)

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
    on_fail: str | None  # the alert a failing guard raises; None keeps it silent
    set: dict[str, Any]
    clear: tuple[str, ...]
    when_complete: tuple[str, ...] = ()


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
    state_lines: bool = False  # each field one text line in <state>, not a <field> element (fewer tokens)
    minimal: bool = False  # each value once: turns the state absorbed left out, the cheaper of state and dialogue (inject/minimal.py)
    # A minimal context's line numbers: "gaps" leaves a line's "mN" out where the order tells it
    # (render._implied_sources), "all" writes it on every line.
    line_numbers: str = "gaps"
    # While a minimal action's whole conversation is loaded: "smaller" sends the conversation as the
    # user said it or the state form, whichever counts fewer tokens (the state form only while it says
    # every value-like span); "always" sends the conversation unless it does not fit the budget (the
    # state form drops user turns the state absorbed, and with them the words extraction did not read).
    conversation_form: str = "smaller"
    # A minimal action's user lines that are not shown as turns: "older" reduces those older than the
    # loaded window to their clauses with open values (a digest), "all" every one (minimal.zone).
    user_clauses: str = "older"


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
    # Dialogue mechanics, each on unless switched off: `answers` (a reply is read as the answer to
    # the field the assistant asked for), `offers` (assistant offers, accepted, declined or picked),
    # `no_preference` ("any date is fine" sets the field to "any").
    dialogue: dict[str, Any] = field(default_factory=dict)
    # Carry-over from the other domains of a conversation: field -> the `domain.field`s it takes
    # a value from while the user has said none of their own (`transform.carry`).
    carry: dict[str, tuple[str, ...]] = field(default_factory=dict)
    rule_library: dict[str, Rule] = field(repr=False, compare=False, default_factory=dict)
    ner_models: dict[str, NerModel] = field(default_factory=dict)  # language -> trained model (`ner:`)
    ner_margin: float = MARGIN

    @cached_property
    def lexicon(self) -> Lexicon:
        """The lexicons this version ran with (stored with it); the installed object itself when
        they are the same, so the finders' caches are shared."""
        stored_parts = self.source.get(RESOLVED, {}).get("lexicons")
        installed = lexicon()
        if not stored_parts or stored_parts == installed.per_language:
            return installed
        return merged(stored_parts)

    @property
    def retention_days(self) -> dict[str, int]:
        """`retention:` as days per kind of record (`messages`): `retention apply` erases older ones.
        The schema admits only "<days>d"."""
        return {kind: int(str(age)[:-1]) for kind, age in (self.source.get("retention") or {}).items()}

    @property
    def templates(self) -> dict[str, str]:
        """Templates beside the domain file, by file name (stored with the version)."""
        return dict(self.source.get(RESOLVED, {}).get("templates") or {})

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
    raise DomainError([Errors.NO_DOMAIN.problem(line=None, domain=domain, names=names)], file=str(domain))


def _problems(path: Path) -> tuple[Any, list[DomainProblem], Resolution | None]:
    """Every problem of a domain file in one pass: YAML, structure, resources beside it, references."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, [Errors.DOMAIN_FILE_NOT_FOUND.problem(line=None)], None
    except UnicodeDecodeError as exc:
        return None, [Errors.NOT_UTF8.problem(line=None, reason=exc.reason, byte=exc.start)], None
    doc = load_lined_yaml(text, str(path))
    if doc.problems and doc.data is None:
        return doc, doc.problems, None
    if not isinstance(doc.data, dict):
        return doc, [Errors.NOT_A_DOMAIN_MAPPING.problem(line=1)], None
    structural = schema_problems(doc)
    res = resolve(doc.data, path.parent, doc.line)
    semantic = semantic_problems(doc, res, path.parent, structure_ok=not any(p.is_error for p in structural))
    return doc, doc.problems + structural + res.problems + semantic, res


def lint_domain(domain: str | Path, timing: bool = False) -> tuple[Path, list[DomainProblem]]:
    """Every problem in a domain file (errors and warnings), in file order. No error means it loads.
    With `timing`, every rule the domain uses (bundled ones too) is timed on adversarial text and
    refused if its cost grows faster than the text (seconds of work, so only on request)."""
    path = resolve_domain_path(domain)
    doc, problems, res = _problems(path)
    if timing and res is not None and not any(p.is_error for p in problems):
        problems += _superlinear_problems(doc, res)
    return path, sorted(problems, key=lambda p: (p.line or 0, not p.is_error))


def _superlinear_problems(doc: Any, res: Resolution) -> list[DomainProblem]:
    out = []
    for name, f in (doc.data.get("fields") or {}).items():
        for ref in field_refs(f, name):
            for rule in select_rules(res.library, ref):
                if why := superlinear_problem(rule.id, rule.pattern):
                    out.append(Errors.SUPERLINEAR_RULE.problem(line=doc.line(f"fields/{name}/extract"),
                                                               path=f"fields/{name}/extract", problem=why))
    return out


def _values(own: Any, gazetteer: Any, resolved: dict[str, Any]) -> dict[str, list[str]]:
    """Enum values as written, merged with the values of the gazetteer file they name."""
    out = {str(k): [str(s) for s in (v or [])] for k, v in (own or {}).items()}
    for k, syns in (resolved.get("gazetteers", {}).get(gazetteer) or {}).items() if gazetteer else ():
        out[k] = list(dict.fromkeys([*out.get(k, []), *syns]))
    return out


def _memory(m: dict[str, Any]) -> dict[str, Any]:
    """The decay settings of a `scope: user` field (`memory:` in the YAML), defaults filled in."""
    half_life = m.get("half_life_days")
    return {"importance": float(m.get("importance", 1.0)), "forget_below": float(m.get("forget_below", 0.1)),
            "half_life_days": None if half_life is None else float(half_life)}


def _build(d: dict[str, Any], path: Path) -> Domain:
    """The typed domain of a stored document (YAML data plus its `_resolved` resources)."""
    resolved = d[RESOLVED]
    library = library_of(resolved)
    fields = {}
    for name, f in d["fields"].items():
        values = _values(f.get("values"), f.get("gazetteer"), resolved)
        items = dict(f.get("items") or {})
        if "values" in items or "gazetteer" in items:
            items["values"] = _values(items.get("values"), items.get("gazetteer"), resolved)
        fields[name] = FieldSpec(
            name=name, type=f["type"], values=values, items=items, pattern=f.get("pattern"), unit=f.get("unit"),
            constraints=dict(f.get("constraints") or {}), cls=f.get("class", "anchor"), ttl=f.get("ttl", "session"),
            critical=bool(f.get("critical", False)), shared=bool(f.get("shared", False)), sources=tuple(f.get("sources") or DEFAULT_SOURCES),
            policy=f.get("policy", "accumulate" if f["type"] == "list" else "latest"),
            mentions=f.get("mentions", "affirmed"), enum_match=f.get("enum_match", "text"), ask=dict(f.get("ask") or {}),
            extract=tuple(field_refs(f, name)), tool_keys=tuple(f.get("tool_keys") or (name,)),
            scopes=tuple(f.get("scopes") or ()), description=f.get("description", ""), prefer=f.get("prefer", "future"),
            scope=f.get("scope", "session"), **_memory(f.get("memory") or {}),
            pii=f.get("pii"),
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
                when=when, conditions=tuple(t.get("conditions") or ()), on_fail=t.get("on_fail", GUARD_FAILED),
                set=dict(t.get("set") or {}), clear=tuple(t.get("clear") or ()),
                when_complete=tuple(t.get("when_complete") or ())))
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
                         max_history=int(a.get("max_history", 6)), safety_margin=int(a.get("safety_margin", 0)),
                         state_lines=bool(a.get("state_lines", False)), minimal=bool(a.get("minimal", False)),
                         line_numbers=str(a.get("line_numbers", "gaps")),
                         conversation_form=str(a.get("conversation_form", "smaller")),
                         user_clauses=str(a.get("user_clauses", "older")))
        for name, a in d["actions"].items()}
    tools = {name: ToolSpec(tuple(t.get("keep") or ()), int(t.get("max_items", 3))) for name, t in (d.get("tools") or {}).items()}
    models = reloaded_models(d.get(STORED_KEY) or {})
    if models:  # the weights as they are now: a retrained model is a new version (where they are is not)
        d = {**d, STORED_KEY: stored_models(models)}
    weights = {lang: {"name": m.name, "hash": m.hash} for lang, m in sorted(models.items())}
    # The document holds the resolved rules, gazetteers and templates: its hash covers all of them.
    version_hash = hashlib.sha256(canonical_json({**d, STORED_KEY: weights} if models else d).encode("utf-8")).hexdigest()[:16]
    ner = d.get("ner")
    return Domain(
        name=d["domain"], version=str(d["version"]), version_hash=version_hash,
        languages=tuple(d.get("languages") or ("zh", "en")), default_currency=d.get("default_currency", "CNY"),
        fields=fields, machine=machine, rules=rules, actions=actions, tools=tools, path=str(path), source=d,
        dialogue=dict(d.get("dialogue") or {}), rule_library=library,
        carry={name: tuple(sources) for name, sources in (d.get("carry") or {}).items()},
        ner_models=models, ner_margin=float(ner.get("margin", MARGIN)) if isinstance(ner, dict) else MARGIN)


PLUGIN_CODE = "_plugin_code"  # plugin sources kept in the stored document: replay runs the same code


def _plugins_refused(path: str) -> DomainError:
    return DomainError([Errors.PLUGINS_REFUSED.problem(line=None)], file=path)


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
    doc, problems, res = _problems(path)
    errors = [p for p in problems if p.is_error]
    if errors or res is None:
        raise DomainError(sorted(errors, key=lambda p: p.line or 0), file=str(path))
    data = {**doc.data, RESOLVED: stored(doc.data, res)}
    if data.get("plugins"):
        if not allow_plugins:
            raise _plugins_refused(str(path))
        data[PLUGIN_CODE] = {n: (path.parent / n).read_text("utf-8") for n in data["plugins"]}
    if data.get("ner"):  # resolved once, here, relative to the file; the stored document keeps where they are
        data[STORED_KEY] = stored_models(configured_models(data["ner"], path.parent))
    return _build(data, path)


def domain_from_source(source: dict[str, Any], path: str = "<stored>", allow_plugins: bool = False) -> Domain:
    """Rebuild a domain from the document stored with a session (for replay): its rules,
    gazetteers and templates are the stored ones, not today's files."""
    if source.get(PLUGIN_CODE) and not allow_plugins:
        raise _plugins_refused(path)
    if RESOLVED not in source:  # stored before resources were resolved into the document
        source = {**source, RESOLVED: stored(source, Resolution(library=dict(load_rule_library())))}
    return _build(source, Path(path))
