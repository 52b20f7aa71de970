"""Backfill at scale: sessions/s with 1 and 2 Ray workers, the driver's memory as N grows, a
projection for 10 million sessions on 32 nodes, and the diff report of a real change on SGD.

    python benchmarks/backfill.py                      # N = 10,000 (writes benchmarks/out/backfill.json)
    python benchmarks/backfill.py --n 1000 --sizes 250 500 1000   # a quick run

1. A SQLite store of N sessions: SGD dev dialogues with a flight service (travel domain), the
   bundled domains' sample conversations (each under many session ids), and generated travel
   conversations (`context_editor.bench.sessions`) for the rest.
2. `backfill` with a changed travel domain (one synonym more, a stricter party size) on Ray with
   1 and 2 CPUs (a fresh Ray runtime each; its start is not timed) and on the local engine:
   sessions/s and the speed-up.
3. The driver's peak RSS for growing N, each in a fresh process (Ray engine, 2 workers): the
   driver keeps only the batches in flight, so it must stay flat.
4. The diff report of a real change: one synonym added to travel.yaml, over 1,000 SGD dev
   dialogues of travel-like services (flights, buses, hotels, rental cars, travel).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from context_editor.backfill import driver, report  # noqa: E402
from context_editor.backfill.engines import LocalEngine, RayEngine  # noqa: E402
from context_editor.backfill.jobs import Job  # noqa: E402
from context_editor.bench.sessions import (fill, sample_conversations, sgd_travel_conversations,  # noqa: E402
                                           travel_conversations)
from context_editor.domain import load_domain  # noqa: E402
from context_editor.store import open_store  # noqa: E402

SGD_DEV = ROOT.parent / "shared" / "data" / "sgd" / "dev"
TRAVEL = ROOT / "domains" / "travel.yaml"
# The real change shown in the README: one synonym ("reserve" means book), nothing else.
SYNONYM = [("book: [订票, 订机票, 帮我订, 预订, 下单, book it, book the flight, go ahead and book]",
            "book: [订票, 订机票, 帮我订, 预订, 下单, book it, book the flight, go ahead and book, reserve]")]
# The change measured for speed: that synonym and a stricter validation (every session is re-run either way).
CHANGE = [*SYNONYM, ("constraints: {gt: 0, le: 50}", "constraints: {gt: 0, le: 6}")]


def changed_domain(out: Path, edits: list[tuple[str, str]], version: int) -> Path:
    text = TRAVEL.read_text("utf-8").replace("version: 1", f"version: {version}", 1)
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    out.write_text(text, "utf-8")
    return out


def build_store(path: Path, n: int) -> dict[str, int]:
    """N sessions: SGD flight dialogues, the bundled samples (cloned), generated travel conversations."""
    sgd = list(sgd_travel_conversations(SGD_DEV, services=("Flights",))) if SGD_DEV.is_dir() else []
    samples = []
    for k in range(max(n // 20, 1)):  # 5 % bundled samples, every domain
        samples += [(d, f"{s}-{k:05d}", m) for d, s, m in sample_conversations()]
    sgd, samples = sgd[: n // 2], samples[: n // 20]
    generated = list(travel_conversations(n - len(sgd) - len(samples), seed=1))
    fill(f"sqlite:///{path}", [*sgd, *samples, *generated])
    return {"sgd_flights": len(sgd), "bundled_samples": len(samples), "generated_travel": len(generated)}


def timed_backfill(store_url: str, domain_path: Path, engine_name: str, workers: int, out: Path,
                   upto: str | None = None) -> dict[str, float]:
    domain = load_domain(domain_path)
    engine = LocalEngine() if engine_name == "local" else RayEngine(None, workers)
    try:
        job = Job("backfill", store_url, domain.source)
        od = driver.OutDir(out, job)
        od.plan(open_store(store_url), None, upto, 200)
        stats = driver.run(job, engine, od, None)
        summary = report.write_backfill(od, "bench", stats)
    finally:
        engine.close()
    return {"sessions": stats.sessions, "seconds": stats.seconds, "sessions_per_s": stats.sessions / stats.seconds,
            "changed": summary.changed, "failures": summary.failures}


def child(args: argparse.Namespace) -> None:
    """One measured run in a fresh process: the driver's peak RSS besides the timing."""
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    keys = open_store(args.store).session_keys(limit=args.limit)
    result = timed_backfill(args.store, Path(args.domain), args.engine, args.workers, Path(args.out), keys[-1])
    del keys
    result["driver_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["rss_before_mb"] = base / 1024
    print(json.dumps(result))


def run_child(store: str, domain: Path, engine: str, workers: int, limit: int, out: Path) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", "--store", store, "--domain", str(domain), "--engine", engine,
           "--workers", str(workers), "--limit", str(limit), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--sizes", type=int, nargs="+", default=[2_500, 5_000, 10_000])
    p.add_argument("--sgd-sessions", type=int, default=1_000)
    p.add_argument("--results", default=str(ROOT / "benchmarks" / "out" / "backfill.json"))
    p.add_argument("--work", help="keep the store and outputs here (default: a temp dir)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for name in ("store", "domain", "engine", "out"):
        p.add_argument(f"--{name}", help=argparse.SUPPRESS)
    p.add_argument("--workers", type=int, default=2, help=argparse.SUPPRESS)
    p.add_argument("--limit", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="backfill-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, object] = {"machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}",
                                  "load_before": os.getloadavg(), "n": args.n}
    store_path = work / "sessions.db"
    if not store_path.exists():
        t = time.monotonic()
        results["store"] = build_store(store_path, args.n)
        results["store_build_s"] = round(time.monotonic() - t, 1)
    url = f"sqlite:///{store_path}"
    changed = changed_domain(work / "travel_changed.yaml", CHANGE, 2)
    runs = {}
    for engine, workers in (("local", 1), ("ray", 1), ("ray", 2)):
        out = work / f"out-{engine}-{workers}"
        shutil.rmtree(out, ignore_errors=True)
        runs[f"{engine}-{workers}"] = run_child(url, changed, engine, workers, args.n, out)
        print(f"{engine} x{workers}: {runs[f'{engine}-{workers}']}", flush=True)
    results["runs"] = runs
    results["speedup_2_over_1"] = runs["ray-2"]["sessions_per_s"] / runs["ray-1"]["sessions_per_s"]
    memory = {}
    for size in args.sizes:
        out = work / f"out-mem-{size}"
        shutil.rmtree(out, ignore_errors=True)
        memory[size] = run_child(url, changed, "ray", 2, size, out)
        print(f"N={size}: {memory[size]}", flush=True)
    results["driver_memory"] = memory
    # The projection: the measured cost per message on one core, for 10M sessions of 30 messages.
    messages = sessions = 0
    for batch in sorted((work / "out-ray-1" / "batches").iterdir()):
        for line in batch.open(encoding="utf-8"):
            r = json.loads(line)
            if r["type"] == "session":
                sessions, messages = sessions + 1, messages + r["messages"]
    per_message = 1 / (runs["ray-1"]["sessions_per_s"] * messages / sessions)
    efficiency = float(results["speedup_2_over_1"]) / 2  # type: ignore[arg-type]
    cores = 32 * 16
    results["projection_10M_32_nodes"] = {
        "messages_per_session_here": messages / sessions, "seconds_per_message_one_core": per_message,
        "assumptions": "10M sessions of 30 messages; 32 nodes x 16 cores, one Ray worker per core; the cost per "
                       "message measured here with one worker, as it was (shared machine); parallel efficiency as "
                       "measured from 1 to 2 workers here, held for 512 workers; the shared PostgreSQL store serves "
                       "the batch reads (3 queries per 200 sessions: 150k queries) without being the bottleneck; "
                       "the driver only pages keys and writes outputs.",
        "one_core_hours": 10_000_000 * 30 * per_message / 3600,
        "hours": 10_000_000 * 30 * per_message / (cores * efficiency) / 3600,
        "hours_at_full_efficiency": 10_000_000 * 30 * per_message / cores / 3600,
    }
    # The real change: one synonym, 1,000 SGD dev dialogues of travel-like services.
    sgd_store = work / "sgd.db"
    if not sgd_store.exists():
        fill(f"sqlite:///{sgd_store}", sgd_travel_conversations(SGD_DEV, args.sgd_sessions))
    synonym = changed_domain(work / "travel_synonym.yaml", SYNONYM, 2)
    out = work / "out-sgd"
    shutil.rmtree(out, ignore_errors=True)
    results["sgd_synonym"] = timed_backfill(f"sqlite:///{sgd_store}", synonym, "local", 1, out)
    results["sgd_report"] = (out / "report.md").read_text("utf-8")
    results["load_after"] = os.getloadavg()
    Path(args.results).parent.mkdir(parents=True, exist_ok=True)
    Path(args.results).write_text(json.dumps(results, ensure_ascii=False, indent=2) + "\n", "utf-8")
    print(json.dumps({k: v for k, v in results.items() if k != "sgd_report"}, indent=2))
    print(results["sgd_report"])


if __name__ == "__main__":
    main()
