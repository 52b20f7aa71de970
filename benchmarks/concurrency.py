"""Concurrent ingestion into one store: N processes, each appending to its own session.

    python benchmarks/concurrency.py --store sqlite:///tmp/x.db --procs 8 --seconds 60
    python benchmarks/concurrency.py --pg --procs 8 --seconds 60   # a private PostgreSQL server

Each child calls `store.append` directly with a realistic message and a few sealed edits, as
fast as it can. Throughput alone proves little, so afterwards the parent re-reads every session
and checks that nothing was lost or corrupted: message counts equal what the children reported,
indexes and seqs are dense, and every message's and edit's hash recomputes and links unbroken
from genesis.
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

from context_editor.errors import StoreError  # noqa: E402
from context_editor.model import GENESIS_HASH, Edit, Message, Provenance  # noqa: E402
from context_editor.store import open_store  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "concurrency.json"
DOMAIN, VERSION = "ecommerce", "b" * 64
USER = ("I'm looking for wireless over-ear headphones with active noise cancelling, budget around $300, "
        "black or dark blue, must work with my iPhone; 我想要黑色的，不要白色，预算三百美元以内。 ")
ASSISTANT = ("Here are three options that match: Sony WH-1000XM5 ($329, black), Bose QuietComfort Ultra "
             "($299, midnight blue) and Apple AirPods Max (over budget). Shall I compare battery life? ")


def turn(session: str, index: int, prev_message: str, seq: int, prev: str) -> tuple[Message, list[Edit]]:
    """Message `index` of a session (≈1 KB) chained after `prev_message`, and three edits
    chained after (`seq`, `prev`)."""
    role = "user" if index % 2 == 0 else "assistant"
    content = (USER if role == "user" else ASSISTANT) * 3 + f"#{index}"
    m = Message(session=session, index=index, round=index // 2, role=role, content=content,
                timestamp=f"2024-05-01T10:{index % 60:02d}:00+08:00", id=f"{session}-{index}").sealed(prev_message)
    edits = []
    for field, value, start in (("budget", 300, 75), ("color", "black", 105), ("category", "headphones", 9)):
        prov = Provenance(message_index=index, round=m.round, role=role, span=(start, start + 20),
                          text=content[start:start + 20], extractor="regex:demo", confidence=0.92,
                          domain_version=VERSION, message_id=m.id)
        e = Edit(session=session, seq=0, message_index=index, round=m.round, stage="extract", op="set",
                 field=field, before=None, after=value, source="initial", reason=None, provenance=prov,
                 domain_version=VERSION, at=m.timestamp).sealed(seq, prev)
        edits.append(e)
        seq, prev = seq + 1, e.hash
    return m, edits


def ingest(job: tuple[str, str, float]) -> dict:
    """Child: append to one session until the time is up; report what was committed."""
    url, session, seconds = job
    store = open_store(url)
    appended, prev_message, seq, prev, errors = 0, GENESIS_HASH, 0, GENESIS_HASH, []
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        m, edits = turn(session, appended, prev_message, seq, prev)
        try:
            store.append(DOMAIN, VERSION, m, edits)
        except StoreError as exc:  # must not happen: nobody else writes this session
            errors.append(str(exc))
            break
        appended, prev_message, seq, prev = appended + 1, m.hash, edits[-1].seq + 1, edits[-1].hash
    elapsed = time.monotonic() - start
    store.close()
    return {"session": session, "messages": appended, "edits": seq, "seconds": round(elapsed, 3), "errors": errors}


def verify(url: str, reports: list[dict]) -> list[str]:
    """Re-read every session from a fresh store instance; return what is wrong (nothing, ideally)."""
    store, problems = open_store(url), []
    for r in reports:
        s, msgs, log = r["session"], store.messages(r["session"]), store.edits(r["session"])
        if len(msgs) != r["messages"] or len(log) != r["edits"]:
            problems.append(f"{s}: child reported {r['messages']} messages / {r['edits']} edits, "
                            f"store has {len(msgs)} / {len(log)}")
        for kind, chain in (("message", [(m.index, m) for m in msgs]), ("edit", [(e.seq, e) for e in log])):
            prev = GENESIS_HASH
            for i, (position, x) in enumerate(chain):
                if (position, x.prev_hash, x.compute_hash()) != (i, prev, x.hash):
                    problems.append(f"{s}: {kind} {i} breaks the dense, hash-linked chain")
                    break
                prev = x.hash
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
