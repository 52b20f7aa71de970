"""Concurrent ingestion into one store: N processes, each appending to its own session.

    python benchmarks/concurrency.py --store sqlite:///tmp/x.db --procs 8 --seconds 60
    python benchmarks/concurrency.py --pg --procs 8 --seconds 60   # a private PostgreSQL server

Each child runs the whole pipeline (`ContextEditor.add`: extract, transform, validate, commit)
on realistic bilingual customer-service turns, as fast as it can. Throughput alone proves little,
so afterwards the parent re-reads every session and checks that nothing was lost or corrupted:
message counts equal what the children reported, and `audit verify` finds both hash chains
dense and unbroken from genesis.
Results go to benchmarks/out/concurrency.json; the exit status is 1 if any check failed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
import uuid
from contextlib import nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from a checkout: import the package from here

from context_editor import ContextEditor, audit  # noqa: E402
from context_editor.errors import StoreError  # noqa: E402
from context_editor.store import open_store  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "concurrency.json"
TURNS = [
    ("user", "I'm looking for wireless over-ear headphones with noise cancelling, budget is $300, black please"),
    ("assistant", "Sony WH-1000XM5 ($329, black) or Bose QuietComfort Ultra ($299, midnight blue). Shall I compare?"),
    ("user", "我想买蓝牙耳机，预算两千以内，不要白色的"),
    ("assistant", "推荐Sony WH-1000XM5，现价1999元，有黑色现货。"),
    ("user", "改成红色吧，要2件，用支付宝"),
    ("tool", '{"orderId": "ORDER-2024-001", "status": "created", "items": [{"sku": "A123", "price": 1999}]}'),
    ("user", "还是黑色吧，那帮我下单"),
    ("assistant", "好的，已为您下单，订单号ORDER-2024-001。"),
]


def ingest(job: tuple[str, str, float]) -> dict:
    """Child: ingest into one session through the pipeline until the time is up; report what was committed."""
    url, session, seconds = job
    editor = ContextEditor("ecommerce", url)
    appended, errors = 0, []
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        role, content = TURNS[appended % len(TURNS)]
        try:
            editor.add(session, {"role": role, "content": f"{content} #{appended}",
                                 "timestamp": f"2024-05-01T10:{appended // 60 % 60:02d}:{appended % 60:02d}+08:00"})
        except StoreError as exc:  # must not happen: nobody else writes this session
            errors.append(str(exc))
            break
        appended += 1
    elapsed = time.monotonic() - start
    edits = len(editor.store.edits(session))
    editor.store.close()
    return {"session": session, "messages": appended, "edits": edits, "seconds": round(elapsed, 3), "errors": errors}


def verify(url: str, reports: list[dict]) -> list[str]:
    """Re-read every session from a fresh store instance; return what is wrong (nothing, ideally)."""
    store, problems = open_store(url), []
    for r in reports:
        s, stored = r["session"], len(store.messages(r["session"]))
        if stored != r["messages"]:
            problems.append(f"{s}: child reported {r['messages']} messages, store has {stored}")
        verdict = audit.verify(store, s)[0]
        if not verdict.ok:
            problems.append(f"{s}: broken at {verdict.broken_at}: {verdict.reason}")
    store.close()
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--store", help="store URL: sqlite:///path.db or postgresql://user@host/db")
    where.add_argument("--pg", action="store_true", help="start a private PostgreSQL server (tests/pg_server.py)")
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60)
    args = ap.parse_args(argv)
    server = nullcontext(args.store)
    if args.pg:
        sys.path.insert(0, str(ROOT / "tests"))
        import pg_server

        if reason := pg_server.unavailable_reason():
            print(f"cannot start PostgreSQL: {reason}", file=sys.stderr)
            return 2
        server = pg_server.postgres_url()
    with server as url:
        open_store(url).close()  # create the schema here, outside the children's timed loops
        run = uuid.uuid4().hex[:8]
        jobs = [(url, f"bench-{run}-{i}", args.seconds) for i in range(args.procs)]
        with multiprocessing.get_context("spawn").Pool(args.procs) as pool:
            reports = pool.map(ingest, jobs)
        problems = verify(url, reports)
        backend = url.split("://")[0]
    total = sum(r["messages"] for r in reports)
    errors = [e for r in reports for e in r["errors"]]
    result = {
        "backend": backend, "procs": args.procs, "seconds": args.seconds,
        "messages": total, "edits": sum(r["edits"] for r in reports),
        "messages_per_second": round(sum(r["messages"] / r["seconds"] for r in reports if r["seconds"]), 1),
        "errors": errors, "problems": problems, "ok": not errors and not problems, "sessions": reports,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"{backend}: {args.procs} processes x {args.seconds:g}s -> {total} messages, "
          f"{result['edits']} edits, {result['messages_per_second']} messages/s; "
          f"per process {[r['messages'] for r in reports]}")
    print(f"errors: {len(errors)}; verification: {'ok' if not problems else problems[:5]}; wrote {OUT}")
    for e in errors[:5]:
        print(f"  error: {e}", file=sys.stderr)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except StoreError as exc:
        sys.exit(f"error: {exc}")
