"""A progress bar on stderr, so stdout stays clean for data and a long run shows it is alive.

On a terminal the bar redraws in place (at most ten times a second); into a file or a pipe
(`nohup … 2> log`) it writes one line per tenth of the work, which reads well in a log.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, label: str, total: int, unit: str = "it", stream: TextIO | None = None):
        self.label, self.total, self.unit = label, max(total, 1), unit
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.done = 0
        self.start = self._last = time.monotonic()
        self._next_decile = 1

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.tty and (now - self._last >= 0.1 or self.done >= self.total):
            self._last = now
            self.stream.write("\r" + self._line(now))
            self.stream.flush()
        elif not self.tty and self.done * 10 >= self._next_decile * self.total:
            self._next_decile = self.done * 10 // self.total + 1
            self.stream.write(self._line(now) + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r" + self._line(time.monotonic()) + "\n")
            self.stream.flush()

    def _line(self, now: float) -> str:
        frac = min(self.done / self.total, 1.0)
        elapsed = now - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        bar = "#" * int(frac * 30)
        return (f"{self.label} [{bar:<30}] {self.done}/{self.total} {frac:4.0%} "
                f"{rate:,.1f} {self.unit}/s elapsed {_clock(elapsed)} eta {_clock(eta)}")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}"
