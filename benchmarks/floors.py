"""Each cost of the product beside its floor, measured in one run (issue 15).

    python benchmarks/floors.py                 # everything; writes benchmarks/out/floors.json
    python benchmarks/floors.py --quick         # smaller sizes, for a smoke run
    python benchmarks/floors.py --readme        # write the last results into README.md

A floor is what the same job costs with nothing of ours around it, measured in the same process
and run, interleaved, so the ratio survives a noisy machine better than either figure:
- ingest: the domain's rule patterns run over the message (regex alone) + one bare WAL insert
  and commit of the message's JSON in a plain SQLite table;
- PostgreSQL ingest: round trips per message (every statement and commit the store sends,
  counted at the driver), beside one `SELECT 1` round trip and one bare insert + commit;
- render: one exact token count of the final XML (what any exact-budget render must do);
- reopening a session: one indexed read of its last message;
- start-up: `python -c pass`; first render in a process: the second render in that process;
- memory: resident size of a process that cycles through sessions, against a ceiling.
Medians (p50) throughout; the targets are the issue's, printed beside each row.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from contextlib import ExitStack
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from context_editor import ContextEditor  # noqa: E402
from context_editor.bench.sgd import load_sgd  # noqa: E402
from context_editor.inject import compact  # noqa: E402
from context_editor.inject.tokens import count_tokens, tokenizer_for  # noqa: E402
from context_editor.memory import past  # noqa: E402
from context_editor.model import Message, State  # noqa: E402
from context_editor.pipeline import DEFAULT_HISTORY_CAP  # noqa: E402
from render_speed import cycled  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "floors.json"
README = ROOT / "README.md"
MARKERS = ("<!-- floors:start -->\n", "<!-- floors:end -->")
INGEST_DOMAIN = "ecommerce"  # both languages ingest into one domain, so the rows compare
GOLDEN = ROOT / "tests" / "golden"


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def conversation(domain: str, n: int) -> list[dict[str, Any]]:
    """n messages cycled from the domain's bundled samples."""
    pool = cycled(domain, max(1, n))
    start = datetime(2024, 5, 1, 9, tzinfo=timezone.utc)
    return [{**pool[i % len(pool)], "timestamp": (start + timedelta(seconds=20 * i)).isoformat()} for i in range(n)]


def golden_conversation(domain: str, lang: str, n: int) -> list[dict[str, Any]]:
    """n messages cycled from the domain's golden conversations in one language (`lang: zh|en`):
    varied, realistic turns of both roles (the bundled samples are Chinese only)."""
    import yaml

    pool = []
    for path in sorted((GOLDEN / domain).glob(f"{lang}_*.yaml")):
        doc = yaml.safe_load(path.read_text("utf-8"))
        pool += [m for m in doc["messages"] if m["role"] in ("user", "assistant")]
    start = datetime(2024, 5, 1, 9, tzinfo=timezone.utc)
    return [{"role": pool[i % len(pool)]["role"], "content": pool[i % len(pool)]["content"],
             "timestamp": (start + timedelta(seconds=20 * i)).isoformat()} for i in range(n)]


def regex_floor(editor: ContextEditor, text: str) -> float:
    """Every rule pattern of the domain run over the text, nothing else."""
    rules = [r for rs in editor.domain.field_rules.values() for r in rs]
    t = time.perf_counter()
    for rule in rules:
        for _ in rule.pattern.finditer(text):
            pass
    return time.perf_counter() - t


def ingest_sqlite(lang: str, n: int, tmp: Path) -> dict[str, Any]:
    messages = golden_conversation(INGEST_DOMAIN, lang, n)
    editor = ContextEditor(INGEST_DOMAIN, f"sqlite:///{tmp}/ingest-{lang}.db")
    bare = sqlite3.connect(tmp / f"bare-{lang}.db", isolation_level=None)
    bare.execute("PRAGMA journal_mode=WAL")
    bare.execute("PRAGMA synchronous=NORMAL")  # what the store sets
    bare.execute("CREATE TABLE m (session TEXT, idx INTEGER, body TEXT, PRIMARY KEY (session, idx))")
    ours, cpu, regex, commit = [], [], [], []
    for i, m in enumerate(messages):  # interleaved: the three see the same machine at the same moment
        t, c = time.perf_counter(), time.process_time()
        editor.add(f"s-{lang}", m)
        ours.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        regex.append(regex_floor(editor, m["content"]))
        body = json.dumps(m, ensure_ascii=False)
        t = time.perf_counter()
        bare.execute("BEGIN")
        bare.execute("INSERT INTO m VALUES (?, ?, ?)", ("s", i, body))
        bare.execute("COMMIT")
        commit.append(time.perf_counter() - t)
    floor = p50(regex) + p50(commit)
    # The mean beside the median: work done on some messages only (a settled summary stage written,
    # a snapshot) shows there, not in the p50. After the first 30 messages (the domain's regexes compile on first use).
    return {"what": f"SQLite ingest p50, {lang}", "part": "ingest", "now_ms": ms(p50(ours)), "cpu_ms": ms(p50(cpu)),
            "cpu_mean_ms": ms(statistics.mean(cpu[30:])), "floor_ms": ms(floor),
            "floor": f"regex alone {ms(p50(regex))} + bare WAL commit {ms(p50(commit))} ms",
            "ratio": round(p50(ours) / floor, 1), "target": "≤ 2.5× floor" + (", ≤ 0.12 ms" if lang == "zh" else ""),
            "met": p50(ours) <= 2.5 * floor and (lang != "zh" or p50(ours) <= 0.00012)}


class RoundTrips:
    """Counts the round trips of every psycopg connection: each wait for the server (a
    statement, a BEGIN, a COMMIT) goes through `Connection.wait` once."""

    def __init__(self) -> None:
        self.count = 0
        self._undo: list[Callable[[], None]] = []

    def __enter__(self) -> RoundTrips:
        import psycopg

        original = psycopg.Connection.wait

        def counted(*a: Any, **k: Any) -> Any:
            self.count += 1
            return original(*a, **k)

        psycopg.Connection.wait = counted  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(psycopg.Connection, "wait", original))
        return self

    def __exit__(self, *exc: Any) -> None:
        for undo in self._undo:
            undo()


def ingest_postgres(n: int) -> list[dict[str, Any]]:
    import pg_server
    import psycopg

    if reason := pg_server.unavailable_reason():
        return [{"what": "PostgreSQL ingest", "part": "postgres", "skipped": reason}]
    with pg_server.postgres_url() as url:
        editor = ContextEditor("ecommerce", url)
        messages = conversation("ecommerce", n)
        with psycopg.connect(url, autocommit=True) as bare:
            bare.execute("CREATE TABLE IF NOT EXISTS bare_m (session TEXT, idx INTEGER, body TEXT, PRIMARY KEY (session, idx))")
            ours, trip, commit, total = [], [], [], 0
            with RoundTrips() as trips:
                for i, m in enumerate(messages):
                    before = trips.count
                    t = time.perf_counter()
                    editor.add("pg", m)
                    ours.append(time.perf_counter() - t)
                    total += trips.count - before  # the floor's own statements below are not ours
                    t = time.perf_counter()
                    bare.execute("SELECT 1")
                    trip.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    with bare.transaction():
                        bare.execute("INSERT INTO bare_m VALUES (%s, %s, %s)", ("s", i, json.dumps(m, ensure_ascii=False)))
                    commit.append(time.perf_counter() - t)
        # Bulk load: the same messages over 20 sessions, one message per `add` vs `ingest_many`
        # (200 per transaction), alternated in blocks so both see the same machine.
        single, batched, batched_cpu = [], [], []
        spread = [(f"b{i % 20}", m) for i, m in enumerate(messages)]
        for block in range(0, len(spread), 100):
            part = spread[block:block + 100]
            t = time.perf_counter()
            for session, m in part:
                editor.add("one-" + session, m)
            single.append((time.perf_counter() - t) / len(part))
            t, c = time.perf_counter(), time.process_time()
            editor.ingest_many([("many-" + session, m) for session, m in part], batch_size=200)
            batched.append((time.perf_counter() - t) / len(part))
            batched_cpu.append((time.process_time() - c) / len(part))
    per_message = round(total / len(messages), 1)
    speedup = p50(single) / p50(batched)
    batch_row = {"what": "PostgreSQL batch ingest (ingest_many) per message", "part": "postgres", "now_ms": ms(p50(batched)),
                 "cpu_ms": ms(p50(batched_cpu)),
                 "floor_ms": ms(p50(single)), "floor": "one `add` per message, same messages and run",
                 "ratio": round(1 / speedup, 2), "target": "≥ 3× faster than single-message ingest (ratio ≤ 0.33)",
                 "met": speedup >= 3}
    return [batch_row, {"what": "PostgreSQL ingest p50", "part": "postgres", "now_ms": ms(p50(ours)), "floor_ms": ms(p50(commit)),
             "floor": f"bare insert + commit {ms(p50(commit))} ms; one round trip {ms(p50(trip))} ms",
             "ratio": round(p50(ours) / p50(commit), 1), "target": "≤ 2 round trips per message",
             "round_trips_per_message": per_message, "met": per_message <= 2}]


def render_rows(sizes: list[int], repeat: int, tmp: Path) -> list[dict[str, Any]]:
    """Per bundled action and session size: a repeated render (nothing new in the log: the
    editor's render memo answers it), and a render right after a new message (the usual case in a
    live session: every render follows a turn; nothing of the previous render is reused whole).
    Steady state of a long-running process: tiktoken's encoder is built first (a fresh process
    counts in Python until that has cost about as much; see the start-up rows)."""
    getattr(tokenizer_for(None), "encoding", None)
    rows = []
    for domain in ("ecommerce", "finance", "travel"):
        for size in sizes:
            editor = ContextEditor(domain, f"sqlite:///{tmp}/render-{domain}-{size}.db")
            session = f"r-{size}"
            turns = conversation(domain, size + repeat * len(editor.domain.actions))
            editor.ingest(session, turns[:size])
            arriving = iter(turns[size:])
            for action in editor.domain.actions:
                rows += action_rows(editor, session, action, arriving, repeat, f"{domain} `{action}` at {size:,} messages")
    return rows + minimal_rows(sizes[0], repeat, tmp)


def action_rows(editor: ContextEditor, session: str, action: str, arriving: Iterator[dict[str, Any]], repeat: int,
                label: str) -> list[dict[str, Any]]:
    """A repeated render and a render right after a new message (from `arriving`), each beside
    one exact count of the final XML."""
    editor.render(session, action)  # warm: the tokenizer and templates are loaded once per process
    times, cpu, floors, fresh, fresh_cpu = [], [], [], [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        ctx = editor.render(session, action)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        t = time.perf_counter()
        count_tokens(ctx.xml)
        floors.append(time.perf_counter() - t)
    for _ in range(repeat):
        editor.add(session, next(arriving))
        t, c = time.perf_counter(), time.process_time()
        editor.render(session, action)
        fresh.append(time.perf_counter() - t)
        fresh_cpu.append(time.process_time() - c)
    return [{"what": f"render p50, repeated, {label}", "part": "render", "now_ms": ms(p50(times)),
             "cpu_ms": ms(p50(cpu)), "floor_ms": ms(p50(floors)), "floor": "one exact count of the final XML",
             "ratio": round(p50(times) / max(p50(floors), 1e-9), 1), "target": "≤ 2 ms",
             "met": p50(times) <= 0.002},
            {"what": f"render p50 right after a new message, {label}", "part": "render",
             "now_ms": ms(p50(fresh)), "cpu_ms": ms(p50(fresh_cpu)), "floor_ms": ms(p50(floors)),
             "floor": "one exact count of the final XML",
             "ratio": round(p50(fresh) / max(p50(floors), 1e-9), 1), "target": "≤ 2 ms",
             "met": p50(fresh) <= 0.002}]


SGD_DEV = Path("/work/shared/data/sgd/dev")  # SGD's dev split (not in the repository); `--sgd DIR` elsewhere


def minimal_rows(size: int, repeat: int, tmp: Path, sgd: Path = SGD_DEV) -> list[dict[str, Any]]:
    """Issue 10's render target for `minimal: true` actions, right after a new message at `size`
    messages: each ecommerce action declared minimal (the bundled samples cycled, as above), and
    the SGD importer's `track` of the dev split's most frequent single-service domain, its
    dialogues one after another in one session (the values of every earlier dialogue stay in the
    log, so the context is near its budget: a hard case)."""
    rows = []
    text = re.sub(r"(\n    budget_tokens: \d+)", r"\1\n    minimal: true", (ROOT / "domains" / "ecommerce.yaml").read_text("utf-8"))
    (tmp / "minimal").mkdir(exist_ok=True)
    (tmp / "minimal" / "ecommerce.yaml").write_text(text, "utf-8")
    editor = ContextEditor(tmp / "minimal" / "ecommerce.yaml", f"sqlite:///{tmp}/minimal.db")
    turns = conversation("ecommerce", size + repeat * len(editor.domain.actions))
    editor.ingest("m", turns[:size])
    arriving = iter(turns[size:])
    for action in editor.domain.actions:
        assert editor.domain.actions[action].minimal
        rows += action_rows(editor, "m", action, arriving, repeat, f"ecommerce `{action}` declared minimal, at {size:,} messages")
    if not sgd.is_dir():
        return rows + [{"what": "render p50 right after a new message, SGD `track` (minimal)", "part": "render", "skipped": f"no {sgd}"}]
    data = load_sgd(sgd, tmp / "sgd-domains", limit=400)
    single = Counter(d.domains[0] for d in data.dialogues if len(d.domains) == 1)
    domain = single.most_common(1)[0][0]
    said = [u for d in data.dialogues if d.domains == (domain,) for u in d.utterances]
    stamp = data.now.isoformat()
    turns = [{"role": u.role, "content": u.text, "timestamp": stamp} for u in (said * (1 + (size + 2 * repeat) // len(said)))]
    editor = ContextEditor(data.domain_files[domain], f"sqlite:///{tmp}/minimal-sgd.db")
    editor.ingest("m", turns[:size])
    return rows + action_rows(editor, "m", "track", iter(turns[size:]), repeat,
                              f"SGD dev `{domain}` `track` (minimal), {single[domain]} dialogues in one session, at {size:,} messages")


def reopen_rows(size: int, tmp: Path) -> list[dict[str, Any]]:
    """A new editor (a new process, or a session evicted from the cache) opening a long session:
    its state, and its first render: with the settled past the last render stored (a live
    session is rendered after every turn), and without one (a session only ever ingested)."""
    url = f"sqlite:///{tmp}/reopen.db"
    ContextEditor("ecommerce", url).ingest("long", conversation("ecommerce", size))
    states, state_cpu, firsts, first_cpu, reads, cold, cold_cpu = [], [], [], [], [], [], []

    def first_render(walls: list[float], cpus: list[float]) -> None:
        compact._scores.clear()  # nothing of an earlier editor's scoring is reused
        editor = ContextEditor("ecommerce", url)
        t, c = time.perf_counter(), time.process_time()
        editor.render("long", "place_order")
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)

    for _ in range(7):
        editor = ContextEditor("ecommerce", url)
        t, c = time.perf_counter(), time.process_time()
        editor.state("long")
        states.append(time.perf_counter() - t)
        state_cpu.append(time.process_time() - c)
        editor.store.drop_derived("long", past.KIND)
        first_render(cold, cold_cpu)  # reads the whole zone, and stores the past again
        first_render(firsts, first_cpu)
        con = sqlite3.connect(f"{tmp}/reopen.db")
        t = time.perf_counter()
        con.execute("SELECT body FROM messages WHERE session = ? ORDER BY idx DESC LIMIT 1", ("long",)).fetchone()
        reads.append(time.perf_counter() - t)
        con.close()
    floor = p50(reads)
    # The folded state in memory, each field's history capped (the editor's default) or not;
    # folded from the log as the editor folds it (the edits are let go once applied).
    store = ContextEditor("ecommerce", url).store
    held = {}
    for cap in (None, DEFAULT_HISTORY_CAP):
        gc.collect()
        tracemalloc.start()
        state = State("ecommerce", "", "long", history_cap=cap)
        for e in store.edits("long"):
            state.apply(e)
        gc.collect()
        held[cap] = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        del state
    memory = {"what": f"a {size:,}-message session's folded state in memory, history_cap={DEFAULT_HISTORY_CAP}",
              "part": "reopen", "now_ms": None, "now_text": f"{round(held[DEFAULT_HISTORY_CAP] / 1024):,} KiB", "floor_ms": None,
              "floor": f"every entry kept: {round(held[None] / 1024):,} KiB", "ratio": round(held[DEFAULT_HISTORY_CAP] / held[None], 2),
              "target": "bounded per field (the full history in the store)", "met": None}
    return [memory, {"what": f"reopening a {size:,}-message session (its state)", "part": "reopen", "now_ms": ms(p50(states)),
             "cpu_ms": ms(p50(state_cpu)), "floor_ms": ms(floor), "floor": "one indexed read of the last message",
             "ratio": round(p50(states) / floor, 1), "target": "≤ 10 ms", "met": p50(states) <= 0.010},
            {"what": f"first render after reopening a {size:,}-message session", "part": "reopen", "now_ms": ms(p50(firsts)),
             "cpu_ms": ms(p50(first_cpu)), "floor_ms": ms(floor), "floor": "one indexed read of the last message",
             "ratio": round(p50(firsts) / floor, 1), "target": "≤ 10 ms", "met": p50(firsts) <= 0.010},
            {"what": f"first render after reopening a {size:,}-message session never rendered before (no stored past)",
             "part": "reopen", "now_ms": ms(p50(cold)), "cpu_ms": ms(p50(cold_cpu)), "floor_ms": ms(floor),
             "floor": "one indexed read of the last message", "ratio": round(p50(cold) / floor, 1), "target": "—",
             "met": None}]


def command_ms(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=False)
        times.append(time.perf_counter() - t)
    return p50(times)


FIRST_RENDER = """
import json, time
from context_editor import ContextEditor
e = ContextEditor("ecommerce", "memory://")
e.ingest("s", [{"role": "user", "content": "我想买蓝牙耳机，预算2000以内，要黑色"}])
t, c = time.perf_counter(), time.process_time(); e.render("s", "place_order"); first, first_cpu = time.perf_counter() - t, time.process_time() - c
t, c = time.perf_counter(), time.process_time(); e.render("s", "place_order"); second, second_cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps([first, second, first_cpu, second_cpu]))
"""


def startup_rows(repeat: int) -> list[dict[str, Any]]:
    exe = str(Path(sys.executable).parent / "context-editor")
    bare = command_ms([sys.executable, "-c", "pass"], repeat)
    helps = command_ms([exe, "--help"], repeat)
    sample = str(ROOT / "domains" / "samples" / "ecommerce_headphones.jsonl")
    run = command_ms([exe, "run", "ecommerce", sample, "--json", "--store", "memory://"], max(3, repeat // 3))
    pairs = [json.loads(subprocess.run([sys.executable, "-c", FIRST_RENDER], capture_output=True, text=True,
                                       check=True).stdout) for _ in range(max(3, repeat // 3))]
    extra = p50([p[0] - p[1] for p in pairs])
    extra_cpu = p50([p[2] - p[3] for p in pairs])
    return [
        {"what": "`context-editor --help`", "now_ms": ms(helps), "floor_ms": ms(bare), "floor": "`python -c pass`",
         "ratio": round(helps / bare, 1), "target": "≤ 150 ms", "met": helps <= 0.150},
        {"what": "`context-editor run ecommerce … --json`", "now_ms": ms(run), "floor_ms": ms(bare),
         "floor": "`python -c pass`", "ratio": round(run / bare, 1), "target": "—", "met": None},
        {"what": "first render in a fresh process, over the second", "now_ms": ms(extra), "cpu_ms": ms(extra_cpu),
         "floor_ms": ms(p50([p[1] for p in pairs])), "floor": "the second render", "ratio": None,
         "target": "≤ 80 ms over the second", "met": extra <= 0.080},
    ]


def rss_kib() -> int:
    """Resident memory now (not the peak: earlier rows of this run peaked higher)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # not Linux: the peak, an upper bound


PARTS = ("ingest", "postgres", "render", "reopen", "startup", "memory")
MEMORY_CEILING_MIB = 32  # the growth allowed once the bounded caches are warm


def memory_row(sessions: int, tmp: Path, cache_sessions: int = 64) -> dict[str, Any]:
    """Resident memory of one editor cycling through many sessions, each given a message (and
    every tenth rendered), with a small configured cache (`cache_sessions`). The log is in
    SQLite, so what could grow is what the process keeps per session. Measured after a warm-up
    that fills every bounded cache (sessions, renderer memos, piece counts)."""
    editor = ContextEditor("ecommerce", f"sqlite:///{tmp}/memory.db", cache_sessions=cache_sessions)
    texts = ["我想买蓝牙耳机，预算2000以内", "要黑色的", "I want red headphones under $300", "发票要电子的"]

    def visit(i: int) -> None:
        editor.add(f"s{i}", {"role": "user", "content": texts[i % len(texts)]})
        if i % 10 == 0:
            editor.render(f"s{i}", "place_order")

    warm = min(5000, sessions)
    for i in range(warm):
        visit(i)
    gc.collect()
    base = rss_kib()
    for i in range(warm, warm + sessions):
        visit(i)
    gc.collect()
    grown = rss_kib() - base
    return {"what": f"memory growth cycling {sessions:,} sessions (cache_sessions={cache_sessions})",
            "now_ms": None, "floor_ms": None, "floor": "—", "ratio": None, "growth_kib": grown,
            "kib_per_session": round(grown / sessions, 3),
            "target": f"≤ {MEMORY_CEILING_MIB} MiB growth after warm-up", "met": grown <= MEMORY_CEILING_MIB * 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run, not figures)")
    parser.add_argument("--no-pg", action="store_true", help="skip the PostgreSQL rows")
    parser.add_argument("--readme", action="store_true", help="only write the last results into README.md (with "
                        "--parts: only those parts' rows, the table's other rows kept as they are)")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"a comma-separated subset of {','.join(PARTS)} "
                        "(rows of earlier runs of the other parts are kept in the results file)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if args.readme:
        return write_readme(None if parts == set(PARTS) else parts)
    n, sizes, repeat = (200, [200], 5) if args.quick else (2000, [1000, 10000], 31)
    load_start = round(os.getloadavg()[0], 1)
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        if "ingest" in parts:
            for lang in ("zh", "en"):
                rows.append(ingest_sqlite(lang, n, tmp))
        if "postgres" in parts and not args.no_pg:
            rows.extend(ingest_postgres(n // 2))
        if "render" in parts:
            rows.extend(render_rows(sizes, repeat, tmp))
        if "reopen" in parts:
            rows.extend(reopen_rows(sizes[-1], tmp))
        if "startup" in parts:
            rows.extend(startup_rows(repeat))
        if "memory" in parts:
            rows.append(memory_row(2000 if args.quick else 100_000, tmp))
    if parts != set(PARTS) and OUT.exists():  # a partial run: keep the other rows of the last run
        done = {r["what"] for r in rows}
        previous = json.loads(OUT.read_text("utf-8"))
        rows = [r for r in previous["rows"] if r["what"] not in done and r.get("part") not in parts] + rows
    result = {"date": time.strftime("%Y-%m-%d"), "quick": args.quick, "load_avg_1min_at_start": load_start,
              "load_avg_1min_at_end": round(os.getloadavg()[0], 1),
              "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}",
              "rows": rows}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n", "utf-8")
    print(table(result))
    return 0


def table(result: dict[str, Any]) -> str:
    load = f"load average {result.get('load_avg_1min_at_start', '?')} at the start, {result['load_avg_1min_at_end']} at the end"
    lines = [f"Measured on {result['date']} ({result['machine']}; {load}; CPU ms = process time, less sensitive to load) "
             f"by `python benchmarks/floors.py{' --quick' if result.get('quick') else ''}`: medians, each beside its floor "
             "from the same run.\n",
             "| what | now ms (wall) | CPU ms | floor ms | floor | ratio | target | met |", "|---|---|---|---|---|---|---|---|"]
    lines += [row_line(r) for r in result["rows"]]
    return "\n".join(lines) + "\n"


def row_line(r: dict[str, Any]) -> str:
    """One row of the README table."""
    if "skipped" in r:
        return f"| {r['what']} | — | — | — | skipped: {r['skipped']} | — | — | — |"
    now = r["now_ms"] if r["now_ms"] is not None else r.get("now_text") or \
        f"{r['growth_kib']:,} KiB ({r['kib_per_session']} KiB/session)"
    cpu = f"{r.get('cpu_ms', '—')}" + (f" (mean {r['cpu_mean_ms']})" if "cpu_mean_ms" in r else "")
    floor = r["floor"] + (f"; {r['round_trips_per_message']} round trips/message" if "round_trips_per_message" in r else "")
    met = {True: "yes", False: "**no**", None: "—"}[r["met"]]
    return (f"| {r['what']} | {now} | {cpu} | {r['floor_ms'] if r['floor_ms'] is not None else '—'} | {floor} | "
            f"{r['ratio'] if r['ratio'] is not None else '—'} | {r['target']} | {met} |")


def with_parts(block: str, result: dict[str, Any], parts: set[str]) -> str:
    """The README's table with only the rows of `parts` replaced by `result`'s (in place; new ones
    at the end of the table) and a note of when those were measured: the other rows stay as they
    were measured, e.g. by another run of the other parts."""
    rows = {r["what"]: row_line(r) for r in result["rows"] if r.get("part") in parts}
    label = ",".join(sorted(parts))
    note = (f"Rows of `--parts {label}`: measured on {result['date']} ({result['machine']}; load average "
            f"{result.get('load_avg_1min_at_start', '?')} at the start, {result['load_avg_1min_at_end']} at the end) by "
            f"`python benchmarks/floors.py --parts {label}`, written here with `--readme --parts {label}`.")
    lines = [line for line in block.rstrip("\n").split("\n") if not line.startswith(f"Rows of `--parts {label}`")]
    while lines and not lines[-1].strip():
        lines.pop()
    last = max((i for i, line in enumerate(lines) if line.startswith("|")), default=len(lines) - 1)
    out = []
    for i, line in enumerate(lines):
        what = line.split("|")[1].strip() if line.startswith("| ") else None
        out.append(rows.pop(what) if what in rows else line)
        if i == last:
            out += list(rows.values())
    notes = out[last + 1:]
    return "\n".join(out[:last + 1]) + "\n\n" + "\n".join([*[n for n in notes if n.strip()], note]) + "\n"


def write_readme(parts: set[str] | None = None) -> int:
    """Write the last results into README.md: the whole table, or with `parts` only their rows."""
    if not OUT.exists():
        print("no results: run python benchmarks/floors.py first", file=sys.stderr)
        return 1
    text = README.read_text("utf-8")
    if MARKERS[0] not in text:
        print(f"README.md has no {MARKERS[0].strip()} block", file=sys.stderr)
        return 1
    start, end = text.index(MARKERS[0]) + len(MARKERS[0]), text.index(MARKERS[1])
    result = json.loads(OUT.read_text("utf-8"))
    if parts is not None and not any(r.get("part") in parts for r in result["rows"]):
        print(f"{OUT} has no rows of {','.join(sorted(parts))}: run python benchmarks/floors.py --parts ... first",
              file=sys.stderr)
        return 1
    block = table(result) if parts is None else with_parts(text[start:end], result, parts)
    README.write_text(text[:start] + block + text[end:], "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
