"""Adversarial extraction timing: the cost of one hostile message, per domain.

    python benchmarks/adversarial_timing.py            # table + benchmarks/out/adversarial_timing.json

Runs of `a`, spaces, digits, a Chinese numeral, punctuation (and mixed runs that defeat
single-character shortcuts: "a ", "1 ", "三元") at 1, 16 and 64 KB are sent as one user message
through each bundled domain's Extractor (the whole extraction: rules, enums, negation,
confirmation), plus 256 KB and 1 MB to show the cost stays flat beyond. Each cell is the
best wall-clock time of 5 runs (other processes on a shared machine only ever add time) and the
median CPU time of the process (`time.process_time`), milliseconds. The target is ≤ 50 ms at
64 KB and linear growth; the exit status is 1 if the worst 64 KB wall time is above 50 ms.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from context_editor import load_domain  # noqa: E402
from context_editor.extract import Extractor  # noqa: E402
from context_editor.model import Message  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "adversarial_timing.json"
RUNS = {"a": "a", "space": " ", "digit": "1", "cjk numeral": "三", "punctuation": "!,.;？。", "a-space": "a ",
        "digit-space": "1 ", "cjk-money": "三元"}
SIZES_KB = (1, 16, 64, 256, 1024)
TARGET_KB = 64
DOMAINS = ("ecommerce", "travel", "finance")
NOW = datetime(2024, 5, 1, tzinfo=timezone.utc)
LIMIT_MS = 50.0


def time_one(extractor: Extractor, text: str, repeats: int = 5) -> dict[str, float]:
    """{"wall": best wall-clock ms, "cpu": median process CPU ms} of extracting `text`."""
    msg = Message(session="t", index=0, round=1, role="user", content=text, timestamp=NOW.isoformat())
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        extractor.extract(msg, NOW)
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    return {"wall": round(min(wall), 2), "cpu": round(statistics.median(cpu), 2)}


def measure(domains: tuple[str, ...] = DOMAINS, sizes_kb: tuple[int, ...] = SIZES_KB,
            repeats: int = 5) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    table: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for name in domains:
        extractor = Extractor(load_domain(name))
        time_one(extractor, "warm up 预算2000", 1)
        table[name] = {run: {f"{kb}KB": time_one(extractor, (unit * (kb * 1024))[: kb * 1024], repeats)
                             for kb in sizes_kb} for run, unit in RUNS.items()}
    return table


def main() -> int:
    table = measure()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(table, indent=2), "utf-8")
    print("ms, wall (best of 5) / CPU (median)")
    print("| domain | run | " + " | ".join(f"{kb} KB" for kb in SIZES_KB) + " |")
    print("|---|---|" + "---|" * len(SIZES_KB))
    for name, runs in table.items():
        for run, cells in runs.items():
            print(f"| {name} | {run} | " + " | ".join(f"{cells[f'{kb}KB']['wall']:.1f} / {cells[f'{kb}KB']['cpu']:.1f}"
                                                       for kb in SIZES_KB) + " |")
    at = [cells[f"{TARGET_KB}KB"] for runs in table.values() for cells in runs.values()]
    worst_wall, worst_cpu = max(c["wall"] for c in at), max(c["cpu"] for c in at)
    print(f"worst at {TARGET_KB} KB: {worst_wall:.1f} ms wall, {worst_cpu:.1f} ms CPU (target ≤ {LIMIT_MS:.0f} ms)")
    return 0 if worst_wall <= LIMIT_MS else 1


if __name__ == "__main__":
    sys.exit(main())
