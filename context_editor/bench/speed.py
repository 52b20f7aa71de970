"""The scaling run: is the work per message independent of how long the session already is?

One session receives real utterances, cycled, for `rounds` user rounds (about twice as many
messages). Every ingest is timed; a round's per-message cost is the mean over its messages (a
user message costs ten times an assistant one, so the median of single messages would sit in
the gap between the two and jump with noise), and `scaling_ratio` is the median of that over
the last hundred rounds divided by the same over rounds 10-110. A flat editor scores about 1.0.

The cycled pool holds a number of rounds that divides the distance between the two windows, so
both windows ingest the very same utterances in the same order: the ratio then measures the
session's length, not a difference in what was said. Costs are the process's CPU time, not wall
time: on a shared machine other processes stretch wall time as they come and go (a wall-clock
run here once read 6.2 on SGD's events_1, while the Python lines executed for the same utterances
at rounds 10-60 and 2,000-2,050 stayed flat, 0.95; tests/test_scaling.py counts lines that way).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from ..domain import load_domain
from ..pipeline import ContextEditor
from .metrics import median
from .progress import Progress

EARLY = (10, 110)
MAX_POOL_ROUNDS = 1000


@dataclass
class ScalingResult:
    domain: str
    rounds: int
    pool_rounds: int  # user rounds in the cycled pool
    latencies: list[tuple[int, float]]  # (round, ms) per message

    @cached_property
    def per_round(self) -> dict[int, float]:
        """Round -> mean ms per message of that round."""
        sums: dict[int, list[float]] = {}
        for r, ms in self.latencies:
            sums.setdefault(r, []).append(ms)
        return {r: sum(v) / len(v) for r, v in sums.items()}

    def window(self, lo: int, hi: int) -> float:
        """Median per-message cost of rounds lo..hi."""
        return median([ms for r, ms in self.per_round.items() if lo <= r <= hi])

    def summary(self) -> dict[str, Any]:
        """The ratio, plus the early window's median in every cycle of the pool: the same
        utterances at growing session lengths, which tells a trend from machine noise."""
        early = self.window(*EARLY)
        late = self.window(self.rounds - 100, self.rounds)
        cycles = range(0, self.rounds - EARLY[1] + 1, self.pool_rounds)
        return {"domain": self.domain, "rounds": self.rounds, "messages": len(self.latencies),
                "pool_rounds": self.pool_rounds, "early_rounds": list(EARLY), "late_rounds": [self.rounds - 100, self.rounds],
                "early_ms_median": round(early, 4), "late_ms_median": round(late, 4),
                "same_window_each_cycle_ms": [round(self.window(EARLY[0] + c, EARLY[1] + c), 3) for c in cycles],
                "scaling_ratio": round(late / early, 3) if early else None}


def pool(utterances: list[tuple[str, str]], rounds: int) -> list[tuple[str, str]]:
    """The utterances to cycle: from the first user one, a whole number of user rounds that
    divides the distance between the early and the late window (the most such rounds, up to
    MAX_POOL_ROUNDS and what is available)."""
    start = next(i for i, (role, _) in enumerate(utterances) if role == "user")
    turns = utterances[start:]
    starts = [i for i, (role, _) in enumerate(turns) if role == "user"]
    distance = rounds - 100 - EARLY[0]
    fits = [p for p in range(1, min(len(starts), MAX_POOL_ROUNDS) + 1) if distance > 0 and distance % p == 0]
    size = max(fits, default=len(starts))
    return turns[: starts[size]] if size < len(starts) else turns


def scaling_run(domain_path: Path, utterances: list[tuple[str, str]], rounds: int, now: datetime) -> ScalingResult:
    """Feed `utterances` (role, text), cycled (see `pool`), until `rounds` user rounds."""
    domain = load_domain(domain_path)
    editor = ContextEditor(domain, "memory://")
    cycled = pool(utterances, rounds)
    stream = itertools.cycle(cycled)
    stamp = now.isoformat()
    latencies: list[tuple[int, float]] = []
    rnd = 0
    with Progress(f"scaling {domain.name}", rounds, "rounds") as bar:
        for role, text in stream:
            if role == "user":
                if rnd == rounds:
                    break
                rnd += 1
                bar.advance()
            t0 = time.process_time()
            editor.add("scaling", {"role": role, "content": text, "timestamp": stamp})
            latencies.append((rnd, (time.process_time() - t0) * 1000))
    return ScalingResult(domain.name, rounds, sum(role == "user" for role, _ in cycled), latencies)
