"""Echo guard: our own context coming back as input must not feed the state.

An agent may paste the injected context into its reply, a tool may return it, a user may quote
it. Such text is not a new source for any value: the blocks are masked (replaced by spaces, so
character spans of everything else stay exact) before extraction, and a whole `<context>` block
nested in a message raises CONTEXT_LOOP_DETECTED. The raw message itself is stored unchanged.
"""

from __future__ import annotations

import re

CONTEXT_LOOP_DETECTED = "CONTEXT_LOOP_DETECTED"

_CONTEXT_BLOCK = re.compile(r"<context\b[^>]*>.*?(?:</context\s*>|\Z)", re.S | re.I)
_FRAGMENTS = re.compile(
    r"<state\b[^>]*>.*?(?:</state\s*>|\Z)"  # a state block without its context
    r"|<field\s+name=\"[^\"]*\"[^>]*>[^<]*</field\s*>"  # a single rendered field
    r"|<truncated_context\b[^>]*/>",
    re.S | re.I)


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    chars = list(text)
    for start, end in spans:
        for i in range(start, end):
            if chars[i] not in "\n":
                chars[i] = " "
    return "".join(chars)


def mask_echoes(text: str) -> tuple[str, bool]:
    """(text with echoed context masked, whether a whole context block was nested in it)."""
    if "<" not in text:
        return text, False
    blocks = [m.span() for m in _CONTEXT_BLOCK.finditer(text)]
    spans = blocks + [m.span() for m in _FRAGMENTS.finditer(text)]
    return (_blank(text, spans) if spans else text), bool(blocks)
