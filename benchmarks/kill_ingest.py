"""kill -9 during ingest: nothing lost, nothing partial, resume equal to an uninterrupted run.

    python benchmarks/kill_ingest.py --kills 1000                  # SQLite and a private PostgreSQL
    python benchmarks/kill_ingest.py --kills 200 --stores sqlite

Each trial forks a writer that ingests one bundled conversation (the `ingest` command's resume
logic, then one `add` per message, acknowledging each committed index on a pipe) and kills it
with SIGKILL after a random delay: before, during or after store creation, mid-message, between
messages. Then the parent checks:
- lost: every index the writer acknowledged is stored;
- partial: the stored session is a verifiable prefix of the file (`audit verify`), no message
  without its edits, no half-created schema (the store opens);
- resume: the same ingest run again completes the session, whose state equals an uninterrupted
  in-memory run, and whose `replay` is identical.
Every 25 trials the store is new, so kills also land during schema creation.
Results go to benchmarks/out/kill_ingest.json; exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from a checkout: import the package from here

from context_editor import ContextEditor, audit  # noqa: E402
from context_editor.cli import _already_stored  # noqa: E402  - the resume logic under test
from context_editor.conversation import read_conversation  # noqa: E402
from context_editor.errors import ContextEditorError  # noqa: E402
from context_editor.store import open_store  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "kill_ingest.json"
SAMPLES = {"ecommerce": "ecommerce_headphones.jsonl", "travel": "travel_sanya.jsonl", "finance": "finance_conservative.jsonl"}


def ingest(url: str, domain: str, session: str, messages: list[dict[str, Any]], ack: int | None) -> None:
    """What `context-editor ingest` does, acknowledging each committed message index on `ack`."""
    editor = ContextEditor(domain, url)
    skip = _already_stored(editor.store.messages(session), messages)
    for m in messages[skip:]:
        edits = editor.add(session, m)
        if ack is not None:
            index = edits[0].message_index if edits else editor.state(session).message_index
            os.write(ack, f"{index}\n".encode())
    editor.store.close()


def killed_writer(url: str, domain: str, session: str, messages: list[dict[str, Any]], delay: float,
                  after_acks: int | None = None) -> list[int]:
    """Fork a writer and SIGKILL it: `delay` seconds after the fork, or, with `after_acks`, `delay`
    seconds after its `after_acks`-th commit (so it dies inside the next message's work or commit).
    Returns the indexes it acknowledged."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer
        os.close(read_end)
        try:
            ingest(url, domain, session, messages, write_end)
        finally:
            os._exit(0)
    os.close(write_end)
    acked: list[int] = []
    with os.fdopen(read_end) as f:
        if after_acks:
            for line in f:
                acked.append(int(line))
                if len(acked) >= after_acks:
                    break
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        acked += [int(line) for line in f.read().split()]
    return acked


def calibrate(url: str, domain: str, messages: list[dict[str, Any]]) -> tuple[float, float]:
    """Seconds from fork to the first and to the last commit of an unkilled writer, on this machine now."""
    read_end, write_end = os.pipe()
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            ingest(url, domain, f"calibrate-{domain}", messages, write_end)
        finally:
            os._exit(0)
    os.close(write_end)
    times = []
    with os.fdopen(read_end) as f:
        for _ in f:
            times.append(time.perf_counter() - start)
    os.waitpid(pid, 0)
    return times[0], times[-1]


def trial(url: str, domain: str, session: str, messages: list[dict[str, Any]], reference: dict[str, Any],
          delay: float, after_acks: int | None) -> dict[str, Any]:
    acked = killed_writer(url, domain, session, messages, delay, after_acks)
    out: dict[str, Any] = {"acked": len(acked)}
    try:
        store = open_store(url, create=False)
    except ContextEditorError as exc:
        if acked:
            return {**out, "failure": f"store unusable after the kill: {exc}"}
        store = None  # killed before the store existed: nothing to check yet
    if store is not None:
        stored = store.messages(session)
        out["stored"] = len(stored)
        if any(i >= len(stored) for i in acked):
            return {**out, "failure": f"lost: acknowledged {max(acked)} but {len(stored)} stored"}
        if [m.content for m in stored] != [m["content"] for m in messages[:len(stored)]]:
            return {**out, "failure": "the stored messages are not a prefix of the file"}
        if stored:
            report = audit.verify_store(store, session)
            if not report.ok:
                return {**out, "failure": f"partial: {report.sessions[0].broken_at}: {report.sessions[0].reason}"}
        store.close()
    ingest(url, domain, session, messages, None)  # the user's re-run
    store = open_store(url, create=False)
    try:
        if len(store.messages(session)) != len(messages):
            return {**out, "failure": f"resume stored {len(store.messages(session))} of {len(messages)} messages"}
        state = ContextEditor(domain, store).state(session).to_json()
        if state != reference:
            return {**out, "failure": "resumed state differs from an uninterrupted run"}
        if not audit.verify_store(store, session).ok:
            return {**out, "failure": "resumed session does not verify"}
        if not audit.replay(store, session).identical:
            return {**out, "failure": "replay of the resumed session differs"}
    finally:
        store.close()
    return out


def run(make_url: Any, kills: int, seed: int, progress: bool = False) -> dict[str, Any]:
    """`make_url(name)` gives a fresh, empty store URL."""
    rng = random.Random(seed)
    conversations = {d: read_conversation(str(ROOT / "domains" / "samples" / f)) for d, f in SAMPLES.items()}
    references = {d: ContextEditor(d, "memory://").ingest("s", msgs).to_json() for d, msgs in conversations.items()}
    for ref in references.values():
        ref.pop("session")
    failures: list[str] = []
    phases: Counter[str] = Counter()
    url = make_url("calibration")
    window = {d: calibrate(url, d, msgs) for d, msgs in conversations.items()}
    start = time.perf_counter()
    for k in range(kills):
        if k % 25 == 0:
            url = make_url(str(k // 25))
        domain = rng.choice(list(SAMPLES))
        messages = conversations[domain]
        session = f"k{k}"
        # Mostly right after a commit (inside the next message's work or commit), some at start-up
        # and schema creation (a fresh store), some after the last message.
        first, last = window[domain]
        mode = rng.choices(["after commit", "start-up", "late"], [7, 2, 1])[0]
        after_acks = rng.randint(1, len(messages) - 1) if mode == "after commit" else None
        delay = {"after commit": rng.uniform(0, (last - first) / len(messages)), "start-up": rng.uniform(0, first),
                 "late": rng.uniform(last, last * 1.5)}[mode]
        reference = {**references[domain], "session": session}
        result = trial(url, domain, session, messages, reference, delay, after_acks)
        stored = result.get("stored")
        phases["before any message" if not stored else "all stored" if stored == len(messages) else "mid-session"] += 1
        if "failure" in result:
            failures.append(f"trial {k} ({domain}, {delay:.3f}s): {result['failure']}")
        if progress and (k + 1) % 100 == 0:
            print(f"  {url.split(':')[0]}: {k + 1} kills, {len(failures)} failures", file=sys.stderr)
    return {"kills": kills, "commit_window_s": {d: [round(a, 3), round(b, 3)] for d, (a, b) in window.items()},
            "seconds": round(time.perf_counter() - start, 1), "kill_points": dict(phases),
            "failures": failures[:50], "failure_count": len(failures)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=1000, help="kills per store")
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--seed", type=int, default=9)
    args = parser.parse_args()
    results = {}
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for kind in args.stores.split(","):
            if kind == "sqlite":
                results[kind] = run(lambda n: f"sqlite:///{tmp / f'store-{n}.db'}", args.kills, args.seed, True)
            else:
                sys.path.insert(0, str(ROOT / "tests"))
                import pg_server
                import psycopg

                base = stack.enter_context(pg_server.postgres_url())

                def fresh(n: str) -> str:
                    with psycopg.connect(base, autocommit=True) as conn:
                        conn.execute(f"CREATE SCHEMA kill{n}")
                    return f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3Dkill{n}"

                results[kind] = run(fresh, args.kills, args.seed, True)
    print(json.dumps({k: r["commit_window_s"] for k, r in results.items()}))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2), "utf-8")
    for kind, r in results.items():
        print(f"{kind}: {r['kills']} kills in {r['seconds']} s, kill points {r['kill_points']}; "
              f"failures (lost, partial, resume or replay): {r['failure_count']}")
        for line in r["failures"][:10]:
            print(f"  {line}")
    return 1 if any(r["failure_count"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
