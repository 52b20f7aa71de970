"""Why a message is (or is not) in a rendered context: the answer `context-editor why m12 --action A`
gives for a retrieved turn or a summary line, as `why FIELD` does for a value.

- where it is shown: a recent or history turn (a retrieved one says so), a summary line (`src`
  names it), or dropped by the budget (`<truncated_context lines=…>` names it);
- for search: the query, the terms of the message it matched, its score and rank, and the rounds
  that were searched (the ones before the loaded window).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, Callable

from ..inject import pii
from ..inject.compact import shown_lines
from ..inject.history import terms
from ..model import Message
from .retrieval import RETRIEVE_K

REF = re.compile(r"m?(\d+)")
TEXT_CHARS = 300  # of the message's text shown in an explanation


def message_index(ref: str | int) -> int | None:
    """`m12`, `12` or 12 -> 12; None for anything else."""
    if isinstance(ref, int):
        return ref if ref >= 0 else None
    found = REF.fullmatch(ref.strip())
    return int(found.group(1)) if found else None


def masked(text: str) -> str:
    """A message's text as an explanation shows it: personal data masked (as every context masks
    it for an action that does not show that value), cut to TEXT_CHARS."""
    text = pii.mask(text, set())
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + "…"


def where_shown(xml: str, msg: Message, retrieved: list[int],
                role_of: Callable[[int], str | None] | None = None) -> dict[str, Any]:
    """Where a rendered context shows `msg`: {"as": section, "reason": …}; "as" is None when it is
    not there at all. `role_of`: the session's message roles by index, which name the lines of a
    minimal context that leave their number out (`compact.implied`)."""
    root = ET.fromstring(xml)
    ref = f"m{msg.index}"
    if msg.index in retrieved:
        return {"as": "history", "reason": "retrieved"}
    for section in ("recent_turns", "history"):
        for turn in root.findall(f"{section}/turn"):
            if turn.get("round") == str(msg.round) and turn.get("role") == msg.role:
                return {"as": section, "reason": turn.get("reason")}
    for line in shown_lines(root, role_of):  # a minimal context: turns and summary lines, one list, between its elements
        if ref in line["src"].split():
            return {"as": "turns", "reason": line.get("reason"), "line": line["text"]}
    for group in root.findall("summary/*"):
        for line in shown_lines(group):
            if ref in line["src"].split():
                return {"as": f"summary {group.tag} {group.get('rounds')}", "reason": line.get("reason"),
                        "line": line["text"]}
    cut = root.find("truncated_context")
    if cut is not None and ref in cut.get("lines", "").split():
        return {"as": None, "reason": "budget", "note": "its summary line was dropped by the budget and is named in "
                                                         "<truncated_context lines=…>"}
    return {"as": None, "reason": None, "note": "not in this context (outside the loaded window, not matched by "
                                                "search, absorbed by the state, or dropped by the budget)"}


def explain_hit(query: list[str], hits: list[tuple[Message, float]], msg: Message, window_from: int) -> dict[str, Any]:
    """What search made of `msg` for this render: the query, the message's terms it matched, and
    its rank and score among the hits (BM25 or ts_rank of the store: a score only orders one list)."""
    own = set(terms(msg.content))
    out: dict[str, Any] = {"query": query, "matched_terms": [t for t in query if t in own],
                           "searched_rounds": [1, window_from - 1] if window_from > 1 else None}
    rank = next((i for i, (m, _) in enumerate(hits) if m.index == msg.index), None)
    if rank is not None:
        out.update(rank=rank + 1, of=len(hits), score=round(hits[rank][1], 6))
    elif window_from <= 1 or msg.round >= window_from:
        out["note"] = "in the loaded window: search only looks before it"
    elif not out["matched_terms"]:
        out["note"] = "shares no term with the query"
    else:
        out["note"] = f"matched, but not among the best {RETRIEVE_K} hits"
    return out
