"""Lexicon loading: `rules/<lang>/lexicon.yaml` of every registered language, merged.

Finders scan text that mixes languages ("预算500 dollars"), so they read the union of all
registered lexicons: lists are concatenated (duplicates dropped, first seen first), mappings are
merged key by key. The merged lexicon is cached; `reset()` drops the cache after a language is
registered at run time. A stored domain version carries the lexicons it ran with; `using(lex)`
makes `lexicon()` return that one while its messages are processed, so replay reads the words
that were read then, not today's.
"""

from __future__ import annotations

import hashlib
import json
import re
import types
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Iterator

import yaml

from .. import registry
from ..errors import Errors
from ..resources import rules_dir

LEXICON_FILE = "lexicon.yaml"
COMMON = "common"


@dataclass(frozen=True)
class Language:
    """A registered language: its code and the directory of its lexicon and rule packs."""

    code: str
    directory: Path
    detect: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def lexicon_path(self) -> Path:
        return self.directory / LEXICON_FILE

    def rule_packs(self) -> list[Path]:
        """The language's rule packs: every YAML file in its directory but the lexicon."""
        return sorted(p for p in self.directory.glob("*.yaml") if p.name != LEXICON_FILE)


def builtin(code: str) -> Language:
    """A language bundled in `rules/<code>/` (the built-ins' entry points call this)."""
    return Language(code, rules_dir() / code)


def _as_language(code: str, obj: Any) -> Language:
    """An entry point may name a Language, a factory of one, or a data-only package (a module
    whose directory holds `lexicon.yaml` and rule packs)."""
    if isinstance(obj, Language):
        return obj
    if isinstance(obj, types.ModuleType) and obj.__file__:
        return Language(code, Path(obj.__file__).parent)
    if callable(obj):
        return _as_language(code, obj())
    raise Errors.NOT_A_LANGUAGE(code=code)


def language(code: str) -> Language:
    return _as_language(code, registry.languages.get(code))


def languages() -> list[Language]:
    """Every registered language, sorted by code (deterministic merge order)."""
    return [language(code) for code in registry.languages.names()]


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise Errors.LEXICON_SYNTAX(detail=exc, file=str(path), line=mark.line + 1 if mark else None) from None
    if not isinstance(data, dict):
        raise Errors.LEXICON_NOT_MAPPING(file=str(path), line=1)
    bad = _not_words(data)
    if bad:
        raise Errors.LEXICON_NOT_A_WORD(entry=bad, file=str(path))
    # As JSON sees it (keys are strings: `months: {1: …}`), so the copy stored with a domain
    # document hashes the same after its round trip through a store.
    normalised: dict[str, Any] = json.loads(json.dumps(data, ensure_ascii=False))
    return normalised


def _not_words(node: Any, path: str = "") -> str | None:
    """The path of the first list item that is not a string or a number, else None."""
    if isinstance(node, dict):
        return next((bad for k, v in node.items() if (bad := _not_words(v, f"{path}/{k}"))), None)
    if isinstance(node, list):
        return next((f"{path}: {v!r}" for v in node if isinstance(v, bool) or not isinstance(v, (str, int, float))), None)
    return None


def _merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    for key, value in more.items():
        old = into.get(key)
        if isinstance(old, dict) and isinstance(value, dict):
            _merge(old, value)
        elif isinstance(old, list) and isinstance(value, list):
            old.extend(v for v in value if v not in old)
        else:
            into[key] = json.loads(json.dumps(value))  # a private copy


class Lexicon:
    """The merged lexicon: `words("budget")`, `table("currency")` with paths `a/b`."""

    def __init__(self, data: dict[str, Any], per_language: dict[str, dict[str, Any]]):
        self.data, self.per_language = data, per_language

    def get(self, path: str, default: Any = None) -> Any:
        node: Any = self.data
        for part in path.split("/"):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def words(self, path: str) -> list[str]:
        """A word list (empty when no language defines it)."""
        return [str(w) for w in self.get(path, [])]

    def table(self, path: str) -> dict[str, list[str]]:
        """A mapping of name -> word list (currency code -> words, duration unit -> words…)."""
        return {str(k): [str(w) for w in v] for k, v in self.get(path, {}).items()}

    def inverse(self, path: str) -> dict[str, str]:
        """word -> name for a table (lower-cased words)."""
        return {w.lower(): name for name, ws in self.table(path).items() for w in ws}

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        return iter(self.per_language.items())


def merged(per_language: dict[str, dict[str, Any]]) -> Lexicon:
    """The lexicon of these per-language parts, merged common first, then by language code."""
    out: dict[str, Any] = {}
    order = [COMMON, *sorted(code for code in per_language if code != COMMON)]
    for code in order:
        if code in per_language:
            _merge(out, per_language[code])
    return Lexicon(out, {code: per_language[code] for code in order if code in per_language})


@lru_cache(maxsize=1)
def _installed() -> Lexicon:
    per_language = {COMMON: _read(rules_dir() / COMMON / LEXICON_FILE)}
    for lang in languages():
        per_language[lang.code] = _read(lang.lexicon_path)
    return merged(per_language)


_IN_USE: ContextVar[Lexicon | None] = ContextVar("context_editor_lexicon", default=None)


def alternation(words: Iterable[str], whole_words: bool = False) -> str:
    """A regex alternation of lexicon words, longest first (where two would match, the longer
    wins), in a fixed order: `(?:a|b)`, or `\\b(?:a|b)\\b` with `whole_words`; with no words, one
    that matches nothing."""
    body = "|".join(re.escape(w) for w in sorted(set(words), key=lambda w: (-len(w), w))) or "(?!)"
    return rf"\b(?:{body})\b" if whole_words else f"(?:{body})"


def lexicon() -> Lexicon:
    """The union of `rules/common/lexicon.yaml` and every registered language's lexicon, or the
    one a stored domain version carries while `using` it."""
    return _IN_USE.get() or _installed()


class using:  # noqa: N801 (used as a function: `with using(lex):`)
    """Make `lexicon()` return `lex` in this context (None: the installed one). A class rather than a
    generator-based context manager: every ingested message enters it, and the generator's set-up
    cost more than what it does."""

    __slots__ = ("lex", "token")

    def __init__(self, lex: Lexicon | None):
        self.lex = lex

    def __enter__(self) -> None:
        self.token = _IN_USE.set(self.lex)

    def __exit__(self, *exc: object) -> None:
        _IN_USE.reset(self.token)


def lexicon_fingerprint() -> str:
    """SHA-256 of every loaded lexicon, for the domain version hash (lexicons change results)."""
    blob = json.dumps(lexicon().per_language, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def reset() -> None:
    """Forget the cached lexicon (after registering a language in a running process)."""
    _installed.cache_clear()
