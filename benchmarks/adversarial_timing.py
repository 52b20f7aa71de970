"""Adversarial extraction timing: the cost of one hostile message, per domain.

    python benchmarks/adversarial_timing.py            # table + benchmarks/out/adversarial_timing.json

Runs of `a`, spaces, digits, a Chinese numeral, punctuation (and mixed runs that defeat
single-character shortcuts: "a ", "1 ", "三元") at 1, 16 and 64 KB are sent as one user message
through each bundled domain's Extractor (the whole extraction: rules, enums, negation,
confirmation). Median of 3 runs, milliseconds. The target is ≤ 50 ms at 64 KB and linear growth;
the exit status is 1 if the worst 64 KB time is above 50 ms.
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
SIZES_KB = (1, 16, 64)
DOMAINS = ("ecommerce", "travel", "finance")
NOW = datetime(2024, 5, 1, tzinfo=timezone.utc)
LIMIT_MS = 50.0


def time_one(extractor: Extractor, text: str, repeats: int = 3) -> float:
    msg = Message(session="t", index=0, round=1, role="user", content=text, timestamp=NOW.isoformat())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        extractor.extract(msg, NOW)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(domains: tuple[str, ...] = DOMAINS, sizes_kb: tuple[int, ...] = SIZES_KB, repeats: int = 3) -> dict[str, dict[str, dict[str, float]]]:
    table: dict[str, dict[str, dict[str, float]]] = {}
    for name in domains:
        extractor = Extractor(load_domain(name))
        time_one(extractor, "warm up 预算2000", 1)
        table[name] = {run: {f"{kb}KB": round(time_one(extractor, (unit * (kb * 1024))[: kb * 1024], repeats), 2)
                             for kb in sizes_kb} for run, unit in RUNS.items()}
    return table


def main() -> int:
    table = measure()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(table, indent=2), "utf-8")
    print("| domain | run | " + " | ".join(f"{kb} KB ms" for kb in SIZES_KB) + " |")
    print("|---|---|" + "---|" * len(SIZES_KB))
    for name, runs in table.items():
        for run, cells in runs.items():
            print(f"| {name} | {run} | " + " | ".join(f"{cells[f'{kb}KB']:.1f}" for kb in SIZES_KB) + " |")
    worst = max(cells[f"{SIZES_KB[-1]}KB"] for runs in table.values() for cells in runs.values())
    print(f"worst at {SIZES_KB[-1]} KB: {worst:.1f} ms (target ≤ {LIMIT_MS:.0f} ms; machine shared)")
    return 0 if worst <= LIMIT_MS else 1


if __name__ == "__main__":
    sys.exit(main())
