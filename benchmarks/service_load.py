"""Load on the HTTP service: N concurrent clients × M messages each, on loopback, one store.

    python benchmarks/service_load.py                          # 32 clients × 200 messages, SQLite, 2 servers
    python benchmarks/service_load.py --pg                     # the same over a private PostgreSQL server
    python benchmarks/service_load.py --clients 4 --messages 10 --servers 1
    python benchmarks/service_load.py --readme                 # write the figures into README.md

Every client owns one session and, for each message, POSTs it (with an id) and then GETs the
context of an action, as an agent does before each model call. Consecutive requests of a
client go to different service processes (`--servers`), all over the same store, so every
read has to notice what another process appended; every 10th POST is sent twice, as a client
retrying after a timeout would, and must add nothing. Afterwards each session must hold exactly
M messages and `audit verify` must pass. Reports p50/p99 latency of ingest and context
requests and the error count; results go to benchmarks/out/service_load.json (exit 1 if any
check failed). Clients and servers share this machine's cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from a checkout: import the package from here
sys.path.insert(0, str(ROOT / "tests"))  # the service and PostgreSQL launchers the tests use

from concurrency import TURNS  # noqa: E402  (bilingual customer-service turns)

OUT = ROOT / "benchmarks" / "out"
README = ROOT / "README.md"
MARKERS = ("<!-- service-load:start -->\n", "<!-- service-load:end -->")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def load(bases: list[str], key: str, clients: int, messages: int, action: str = "place_order") -> dict[str, Any]:
    """Run the clients against the given service URLs; latencies in ms, errors as texts."""
    ingest: list[float] = []
    context: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    run = f"load-{int(time.time() * 1000)}"
    headers = {"Authorization": f"Bearer {key}"}

    def client(k: int) -> None:
        session = f"{run}-{k}"
        with httpx.Client(headers=headers, timeout=120) as http:
            for i in range(messages):
                base = bases[(k + i) % len(bases)]
                role, text = TURNS[i % len(TURNS)]
                body = {"domain": "ecommerce", "messages": [
                    {"id": f"{session}-{i}", "role": role, "content": text, "timestamp": "2024-05-01T10:00:00+08:00"}]}
                for attempt in range(2 if i % 10 == 9 else 1):  # every 10th request is retried
                    start = time.perf_counter()
                    r = http.post(f"{base}/v1/sessions/{session}/messages", json=body)
                    took = (time.perf_counter() - start) * 1000
                    with lock:
                        ingest.append(took)
                        if r.status_code != 200 or r.json()["added"] != (1 if attempt == 0 else 0):
                            errors.append(f"POST {r.status_code} {r.text[:200]}")
                start = time.perf_counter()
                r = http.get(f"{bases[(k + i + 1) % len(bases)]}/v1/sessions/{session}/context",
                             params={"action": action})
                took = (time.perf_counter() - start) * 1000
                with lock:
                    context.append(took)
                    if r.status_code != 200 or r.json()["tokens"] > r.json()["budget"]:
                        errors.append(f"GET {r.status_code} {r.text[:200]}")

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    with httpx.Client(headers=headers, timeout=600) as http:
        sessions = {s["session"]: s["messages"] for s in http.get(f"{bases[0]}/v1/sessions").json()["sessions"]
                    if s["session"].startswith(run)}
        verdict = http.post(f"{bases[0]}/v1/audit/verify").json()
    complete = len(sessions) == clients and all(n == messages for n in sessions.values())
    return {
        "clients": clients, "messages_per_client": messages, "servers": len(bases), "wall_s": round(wall, 1),
        "ingest_requests": len(ingest), "context_requests": len(context),
        "ingest_ms": {"p50": round(statistics.median(ingest), 1), "p99": round(percentile(ingest, 0.99), 1)},
        "context_ms": {"p50": round(statistics.median(context), 1), "p99": round(percentile(context, 0.99), 1)},
        "errors": len(errors), "first_errors": errors[:5], "sessions_complete": complete,
        "audit_verify_ok": bool(verdict["ok"]), "requests_per_s": round((len(ingest) + len(context)) / wall, 1),
    }


def warm_up(bases: list[str], key: str) -> None:
    """One ingest and one render per process first: loading the domain and the tokenizer is a
    start-up cost (about a second each), not a request latency."""
    for i, base in enumerate(bases):
        headers = {"Authorization": f"Bearer {key}"}
        httpx.post(f"{base}/v1/sessions/warm-up-{i}/messages", headers=headers, timeout=120,
                   json={"domain": "ecommerce", "messages": [{"role": "user", "content": "你好"}]}).raise_for_status()
        httpx.get(f"{base}/v1/sessions/warm-up-{i}/context", params={"action": "place_order"}, headers=headers,
                  timeout=120).raise_for_status()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--servers", type=int, default=2, help="service processes over the one store")
    parser.add_argument("--pg", action="store_true", help="a private PostgreSQL server (tests/pg_server.py) instead of SQLite")
    parser.add_argument("--out", type=Path, help="result JSON (default benchmarks/out/service_load[_pg].json)")
    parser.add_argument("--readme", action="store_true", help="only write the last results into README.md")
    args = parser.parse_args()
    if args.readme:
        return write_readme()
    args.out = args.out or OUT / f"service_load{'_pg' if args.pg else ''}.json"

    from service_server import create_key, running_service

    with ExitStack() as stack:
        if args.pg:
            import pg_server

            if reason := pg_server.unavailable_reason():
                print(reason, file=sys.stderr)
                return 1
            store = stack.enter_context(pg_server.postgres_url())
        else:
            store = f"sqlite:///{stack.enter_context(tempfile.TemporaryDirectory())}/load.db"
        key = create_key(store, "bench", "writer")
        bases = [stack.enter_context(running_service(store)) for _ in range(args.servers)]
        warm_up(bases, key)
        result = load(bases, key, args.clients, args.messages)
    result |= {"store": "postgresql" if args.pg else "sqlite", "date": time.strftime("%Y-%m-%d"),
               "machine": f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
                          f"Python {platform.python_version()}, shared with other jobs",
               "load_avg_5min": round(os.getloadavg()[1], 1)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    print(json.dumps(result, indent=2))
    ok = result["errors"] == 0 and result["sessions_complete"] and result["audit_verify_ok"]
    return 0 if ok else 1


def write_readme() -> int:
    """The README's load figures, from the result files of the last runs."""
    rows = []
    for path in sorted(OUT.glob("service_load*.json")):
        r = json.loads(path.read_text("utf-8"))
        ok = "yes" if r["sessions_complete"] and r["audit_verify_ok"] else "NO"
        rows.append(f"| {r['store']} | {r['clients']} × {r['messages_per_client']} | {r['servers']} | {r['load_avg_5min']} | "
                    f"{r['ingest_ms']['p50']} / {r['ingest_ms']['p99']} | {r['context_ms']['p50']} / {r['context_ms']['p99']} | "
                    f"{r['requests_per_s']} | {r['errors']} | {ok} |")
    if not rows:
        print("no results in benchmarks/out/: run the benchmark first", file=sys.stderr)
        return 1
    first = json.loads(sorted(OUT.glob("service_load*.json"))[0].read_text("utf-8"))
    block = (f"Measured on {first['date']} ({first['machine']}) by `python benchmarks/service_load.py [--pg]`: "
             "every client owns a session and, per message, POSTs it and GETs the `place_order` context; its "
             "requests alternate between the service processes over one store; every 10th POST is sent twice. "
             "Clients, servers and the store share the two cores, so latency is mostly queueing: 32 clients keep "
             "both processes saturated, and the throughput is the figure to compare.\n\n"
             "| store | clients × messages | processes | machine load (5 min) | ingest p50 / p99 ms | context p50 / p99 ms | requests/s | errors | all stored, audit verify ok |\n"
             "|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
    text = README.read_text("utf-8")
    start, end = text.index(MARKERS[0]) + len(MARKERS[0]), text.index(MARKERS[1])
    README.write_text(text[:start] + block + text[end:], "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
