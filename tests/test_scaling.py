"""Work per message does not grow with the session (the O(1)-per-message claim), measured as
executed Python lines, which a busy machine cannot disturb (timings are in benchmarks/).

One session of the bundled travel domain takes a long conversation built from a 10-round pool
of real-sounding talk (tests/long_conversation.py). The lines executed while ingesting one pool
cycle early in the session and the very same cycle 56 cycles later are counted; their ratio is
1.0 for constant work and would pass 1.5 for anything that rescans the history as it grows.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from long_conversation import OPENING, POOL, long_travel_conversation

from context_editor import ContextEditor

CYCLE = sum(1 for role, _ in POOL if role == "user")  # user rounds per pool cycle
FIRST = sum(1 for role, _ in OPENING if role == "user")  # rounds before the pool starts
EARLY = range(FIRST + 1, FIRST + 1 + 2 * CYCLE)
LATE = range(FIRST + 1 + 56 * CYCLE, FIRST + 1 + 58 * CYCLE)


class LineCounter:
    """Counts every line the interpreter executes while active (sys.settrace)."""

    def __init__(self) -> None:
        self.lines = 0

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.lines += 1
        return self._trace

    def __enter__(self) -> LineCounter:
        sys.settrace(self._trace)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(None)


def test_ingest_work_per_message_stays_flat():
    editor = ContextEditor("travel", "memory://")
    messages = long_travel_conversation(LATE.stop - 1)
    work = {"early": 0, "late": 0}
    rnd = 0
    for m in messages:
        rnd += m["role"] == "user"
        window = "early" if rnd in EARLY else "late" if rnd in LATE else None
        if window is None:
            editor.add("s", m)
            continue
        with LineCounter() as counter:
            editor.add("s", m)
        work[window] += counter.lines
    assert editor.state("s").round == LATE.stop - 1
    assert work["early"] > 0
    ratio = work["late"] / work["early"]
    assert ratio < 1.5, f"ingest work per message grew {ratio:.2f}x between rounds {EARLY} and {LATE}: {work}"
