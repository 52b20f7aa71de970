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
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import DomainError, DomainProblem
from ..lang import Language, Lexicon, languages, lexicon
from ..lang.lexicon import COMMON
from ..resources import rules_dir
from .yamlines import load_lined_yaml

MACROS_FILE = "macros.yaml"
PARSERS = ("money", "number", "int", "percent", "date", "duration", "count", "enum", "text", "upper")
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


def _load_pack(path: Path, macros: dict[str, str], problems: list[tuple[Path, DomainProblem]]) -> list[Rule]:
    doc = load_lined_yaml(path.read_text(encoding="utf-8"), str(path))
    for p in doc.problems:
        problems.append((path, p))
    data = doc.data or {}
    lang = data.get("language", path.parent.name)
    rules = []
    for i, r in enumerate(data.get("rules") or []):
        line = doc.line(f"rules/{i}")
        def bad(msg: str, fix: str) -> None:
            problems.append((path, DomainProblem(msg, line=line, path=f"rules/{i}", fix=fix, code="CE110")))
        if not isinstance(r, dict) or not r.get("id") or not r.get("pattern"):
            bad("a rule needs an `id` and a `pattern`", "add both keys to this rule")
            continue
        try:
            flags = re.IGNORECASE if r.get("ignore_case", True) else 0
            compiled = re.compile(_expand(str(r["pattern"]), macros), flags)
        except KeyError as exc:
            bad(f"unknown macro <<{exc.args[0]}>>", "define it in rules/common/macros.yaml or fix its name")
            continue
        except (re.error, RecursionError) as exc:
            bad(f"invalid regular expression: {exc}", "fix the pattern (test it with Python's `re`)")
            continue
        parse = r.get("parse")
        if parse is not None and parse not in PARSERS:
            bad(f"unknown parser '{parse}'", f"use one of: {', '.join(PARSERS)}")
            continue
        groups = tuple(sorted(g for g in compiled.groupindex if g.startswith("value"))) or (0,)
        rules.append(Rule(str(r["id"]), lang, compiled, parse, float(r.get("confidence", 0.9)),
                          f"{path.parent.name}/{path.name}:{line}", groups))
    return rules


def _lexicon_macros() -> dict[str, str]:
    """Macros generated from the lexicons, so a word list is written once (currency words are
    the same for the finders and for rule packs)."""
    lex = lexicon()
    prefix = [*lex.words("currency_prefix"), *lex.words("currency_codes")]
    return {"CUR_BEFORE": _macro_text(prefix), "CUR_AFTER": _macro_text([w for w in lex.inverse("currency") if w.isalnum()])}


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
    macro_file = rules_dir() / COMMON / MACROS_FILE
    macros = _lexicon_macros()
    if macro_file.exists():
        written = load_lined_yaml(macro_file.read_text("utf-8"), str(macro_file)).data or {}
        macros |= {k: _macro_text(v) for k, v in written.items()}
    problems: list[tuple[Path, DomainProblem]] = []
    library: dict[str, Rule] = {}
    for path in packs:
        for rule in _load_pack(path, macros, problems):
            if rule.id in library:
                problems.append((path, DomainProblem(f"rule id '{rule.id}' is defined twice (also in {library[rule.id].source})",
                                                     line=None, fix="give each rule a unique id", code="CE111")))
            library[rule.id] = rule
    if problems:
        path, _ = problems[0]
        raise DomainError([p for _, p in problems], file=str(path))
    return library


def ner_label(ref: str) -> str | None:
    """'ner.GPE' -> 'GPE'; None for a ref that is not an NER ref."""
    return ref[len(NER_PREFIX):] if ref.startswith(NER_PREFIX) else None


def select_rules(library: dict[str, Rule], ref: str) -> list[Rule]:
    """Rules named by `ref`: the exact id, or every id that starts with `ref.`."""
    if ref in library:
        return [library[ref]]
    return [r for rid, r in sorted(library.items()) if rid.startswith(ref + ".")]
