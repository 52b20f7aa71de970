"""Render latency of every bundled action, and context size vs the full history.

    python benchmarks/render_speed.py [--rounds 200] [--repeat 50]

For each bundled domain, its sample conversations (domains/samples/<domain>_*.jsonl) are cycled
into one long session of --rounds user rounds; travel uses the 200-round conversation of the
tests. Each action is rendered --repeat times after one warm-up: p50/p99 latency, tokens of the
context, tokens of the full transcript, and their ratio. Writes benchmarks/out/render_speed.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

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
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    rows = []
    for path in sorted(DOMAINS_DIR.glob("*.yaml")):
        domain = path.stem
        conv = long_travel_conversation(args.rounds) if domain == "travel" else cycled(domain, args.rounds)
        if not conv:
            print(f"{domain}: no sample conversation, skipped", file=sys.stderr)
            continue
        editor = ContextEditor(domain, "memory://")
        editor.ingest("bench", conv)
        full = count_tokens("\n".join(f"{m['role']}: {m['content']}" for m in conv))
        for action in editor.domain.actions:
            ctx = editor.render("bench", action)  # warm-up (tokenizer load, template compile)
            times = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                ctx = editor.render("bench", action)
                times.append((time.perf_counter() - t) * 1000)
            q = statistics.quantiles(times, n=100)
            rows.append({"domain": domain, "action": action, "render_ms_p50": round(statistics.median(times), 2),
                         "render_ms_p99": round(q[98], 2), "context_tokens": ctx.tokens, "budget": ctx.budget,
                         "full_history_tokens": full, "ratio": round(ctx.tokens / full, 4), "dropped": ", ".join(ctx.dropped)})
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "render_speed.json").write_text(json.dumps(rows, indent=2, ensure_ascii=False))
    print(f"{'domain':<10} {'action':<20} {'p50 ms':>7} {'p99 ms':>7} {'tokens':>7} {'history':>8} {'ratio':>6}")
    for r in rows:
        print(f"{r['domain']:<10} {r['action']:<20} {r['render_ms_p50']:>7} {r['render_ms_p99']:>7} "
              f"{r['context_tokens']:>7} {r['full_history_tokens']:>8} {r['ratio']:>6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
