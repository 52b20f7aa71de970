"""Render latency of every bundled action, and context size vs the full history.

    python benchmarks/render_speed.py [--rounds 500] [--repeat 50] [--fresh 20]

For each bundled domain, its sample conversations (domains/samples/<domain>_*.jsonl) are cycled
into one long session of --rounds user rounds (500 rounds: about 1,000 messages); travel uses the
long conversation of the tests. Two latencies per action, each as the median (p50) and p99 of
wall time, and the median of the process's CPU time (steadier on a shared machine):
- repeat: the action rendered --repeat times after one warm-up, nothing arriving in between;
- fresh: one more message arrives before each render (--fresh messages), so nothing the render
  remembers about the previous state can be reused: the case of an agent rendering every turn.
Also tokens of the context, tokens of the full transcript, and their ratio. Writes
benchmarks/out/render_speed.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from context_editor import ContextEditor  # noqa: E402
from context_editor.conversation import read_conversation  # noqa: E402
from context_editor.domain.model import DOMAINS_DIR  # noqa: E402
from context_editor.inject.tokens import count_tokens  # noqa: E402
from long_conversation import long_travel_conversation  # noqa: E402


def cycled(domain: str, rounds: int) -> list[dict]:
    pool = [m for f in sorted((DOMAINS_DIR / "samples").glob(f"{domain}_*.jsonl")) for m in read_conversation(str(f))]
    if not pool:
        return []
    start = datetime(2024, 5, 1, 9, tzinfo=timezone.utc)
    out, users, i = [], 0, 0
    while users < rounds:
        m = pool[i % len(pool)]
        users += m["role"] == "user"
        out.append({"role": m["role"], "content": m["content"], "timestamp": (start + timedelta(minutes=i)).isoformat()})
        i += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--fresh", type=int, default=20, help="messages that arrive one by one, each followed by a render")
    ap.add_argument("--retrieval", action="store_true", help="render with retrieval on (ContextEditor(retrieval=True))")
    args = ap.parse_args()
    rows = []
    for path in sorted(DOMAINS_DIR.glob("*.yaml")):
        domain = path.stem
        conv = long_travel_conversation(args.rounds) if domain == "travel" else cycled(domain, args.rounds)
        if not conv:
            print(f"{domain}: no sample conversation, skipped", file=sys.stderr)
            continue
        head, tail = conv[: len(conv) - args.fresh], conv[len(conv) - args.fresh:]
        editor = ContextEditor(domain, "memory://", retrieval=args.retrieval)
        editor.ingest("bench", head)
        full = count_tokens("\n".join(f"{m['role']}: {m['content']}" for m in conv))
        fresh: dict[str, list[tuple[float, float]]] = {action: [] for action in editor.domain.actions}
        for action in editor.domain.actions:
            editor.render("bench", action)  # warm-up (tokenizer load, template compile)
        for message in tail:
            editor.add("bench", message)
            for action in editor.domain.actions:
                fresh[action].append(timed(lambda: editor.render("bench", action)))
        for action in editor.domain.actions:
            ctx = editor.render("bench", action)
            times = [timed(lambda: editor.render("bench", action)) for _ in range(args.repeat)]
            rows.append({"domain": domain, "action": action, "messages": len(conv),
                         **summary("render", times), **summary("fresh", fresh[action]),
                         "context_tokens": ctx.tokens, "budget": ctx.budget,
                         "full_history_tokens": full, "ratio": round(ctx.tokens / full, 4), "dropped": ", ".join(ctx.dropped)})
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"render_speed{'_retrieval' if args.retrieval else ''}.json").write_text(json.dumps(rows, indent=2, ensure_ascii=False))
    print(f"{'domain':<10} {'action':<20} {'p50 ms':>7} {'p99 ms':>7} {'cpu p50':>7} {'fresh p50':>9} {'fresh cpu':>9} "
          f"{'tokens':>7} {'history':>8} {'ratio':>6}")
    for r in rows:
        print(f"{r['domain']:<10} {r['action']:<20} {r['render_ms_p50']:>7} {r['render_ms_p99']:>7} {r['render_cpu_ms_p50']:>7} "
              f"{r['fresh_ms_p50']:>9} {r['fresh_cpu_ms_p50']:>9} {r['context_tokens']:>7} {r['full_history_tokens']:>8} {r['ratio']:>6}")
    return 0


def timed(render: Callable[[], object]) -> tuple[float, float]:
    """(wall ms, CPU ms of this thread) of one call."""
    wall, cpu = time.perf_counter(), time.thread_time()
    render()
    return (time.perf_counter() - wall) * 1000, (time.thread_time() - cpu) * 1000


def summary(name: str, times: list[tuple[float, float]]) -> dict[str, float]:
    wall = [w for w, _ in times]
    return {f"{name}_ms_p50": round(statistics.median(wall), 2), f"{name}_ms_p99": round(statistics.quantiles(wall, n=100)[98], 2),
            f"{name}_cpu_ms_p50": round(statistics.median(c for _, c in times), 2)}


if __name__ == "__main__":
    raise SystemExit(main())
