"""Catastrophic backtracking caught at load time, not on a user's message in production.

Python's `re` backtracks: `(a+)+$` on thirty a's and a '!' runs for minutes and cannot be
interrupted from its own thread. A domain's own rules (local packs, inline rules) are timed on
adversarial samples — long runs of each literal character of the pattern, of digits, letters,
spaces and CJK, each ending in a character that breaks the match — in a child process that is
killed after a deadline. The child names each rule before it tries it, so the rule that hung is
known. Bundled packs are not checked here: the test suite runs every one of them.
"""

from __future__ import annotations

import multiprocessing as mp
import re
from multiprocessing.connection import Connection
from functools import lru_cache

SAMPLE_LENGTH = 28  # enough for exponential blow-up to take seconds, short enough to be instant otherwise
DEADLINE_SECONDS = 2.0
_BASIC = "1a 中."


def samples(pattern: str) -> list[str]:
    """Inputs that make a backtracking regex explode, if anything does."""
    chars = dict.fromkeys(ch for ch in pattern if ch.isalnum() or "\u4e00" <= ch <= "\u9fff")
    chars.update(dict.fromkeys(_BASIC))
    return [ch * SAMPLE_LENGTH + end for ch in chars for end in ("!", "\x00")]


def _worker(rules: list[tuple[str, str, int]], conn: Connection) -> None:  # pragma: no cover - runs in the child
    for rid, pattern, flags in rules:
        conn.send(rid)
        compiled = re.compile(pattern, flags)
        for text in samples(pattern):
            compiled.search(text)
    conn.send(None)


@lru_cache(maxsize=256)
def slow_rule(rules: tuple[tuple[str, str, int], ...], deadline: float = DEADLINE_SECONDS) -> str | None:
    """The id of the first rule that does not finish its samples within `deadline` seconds, else None."""
    if not rules:
        return None
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, args=(list(rules), child), daemon=True)
    proc.start()
    child.close()
    current: str | None = None
    try:
        while parent.poll(deadline):
            current = parent.recv()
            if current is None:
                return None
        return current or rules[0][0]
    except EOFError:  # the child died (out of memory, say): treat its last rule as the culprit
        return current or rules[0][0]
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        parent.close()
