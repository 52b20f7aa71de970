"""Catastrophic backtracking caught at load time, not on a user's message in production.

Python's `re` backtracks: `(a+)+$` on thirty a's and a '!' runs for minutes and cannot be
interrupted from its own thread. A domain's own rules (local packs, inline rules) are timed on
adversarial samples — long runs of each literal character of the pattern, of digits, letters,
spaces and CJK, each ending in a character that breaks the match — in a child process that is
killed after a deadline. The child names each rule before it tries it, so the rule that hung is
known. Bundled packs are not checked here: the test suite runs every one of them.

`superlinear_problem` is the second check, for polynomial rather than exponential cost: an
unanchored value-before-cue alternative or an unbounded quantifier rescans the rest of a long
run from every position, so time grows with the square of the message. Each rule is timed on
runs of adversarial units at 2 KB and 8 KB; linear time grows 4x. It takes seconds for a whole
library, so it runs on request (`context-editor lint --timing`) and in the suite for every pack.
"""

from __future__ import annotations

import multiprocessing as mp
import re
import time
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


ADVERSARIAL_UNITS = ("a", " ", "1", "三", "!,.", "a ", "1 ", "三元", "ab1-")
COST_SIZES = (2_000, 8_000)
MAX_GROWTH = 8.0  # time(8 KB) / time(2 KB): 4 for linear, 16 for quadratic; room for a shared machine's noise
MAX_MS_PER_KB = 10.0


@lru_cache(maxsize=1024)
def _scan_ms(pattern: re.Pattern[str], text: str) -> float:
    best = float("inf")
    for _ in range(3):  # the best of three: a shared machine only ever adds time
        start = time.perf_counter()
        for _m in pattern.finditer(text):
            pass
        best = min(best, (time.perf_counter() - start) * 1000)
    return best


def superlinear_problem(rule_id: str, pattern: re.Pattern[str]) -> str | None:
    """Why a rule's pattern is not linear-time on adversarial text, or None."""
    small, large = COST_SIZES
    for unit in ADVERSARIAL_UNITS:
        t_small = _scan_ms(pattern, (unit * small)[:small])
        t_large = _scan_ms(pattern, (unit * large)[:large])
        if t_large > MAX_MS_PER_KB * large / 1000 or (t_large > 10.0 and t_large > MAX_GROWTH * t_small):
            return (f"rule '{rule_id}' takes {t_large:.0f} ms on {large // 1000} KB of {unit!r} repeated "
                    f"({t_small:.1f} ms on {small // 1000} KB): it backtracks, so one long message can stall extraction")
    return None
