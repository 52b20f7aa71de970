"""Reusable extraction rule packs (`rules/<lang>/<pack>.yaml`).

A pack is a list of regular expressions, each with an id, a named group `value` (or the whole
match) and a parser that turns the matched text into a typed value. Domains refer to rules by
id or by prefix: `money.budget` selects `money.budget.zh` and `money.budget.en`. Patterns may
use `<<MACRO>>` placeholders defined in `rules/common/macros.yaml` (and `CUR_BEFORE` /
`CUR_AFTER`, generated from the lexicons' currency words), so a number or currency pattern is
written once. A macro given as a YAML list is a gazetteer: its phrases are matched
literally, longest first (a city list, a brand list).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import registry
from ..errors import DomainError, DomainProblem, Errors
from ..lang import Language, Lexicon, languages, lexicon
from ..lang.lexicon import COMMON, LEXICON_FILE
from ..resources import rules_dir
from .yamlines import load_lined_yaml

MACROS_FILE = "macros.yaml"
PARSERS = ("money", "number", "int", "percent", "date", "time", "duration", "count", "enum", "text", "upper")
# `extract` entries that name an entity label of the NER layer instead of a rule.
NER_PREFIX = "ner."
NER_LABELS = ("PERSON", "GPE", "LOC", "ORG", "PRODUCT", "FAC", "NORP", "EVENT", "WORK_OF_ART")
_MACRO = re.compile(r"<<([A-Z_][A-Z0-9_]*)>>")


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    language: str
    pattern: re.Pattern[str]
    parse: str | None  # None: parse by the field's type
    confidence: float
    source: str  # pack file and line, for error messages and `why`
    groups: tuple[Any, ...]  # regex groups that may hold the value (`value`, `value2`, …), else the match


def _macro_text(value: Any) -> str:
    """A macro's regex: a string as written, a list as a literal alternation, longest first."""
    if isinstance(value, list):
        return "|".join(re.escape(str(v)) for v in sorted({str(v) for v in value}, key=lambda v: (-len(v), v)))
    return str(value)


def _expand(pattern: str, macros: dict[str, str], seen: tuple[Any, ...] = ()) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in macros:
            raise KeyError(name)
        if name in seen:
            raise RecursionError(name)
        return "(?:" + _expand(macros[name], macros, seen + (name,)) + ")"

    return _MACRO.sub(sub, pattern)


def compile_rule(r: object, macros: dict[str, str], language: str, source: str) -> Rule | tuple[str, str]:
    """One rule written as a mapping (in a pack or inline under a field): a Rule, or (problem, fix)."""
    if not isinstance(r, dict) or not r.get("id") or not r.get("pattern"):
        return "a rule needs an `id` and a `pattern`", "add both keys to this rule"
    try:
        flags = re.IGNORECASE if r.get("ignore_case", True) else 0
        compiled = re.compile(_expand(str(r["pattern"]), macros), flags)
    except KeyError as exc:
        return (f"unknown macro <<{exc.args[0]}>>",
                "define it in rules/common/macros.yaml (or a macros.yaml in your rule pack directory) or fix its name")
    except (re.error, RecursionError) as exc:
        return f"invalid regular expression: {exc}", "fix the pattern (test it with Python's `re`)"
    parse = r.get("parse")
    if parse is not None and parse not in PARSERS:
        return f"unknown parser '{parse}'", f"use one of: {', '.join(PARSERS)}"
    groups = tuple(sorted(g for g in compiled.groupindex if g.startswith("value"))) or (0,)
    return Rule(str(r["id"]), language, compiled, parse, float(r.get("confidence", 0.9)), source, groups)


def _load_pack(path: Path, macros: dict[str, str], problems: list[tuple[Path, DomainProblem]],
               label: str | None = None) -> list[Rule]:
    try:
        doc = load_lined_yaml(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError) as exc:
        problems.append((path, Errors.BAD_RULE.problem(line=None, problem=f"cannot read rule pack: {exc}",
                                                       fix="save it as UTF-8 text")))
        return []
    for p in doc.problems:
        if p.is_error:
            problems.append((path, p))
    data = doc.data if isinstance(doc.data, dict) else {}
    if doc.data is not None and not isinstance(doc.data, dict):
        problems.append((path, Errors.BAD_RULE.problem(line=1, problem="a rule pack must be a mapping with `rules:`",
                                                       fix="write `language: en` and `rules: [{id: …, pattern: …}]`")))
    default_lang = path.parent.name if path.parent.name in ("zh", "en", "common") else "any"
    lang = str(data.get("language", default_lang))
    rules = []
    for i, r in enumerate(data.get("rules") or []):
        line = doc.line(f"rules/{i}")
        compiled = compile_rule(r, macros, lang, f"{label or path.parent.name + '/' + path.name}:{line}")
        if isinstance(compiled, tuple):
            problems.append((path, Errors.BAD_RULE.problem(line=line, path=f"rules/{i}", problem=compiled[0], fix=compiled[1])))
            continue
        rules.append(compiled)
    return rules


def read_macros(path: Path) -> dict[str, str]:
    """A macros file (`NAME: regex` or `NAME: [phrase, …]`) as regex texts; {} if there is none."""
    if not path.is_file():
        return {}
    data = load_lined_yaml(path.read_text("utf-8"), str(path)).data
    return {k: _macro_text(v) for k, v in (data or {}).items()} if isinstance(data, dict) else {}


def pack_files(location: Path) -> list[Path]:
    """The pack files of a location: the file itself, or a directory's `*.yaml` and `*/*.yaml`
    (its `macros.yaml` and lexicons excluded)."""
    if location.is_file():
        return [location]
    return sorted(p for p in [*location.glob("*.yaml"), *location.glob("*/*.yaml")]
                  if p.name not in (MACROS_FILE, LEXICON_FILE))


def add_rules(library: dict[str, Rule], rules: list[Rule], path: Path, problems: list[tuple[Path, DomainProblem]]) -> None:
    """Add rules to a library; an id defined twice is a problem naming both places."""
    for rule in rules:
        if rule.id in library:
            problems.append((path, Errors.RULE_ID_TWICE.problem(line=None, rule=rule.id, other=library[rule.id].source,
                                                                fix="give each rule a unique id")))
            continue
        library[rule.id] = rule


def _lexicon_macros() -> dict[str, str]:
    """Macros generated from the lexicons, so a word list is written once (currency words are
    the same for the finders and for rule packs)."""
    lex = lexicon()
    prefix = [*lex.words("currency_prefix"), *lex.words("currency_codes")]
    return {"CUR_BEFORE": _macro_text(prefix), "CUR_AFTER": _macro_text([w for w in lex.inverse("currency") if w.isalnum()])}


def package_macros() -> dict[str, str]:
    """The bundled macros: generated from the lexicons, then `rules/common/macros.yaml`."""
    return _lexicon_macros() | read_macros(rules_dir() / COMMON / MACROS_FILE)


def _pack_files() -> list[Path]:
    """The language-neutral packs of `rules/common/`, then every registered language's packs."""
    common = [p for p in Language(COMMON, rules_dir() / COMMON).rule_packs() if p.name != MACROS_FILE]
    return common + [path for lang in languages() for path in lang.rule_packs()]


def load_rule_library() -> dict[str, Rule]:
    """All rules of all packs of the registered languages, by id. Broken packs are a DomainError
    naming the pack file."""
    return _load_library(tuple(_pack_files()), lexicon())


@lru_cache(maxsize=4)
def _load_library(packs: tuple[Path, ...], lex: Lexicon) -> dict[str, Rule]:
    macros = package_macros()
    problems: list[tuple[Path, DomainProblem]] = []
    library: dict[str, Rule] = {}
    for path in packs:
        add_rules(library, _load_pack(path, macros, problems), path, problems)
    if problems:
        path, _ = problems[0]
        raise DomainError([p for _, p in problems], file=str(path))
    return library


def rule_document(rule: Rule) -> dict[str, Any]:
    """A compiled rule as stored with the domain version (macros already expanded)."""
    return {"pattern": rule.pattern.pattern, "flags": int(rule.pattern.flags & ~re.UNICODE), "parse": rule.parse,
            "confidence": rule.confidence, "language": rule.language, "source": rule.source}


def rule_from_document(rid: str, d: dict[str, Any]) -> Rule:
    """The rule exactly as it was stored: replay does not read today's packs."""
    compiled = re.compile(d["pattern"], d["flags"])
    groups = tuple(sorted(g for g in compiled.groupindex if g.startswith("value"))) or (0,)
    return Rule(rid, d["language"], compiled, d["parse"], d["confidence"], d["source"], groups)


def extractor_ref(ref: str) -> tuple[str, str] | None:
    """'caps.WORD' -> ('caps', 'WORD') when `caps` is a registered extractor other than the NER
    layer (entry-point group context_editor.extractors); None for any other ref. A registered
    extractor's name shadows a rule family of the same name."""
    name, dot, label = ref.partition(".")
    return (name, label) if dot and label and name != NER_PREFIX[:-1] and name in registry.extractors else None


def ner_label(ref: str) -> str | None:
    """'ner.GPE' -> 'GPE'; None for a ref that is not an NER ref."""
    return ref[len(NER_PREFIX):] if ref.startswith(NER_PREFIX) else None


def select_rules(library: dict[str, Rule], ref: str) -> list[Rule]:
    """Rules named by `ref`: the exact id, or every id that starts with `ref.`."""
    if ref in library:
        return [library[ref]]
    return [r for rid, r in sorted(library.items()) if rid.startswith(ref + ".")]
