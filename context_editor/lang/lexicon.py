"""Lexicon loading: `rules/<lang>/lexicon.yaml` of every registered language, merged.

Finders scan text that mixes languages ("预算500 dollars"), so they read the union of all
registered lexicons: lists are concatenated (duplicates dropped, first seen first), mappings are
merged key by key. The merged lexicon is cached; `reset()` drops the cache after a language is
registered at run time.
"""

from __future__ import annotations

import hashlib
import json
import types
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import yaml

from .. import registry
from ..errors import ContextEditorError
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
    raise ContextEditorError(f"entry point for language '{code}' is not a Language", code="CE011",
                             fix="point it at a context_editor.lang.Language, or at a package holding lexicon.yaml")


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
        raise ContextEditorError(f"invalid lexicon: {exc}", file=str(path), line=mark.line + 1 if mark else None,
                                 code="CE112", fix="fix the YAML syntax of the lexicon") from None
    if not isinstance(data, dict):
        raise ContextEditorError("a lexicon must be a YAML mapping", file=str(path), line=1, code="CE112",
                                 fix="write keys such as `currency:`, `yes:`, `negation:` (see rules/en/lexicon.yaml)")
    bad = _not_words(data)
    if bad:
        raise ContextEditorError(f"lexicon entry {bad} is not a word (YAML reads bare yes/no/on/off as booleans)",
                                 file=str(path), code="CE112", fix="quote it: 'no'")
    return data


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


@lru_cache(maxsize=1)
def lexicon() -> Lexicon:
    """The union of `rules/common/lexicon.yaml` and every registered language's lexicon."""
    per_language = {COMMON: _read(rules_dir() / COMMON / LEXICON_FILE)}
    for lang in languages():
        per_language[lang.code] = _read(lang.lexicon_path)
    merged: dict[str, Any] = {}
    for data in per_language.values():
        _merge(merged, data)
    return Lexicon(merged, per_language)


def lexicon_fingerprint() -> str:
    """SHA-256 of every loaded lexicon, for the domain version hash (lexicons change results)."""
    blob = json.dumps(lexicon().per_language, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def reset() -> None:
    """Forget the cached lexicon (after registering a language in a running process)."""
    lexicon.cache_clear()
