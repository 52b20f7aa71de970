"""Tool results are data: JSON is walked by key, never regex-scanned as prose.

A field receives a value from a tool result when one of its `tool_keys` (default: its name)
appears as a key anywhere in the JSON. The provenance span points at that key in the raw text,
so `why` can show the exact place in the tool output.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from ..domain import Domain, FieldSpec


def parse_json(content: str) -> Any | None:
    """The JSON value of a tool message, or None when it is not JSON (then it is prose)."""
    s = content.strip()
    if not s or s[0] not in "[{":
        return None
    try:
        return json.loads(s)
    except ValueError:
        return None


def walk(data: Any, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair of nested JSON, depth-first, bounded so hostile nesting can't hurt."""
    if depth > 32:
        return
    if isinstance(data, dict):
        for k, v in data.items():
            yield str(k), v
            yield from walk(v, depth + 1)
    elif isinstance(data, list):
        for item in data[:1000]:
            yield from walk(item, depth + 1)


def key_index(domain: Domain) -> dict[str, FieldSpec]:
    """Lower-cased JSON key -> the tool-settable field it carries."""
    index: dict[str, FieldSpec] = {}
    for spec in domain.fields.values():
        if "tool" in spec.sources:
            for key in spec.tool_keys:
                index.setdefault(key.lower(), spec)
    return index
