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

import importlib
import multiprocessing as mp
import re
import time
from multiprocessing.connection import Connection
from functools import lru_cache
from typing import Any

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


def required_literals(pattern: re.Pattern[str]) -> frozenset[str] | None:
    """Strings (case-folded) one of which every match of `pattern` contains, or None if the
    pattern has no such literal. The extractor skips a rule whose literals are all absent from a
    message: one substring search instead of a regex scan, so text that holds none of a rule's
    cues (a hostile run of letters or digits) costs that rule almost nothing."""
    return _required(pattern.pattern, pattern.flags)


@lru_cache(maxsize=4096)
def _required(source: str, flags: int) -> frozenset[str] | None:
    # The standard library's own regex parser (private modules, hence imported by name).
    C: Any = importlib.import_module("re._constants")
    parser: Any = importlib.import_module("re._parser")

    def req(items: Any) -> frozenset[str] | None:
        candidates: list[frozenset[str]] = []
        run: list[str] = []
        for op, av in items:
            if op is C.LITERAL:
                run.append(chr(av))
                continue
            if run:
                candidates.append(frozenset({"".join(run)}))
                run = []
            found: frozenset[str] | None = None
            if op is C.SUBPATTERN:
                found = req(av[3])
            elif op is C.ATOMIC_GROUP:
                found = req(av)
            elif op is C.BRANCH:
                parts = [req(branch) for branch in av[1]]
                found = None if any(p is None for p in parts) else frozenset().union(*(p for p in parts if p))
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
                found = req(av[2]) if av[0] >= 1 else None
            elif op is C.ASSERT:  # what a lookaround requires is in the text too
                found = req(av[1])
            elif op is C.IN and av and all(o is C.LITERAL for o, _ in av) and len(av) <= 8:
                found = frozenset(chr(a) for _, a in av)
            if found:
                candidates.append(found)
        if run:
            candidates.append(frozenset({"".join(run)}))
        return max(candidates, key=lambda c: (min(len(s) for s in c), -len(c)), default=None)

    found = req(parser.parse(source, flags))
    return frozenset(s.casefold() for s in found) if found else None


def literal_values(pattern: re.Pattern[str], groups: tuple[Any, ...]) -> frozenset[str]:
    """The fixed strings (case-folded) the value groups `groups` of `pattern` read where they are
    written as words, not shapes: a group that is a literal ("(?P<value2>免费)的景点") or a branch of
    literals ("(?P<value>pop|rock|jazz)"), and the literal branches of a group that mixes them with
    shapes ("\\d+元以上|免费"). What a rule can read as a value word for word, whatever its cue."""
    return _literal_values(pattern.pattern, pattern.flags, tuple(g for g in groups if isinstance(g, str)))


@lru_cache(maxsize=4096)
def _literal_values(source: str, flags: int, groups: tuple[str, ...]) -> frozenset[str]:
    C: Any = importlib.import_module("re._constants")
    parser: Any = importlib.import_module("re._parser")
    parsed = parser.parse(source, flags)
    wanted = {parsed.state.groupdict[g] for g in groups if g in parsed.state.groupdict}

    def literal(items: Any) -> str | None:
        """The one string `items` matches, or None when it matches a shape."""
        out = []
        for op, av in items:
            if op is C.LITERAL:
                out.append(chr(av))
            elif op is C.SUBPATTERN and (text := literal(av[3])) is not None:
                out.append(text)
            else:
                return None
        return "".join(out) or None

    def alternatives(items: Any) -> list[str]:
        items = list(items)
        branches = items[0][1][1] if len(items) == 1 and items[0][0] is C.BRANCH else [items]
        return [text for branch in branches if (text := literal(branch)) is not None]

    found: list[str] = []

    def walk(items: Any) -> None:
        for op, av in items:
            if op is C.SUBPATTERN:
                if av[0] in wanted:
                    found.extend(alternatives(av[3]))
                walk(av[3])
            elif op is C.BRANCH:
                for branch in av[1]:
                    walk(branch)
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
                walk(av[2])
            elif op in (C.ASSERT, C.ASSERT_NOT):
                walk(av[1])
            elif op is C.ATOMIC_GROUP:
                walk(av)

    walk(parsed)
    return frozenset(s.casefold() for s in found)
