"""Ingest speed of a long conversation into the default SQLite store.

    python benchmarks/ingest_speed.py [--messages 1000] [--store sqlite:///path.db]

Cycles the bundled headphone conversation plus mixed zh/en customer-service turns (corrections,
tool results, chit-chat) into one session and reports wall time per 100 messages and per-message
latency percentiles. Writes benchmarks/out/ingest_speed.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from context_editor import ContextEditor  # noqa: E402
from context_editor.conversation import read_conversation  # noqa: E402

EXTRA = [
    ("user", "改成红色吧"), ("assistant", "好的，已为您改为红色。"), ("user", "还是黑色吧"),
    ("user", "I'd like to pay by credit card, budget is $300"), ("assistant", "Noted, credit card."),
    ("tool", '{"orderId": "ORDER-2024-001", "status": "created", "items": [{"sku": "A123", "price": 1999}]}'),
    ("user", "要两件，L码的"), ("user", "这个耳机降噪效果怎么样？"), ("assistant", "降噪深度约35dB，适合通勤。"),
    ("user", "不要白色的"), ("user", "thanks!"), ("user", "我要投诉，耳机坏了，订单号ORDER-2024-002"),
]


def conversation(n: int) -> list[dict]:
    base = read_conversation(str(ROOT / "domains" / "samples" / "ecommerce_headphones.jsonl"))
    pool = [{"role": m["role"], "content": m["content"]} for m in base] + [{"role": r, "content": c} for r, c in EXTRA]
    start = datetime(2024, 5, 1, 10, tzinfo=timezone.utc)
    return [{**pool[i % len(pool)], "timestamp": (start + timedelta(seconds=30 * i)).isoformat()} for i in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--store", help="store URL (default: a fresh SQLite file in a temp dir)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store or f"sqlite:///{tmp}/bench.db"
        editor = ContextEditor("ecommerce", store)
        msgs = conversation(args.messages)
        editor.add("warmup", msgs[0])  # first-use costs (regex compile, Pydantic) are not per-message costs
        latencies = []
        t0 = time.perf_counter()
        for m in msgs:
            t = time.perf_counter()
            editor.add("bench", m)
            latencies.append((time.perf_counter() - t) * 1000)
        total = time.perf_counter() - t0
        t = time.perf_counter()
        ctx = editor.render("bench", "place_order")  # first render loads the tokenizer
        tokenizer_load_s = time.perf_counter() - t
        renders = []
        for _ in range(20):
            t = time.perf_counter()
            ctx = editor.render("bench", "place_order")
            renders.append((time.perf_counter() - t) * 1000)
        render_ms = statistics.median(renders)
    q = statistics.quantiles(latencies, n=100)
    result = {
        "messages": args.messages, "store": store.split(":")[0], "total_s": round(total, 3),
        "s_per_100_messages": round(total / args.messages * 100, 4),
        "ingest_ms_p50": round(statistics.median(latencies), 3), "ingest_ms_p99": round(q[98], 3),
        "render_ms_p50": round(render_ms, 2), "render_tokens": ctx.tokens,
        "first_render_s_incl_tokenizer_load": round(tokenizer_load_s, 2),
    }
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "ingest_speed.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
