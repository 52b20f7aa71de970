"""The bundled languages, registered as entry points in pyproject.toml like any other."""

from __future__ import annotations

from .lexicon import Language, builtin


def zh() -> Language:
    return builtin("zh")


def en() -> Language:
    return builtin("en")
