"""Trace distillation: a summarizer's line is used only if the rules accept it.

The articles' checks: short (at most `MAX_CHARS` characters), every number and identifier of
the source kept, no hedging words (`memory: hedges:` in `rules/<lang>/lexicon.yaml`). A line
that fails any check is replaced by the extractive line (the source's sentence that keeps the
most of its numbers and identifiers without hedging), and the reason is returned."""

from __future__ import annotations

import re
from typing import Any

from ..lang.lexicon import lexicon
from ..memory.summary import extractive_line, sentences
from .protocols import Summarizer

MAX_CHARS = 30  # the articles' limit for a distilled line (CJK characters or Latin letters alike)
_KEY = re.compile(r"(?<![A-Za-z0-9-])[A-Z]{1,6}-?\d[A-Za-z0-9-]*|\d+(?:[.,:]\d+)*")


def key_terms(text: str) -> list[str]:
    """Numbers and identifiers: what a distilled line must keep verbatim."""
    return list(dict.fromkeys(_KEY.findall(text)))


def hedges_in(line: str) -> list[str]:
    lowered = line.lower()
    return [h for h in lexicon().words("memory/hedges") if h.lower() in lowered]


def extractive(text: str, ctx: dict[str, Any] | None = None) -> str:
    """The fallback line, copied from `text`: the sentence holding the most of its numbers and
    identifiers, a sentence without hedging before one with it, the earlier on a tie (no key
    term anywhere: the extractive summarizer's line)."""
    keys = key_terms(text)
    pieces = sentences(text)
    if not keys or not pieces:
        return extractive_line(text, ctx or {})
    return max(pieces, key=lambda p: (sum(k in p for k in keys), not hedges_in(p), -pieces.index(p)))


def check_line(line: str, source: str, max_chars: int = MAX_CHARS) -> str | None:
    """None when `line` is an acceptable distillation of `source`, else why not."""
    if not line.strip():
        return "empty"
    if len(line) > max_chars:
        return f"longer than {max_chars} characters"
    missing = [k for k in key_terms(source) if k not in line]
    if missing:
        return f"drops {', '.join(missing)}"
    hedges = hedges_in(line)
    if hedges:
        return f"hedges ({', '.join(hedges)})"
    return None


def distil(text: str, summarizer: Summarizer | None, ctx: dict[str, Any] | None = None,
           max_chars: int = MAX_CHARS) -> tuple[str, str | None]:
    """(line, why the summarizer's line was refused or None). No summarizer, a failing one or a
    refused line all give the extractive line."""
    if summarizer is None:
        return extractive(text, ctx), None
    try:
        line = summarizer(text, ctx or {}).strip()
    except Exception as exc:  # a model endpoint can fail in any way; the rules never do
        return extractive(text, ctx), f"summarizer failed: {exc}"
    problem = check_line(line, text, max_chars)
    return (line, None) if problem is None else (extractive(text, ctx), problem)
