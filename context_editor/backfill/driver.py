"""The driver: split the selected sessions into key ranges, run them on an engine, write the outputs.

`--out DIR` holds the whole run, so a rerun with the same DIR goes on where the last one stopped:
- `job.json`: what is being done (a DIR of another job is refused);
- `plan.jsonl`: the batches, key ranges in session order, written once while paging through the
  store's keys (only the keys of one page are ever held, so the driver's memory stays flat);
- `batches/NNNNNNN.jsonl`: each finished batch's records, written whole (temp file + rename):
  a batch with a file is never run again;
- the outputs, rebuilt from the batch files in plan order (session order) at the end of each run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..errors import Errors
from ..store import Store
from .engines import Engine
from .jobs import Batch, Job

LAST_KEY = "\U0010ffff"  # above every character a session id may hold


def selection_range(select: str | None, tenant: str | None) -> tuple[str | None, str | None]:
    """The key range (after, upto] that holds every selected session: a tenant's sessions are
    keyed `tenant/…`; a glob's literal start is a prefix (the glob itself is checked per session)."""
    prefix = f"{tenant}/" if tenant is not None else ""
    if select:
        literal = next((i for i, ch in enumerate(select) if ch in "*?["), len(select))
        prefix = select[:literal] if len(select[:literal]) > len(prefix) else prefix
    if not prefix:
        return None, None
    return (prefix[:-1] + chr(ord(prefix[-1]) - 1) + LAST_KEY if prefix[-1] > "\0" else None), prefix + LAST_KEY


@dataclass
class Progress:
    """A progress line with rate and ETA on stderr: redrawn in place on a terminal, else a line
    every 10 % or 30 s."""

    total: int
    out: TextIO = field(default_factory=lambda: sys.stderr)
    done: int = 0
    started: float = field(default_factory=time.monotonic)
    _shown: float = 0.0
    _step: int = -1

    def add(self, n: int, what: str) -> None:
        self.done += n
        elapsed = time.monotonic() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = (self.total - self.done) / rate if rate > 0 else 0.0
        share = self.done / self.total if self.total else 1.0
        bar = "#" * int(share * 30)
        line = (f"[{bar:<30}] {self.done:,}/{self.total:,} {what} ({share:.0%}) {rate:,.1f}/s "
                f"ETA {int(left) // 60}m{int(left) % 60:02d}s")
        tty = self.out.isatty()
        if tty:
            self.out.write("\r" + line + ("\n" if self.done >= self.total else ""))
        elif int(share * 10) != self._step or time.monotonic() - self._shown > 30 or self.done >= self.total:
            self._step, self._shown = int(share * 10), time.monotonic()
            self.out.write(line + "\n")
        self.out.flush()


class OutDir:
    """The files of one run in DIR (see the module's docstring)."""

    def __init__(self, path: Path, job: Job):
        self.path, self.job = path, job
        self.batches = path / "batches"
        marker = path / "job.json"
        if marker.exists():
            if json.loads(marker.read_text("utf-8")) != json.loads(job.key()):
                raise Errors.OUT_OF_ANOTHER_JOB(out=str(path))
        else:
            if path.exists() and any(path.iterdir()):
                raise Errors.OUT_OF_ANOTHER_JOB(out=str(path))
            self.batches.mkdir(parents=True, exist_ok=True)
            _write_whole(marker, job.key() + "\n")
        self.batches.mkdir(exist_ok=True)

    def plan(self, store: Store, after: str | None, upto: str | None, size: int) -> tuple[int, int]:
        """Write the plan once (key ranges of `size` sessions from the store); (batches, sessions) in it."""

        def ranges() -> Iterator[tuple[Batch, int]]:
            lo, n = after, 0
            while True:
                page = store.session_keys(lo, upto, size)
                last = len(page) < size
                # The last range is open to `upto`: `audit verify` also checks ids that have rows but no sessions row.
                hi = upto if last else page[-1]
                yield Batch(n, lo, hi), len(page)
                lo, n = hi, n + 1
                if last:
                    return

        return self.plan_batches(ranges())

    def plan_batches(self, batches: Iterator[tuple[Batch, int]]) -> tuple[int, int]:
        """Write the plan once from (batch, sessions in it) in session order; (batches, sessions) in it."""
        plan = self.path / "plan.jsonl"
        if not plan.exists():
            tmp = plan.with_suffix(".tmp")
            n = sessions = 0
            with tmp.open("w", encoding="utf-8") as f:
                for batch, count in batches:
                    f.write(json.dumps({"batch": batch.index, "after": batch.after, "upto": batch.upto,
                                        "only": batch.only, "sessions": count}, ensure_ascii=False) + "\n")
                    n, sessions = n + 1, sessions + count
                f.write(json.dumps({"batches": n, "sessions": sessions}) + "\n")
            os.replace(tmp, plan)
        with plan.open(encoding="utf-8") as f:
            for line in f:
                pass
        head = json.loads(line)
        return head["batches"], head["sessions"]

    def planned(self) -> Iterator[tuple[Batch, int]]:
        """The plan's batches in session order, each with how many sessions it holds (streamed)."""
        with (self.path / "plan.jsonl").open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                if "batch" in row:
                    only = tuple(row["only"]) if row["only"] is not None else None
                    yield Batch(row["batch"], row["after"], row["upto"], only), row["sessions"]

    def batch_file(self, batch: Batch) -> Path:
        return self.batches / f"{batch.index:07d}.jsonl"

    def write_batch(self, batch: Batch, records: list[dict[str, Any]]) -> None:
        _write_whole(self.batch_file(batch), "".join(_line(r) for r in records))

    def batch_records(self, batch: Batch) -> list[dict[str, Any]]:
        """The records of one finished batch (none if it is not finished)."""
        path = self.batch_file(batch)
        if not path.exists():
            return []
        with path.open(encoding="utf-8") as f:
            return [json.loads(line) for line in f]

    def records(self) -> Iterator[dict[str, Any]]:
        """Every record of every finished batch, in plan (session) order."""
        for batch, _ in self.planned():
            path = self.batch_file(batch)
            if path.exists():
                with path.open(encoding="utf-8") as f:
                    for line in f:
                        yield json.loads(line)


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"


def _write_whole(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@dataclass
class RunStats:
    batches: int
    sessions: int
    skipped_batches: int  # finished by an earlier run with this DIR
    failed_batches: list[tuple[Batch, str]]
    seconds: float
    workers: int


def run(job: Job, engine: Engine, out: OutDir, progress: TextIO | None = None, what: str = "sessions") -> RunStats:
    """Run every planned batch not finished yet, streaming the plan (the driver holds only the
    batches in flight); failed batches are kept for the report and run again by the next run."""
    batches = finished = done = sessions = 0
    for batch, count in out.planned():
        batches, sessions = batches + 1, sessions + count
        if out.batch_file(batch).exists():
            finished, done = finished + 1, done + count
    bar = Progress(sessions, progress, done) if progress is not None else None
    todo = (b for b, _ in out.planned() if not out.batch_file(b).exists())
    failed: list[tuple[Batch, str]] = []
    started = time.monotonic()
    for batch, records, error in engine.run(job, todo):
        if records is None:
            failed.append((batch, error or "unknown failure"))
            continue
        out.write_batch(batch, records)
        if bar is not None:
            bar.add(sum(1 for r in records if r["type"] in PER_SESSION), what)
    return RunStats(batches, sessions, finished, failed, time.monotonic() - started, engine.workers)


PER_SESSION = ("session", "failure", "skipped", "verify", "replay", "applied")  # one of these per session
