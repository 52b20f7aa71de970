"""What a domain brings along: rule packs, inline rules, gazetteers and templates beside its file.

A domain team must be able to extract with its own rules without touching the package. The
domain file names them by paths relative to itself (`rule_packs: [./rules]`,
`gazetteer: ./insurers.csv`, `templates: ./templates`) or writes a rule inline under a field
(`extract: [{pattern: …, parse: money}]`). `resolve` reads all of it, together with the bundled
packs, into one library; `stored` turns what the domain uses into plain data kept in the domain
document, so the version hash covers it and replay runs exactly what ran, whatever the package
or the files beside the domain hold later.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import DomainProblem, Entry, Errors
from ..lang import lexicon
from .regexcheck import SAMPLE_LENGTH, slow_rule
from .rulepacks import (Rule, _load_pack, add_rules, compile_rule, load_rule_library, pack_files, package_macros,
                        read_macros, rule_document, rule_from_document, select_rules)

RESOLVED = "_resolved"  # key of the resolved resources in the stored domain document
TEMPLATE_SUFFIXES = (".j2", ".jinja", ".xml")
LineOf = Callable[[str], "int | None"]  # path in the domain document -> its line


@dataclass
class Resolution:
    library: dict[str, Rule] = field(default_factory=dict)  # bundled + local packs + inline rules
    local_rules: list[Rule] = field(default_factory=list)  # the domain's own (timed for backtracking)
    gazetteers: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # path as written -> values
    templates: dict[str, str] = field(default_factory=dict)  # file name -> text
    problems: list[DomainProblem] = field(default_factory=list)


def inline_id(field_name: str, i: int, rule: dict[str, Any]) -> str:
    return str(rule.get("id") or f"{field_name}.inline.{i}")


def _mapping(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _problem(res: Resolution, line_of: LineOf, path: str, msg: str, fix: str, entry: Entry[Any]) -> None:
    res.problems.append(entry.problem(line=line_of(path), path=path, problem=msg, fix=fix))


def _local_packs(data: dict[str, Any], base: Path, res: Resolution, line_of: LineOf) -> None:
    packs: list[Any] = data["rule_packs"] if isinstance(data.get("rule_packs"), list) else []
    macros = package_macros()
    pack_problems: list[tuple[Path, DomainProblem]] = []
    for i, entry in enumerate(packs):
        where = base / str(entry)
        if not where.exists():
            res.problems.append(Errors.RULE_PACK_NOT_FOUND.problem(line=line_of(f"rule_packs/{i}"), path=f"rule_packs/{i}",
                                                                   entry=entry, where=where))
            continue
        own = {**macros, **read_macros(where / "macros.yaml")} if where.is_dir() else macros
        for path in pack_files(where):
            label = path.relative_to(base).as_posix() if path.is_relative_to(base) else str(path)
            rules = _load_pack(path, own, pack_problems, label=label)
            res.local_rules.extend(rules)
            add_rules(res.library, rules, path, pack_problems)
    for path, p in pack_problems:
        p.message = f"in rule pack {path}: {p.message}" + (f" (line {p.line})" if p.line else "")
        p.line, p.path = line_of("rule_packs"), "rule_packs"
        res.problems.append(p)


def _inline_rules(data: dict[str, Any], res: Resolution, line_of: LineOf) -> None:
    macros = package_macros()
    for name, f in _mapping(data.get("fields")).items():
        extract = _mapping(f).get("extract")
        for i, r in enumerate(extract if isinstance(extract, list) else []):
            if not isinstance(r, dict):
                continue
            rid = inline_id(name, i, r)
            where = f"fields/{name}/extract/{i}"
            compiled = compile_rule({**r, "id": rid}, macros, "any", f"inline:{name}")
            if isinstance(compiled, tuple):
                _problem(res, line_of, where, compiled[0], compiled[1], Errors.BAD_RULE)
                continue
            if rid in res.library:
                res.problems.append(Errors.RULE_ID_TWICE.problem(line=line_of(where), path=where, rule=rid,
                                                                 other=res.library[rid].source,
                                                                 fix="give the inline rule another `id`"))
                continue
            res.library[rid] = compiled
            res.local_rules.append(compiled)


def read_gazetteer(path: Path) -> dict[str, list[str]] | tuple[str, int | None]:
    """Canonical value -> synonyms from a CSV or JSON file, or (what is wrong, line).

    CSV: one entity per row, its canonical value in the first column and synonyms in the other
    cells (a cell may hold several, separated by `|`); a first row whose first cell is `value`
    is a header. JSON: `{value: [synonym, …]}`, or a list of values or of
    `{"value": …, "synonyms": […]}`."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text: {exc.reason} at byte {exc.start}", None
    out: dict[str, list[str]] = {}
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return f"not valid JSON: {exc.msg}", exc.lineno
        if isinstance(data, dict):
            items = [(k, v) for k, v in data.items()]
        elif isinstance(data, list):
            items = [(d.get("value"), d.get("synonyms") or []) if isinstance(d, dict) else (d, []) for d in data]
        else:
            return "a JSON gazetteer is a mapping {value: [synonyms]} or a list", 1
        for value, synonyms in items:
            if not isinstance(value, (str, int)) or str(value).strip() == "" or not isinstance(synonyms, list):
                return f"entry {value!r}: a value needs text and its synonyms a list", None
            out[str(value).strip()] = [str(s).strip() for s in synonyms if str(s).strip()]
        return out or ("the gazetteer is empty", None)
    if path.suffix.lower() not in (".csv", ".tsv"):
        return f"unknown gazetteer format '{path.suffix}'", None
    try:
        rows = list(csv.reader(io.StringIO(text), delimiter="\t" if path.suffix.lower() == ".tsv" else ","))
    except csv.Error as exc:
        return f"not valid CSV: {exc}", None
    for n, row in enumerate(rows, start=1):
        cells = [c.strip() for c in row]
        if not any(cells) or (n == 1 and cells[0].lower() == "value"):
            continue
        if not cells[0]:
            return "a row with synonyms but no value in its first column", n
        out[cells[0]] = [s.strip() for c in cells[1:] for s in c.split("|") if s.strip()]
    return out or ("the gazetteer is empty", None)


def _gazetteers(data: dict[str, Any], base: Path, res: Resolution, line_of: LineOf) -> None:
    for name, f in _mapping(data.get("fields")).items():
        for where, holder in ((f"fields/{name}/gazetteer", _mapping(f)), (f"fields/{name}/items/gazetteer", _mapping(_mapping(f).get("items")))):
            entry = holder.get("gazetteer")
            if not isinstance(entry, str) or entry in res.gazetteers:
                continue
            path = base / entry
            if not path.is_file():
                _problem(res, line_of, where, f"gazetteer '{entry}' not found (looked for {path})",
                         "create the file (CSV: value,synonym|synonym; or JSON {value: [synonyms]}) or fix the path; "
                         "paths are relative to the domain file", Errors.GAZETTEER)
                continue
            read = read_gazetteer(path)
            if isinstance(read, tuple):
                msg, line = read
                at = f" line {line}" if line else ""
                _problem(res, line_of, where, f"gazetteer {entry}{at}: {msg}",
                         "one entity per row: canonical value first, then synonyms (CSV), or JSON {value: [synonyms]}",
                         Errors.GAZETTEER)
                continue
            res.gazetteers[entry] = read


def _templates(data: dict[str, Any], base: Path, res: Resolution, line_of: LineOf) -> None:
    entry = data.get("templates")
    if not isinstance(entry, str):
        return
    where = base / entry
    if not where.is_dir():
        res.problems.append(Errors.TEMPLATES_DIR.problem(line=line_of("templates"), path="templates", entry=entry, where=where))
        return
    for path in sorted(where.iterdir()):
        if path.is_file() and path.suffix in TEMPLATE_SUFFIXES:
            res.templates[path.name] = path.read_text(encoding="utf-8")


def resolve(data: dict[str, Any], base: Path, line_of: LineOf, check_backtracking: bool = True) -> Resolution:
    """Read the bundled packs and everything the domain file names beside it. Problems carry lines."""
    res = Resolution(library=dict(load_rule_library()))
    _local_packs(data, base, res, line_of)
    _inline_rules(data, res, line_of)
    _gazetteers(data, base, res, line_of)
    _templates(data, base, res, line_of)
    if check_backtracking and not res.problems:
        slow = slow_rule(tuple((r.id, r.pattern.pattern, int(r.pattern.flags)) for r in res.local_rules))
        if slow:
            rule = res.library[slow]
            res.problems.append(Errors.CATASTROPHIC_REGEX.problem(
                line=line_of("rule_packs") if not rule.source.startswith("inline:") else line_of(f"fields/{rule.source[7:]}/extract"),
                rule=slow, source=rule.source, length=SAMPLE_LENGTH + 1))
    return res


def field_refs(f: dict[str, Any], name: str) -> list[str]:
    """The rule references of a field's `extract`: ids as written, inline rules by their id."""
    refs: list[Any] = f["extract"] if isinstance(f.get("extract"), list) else []
    return [inline_id(name, i, r) if isinstance(r, dict) else str(r) for i, r in enumerate(refs)]


def stored(data: dict[str, Any], res: Resolution) -> dict[str, Any]:
    """What the domain uses, as plain data: rules (id -> pattern, flags, parse, confidence),
    gazetteers, templates and the lexicons the parsers read. Kept in the domain document under
    `_resolved`, so the version hash covers all of it."""
    used = {r.id: r for name, f in _mapping(data.get("fields")).items()
            for ref in field_refs(_mapping(f), name) for r in select_rules(res.library, ref)}
    return {"rules": {rid: rule_document(r) for rid, r in sorted(used.items())},
            "gazetteers": res.gazetteers, "templates": res.templates, "lexicons": lexicon().per_language}


def library_of(resolved: dict[str, Any]) -> dict[str, Rule]:
    """The rules of a stored document, compiled exactly as they were."""
    return {rid: rule_from_document(rid, d) for rid, d in resolved.get("rules", {}).items()}
