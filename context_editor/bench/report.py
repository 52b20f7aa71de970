"""Benchmark outputs: `results.json` (numbers), `report.md` (tables for the README), a PNG plot.

The plot needs matplotlib (the optional `bench` extra); without it the step is skipped with a
message and everything else is still written.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..domain.nermodel import model_info, size_bytes
from .metrics import DomainScore, median, percentile
from .runner import Harness, TurnRow
from .speed import ScalingResult

CONTEXTS = ("full_history", "window_5", "window_10", "window_equal_tokens", "editor")
LATE_TURN = 20
TURN_BUCKETS = ((0, 10), (10, 20), (20, 40), (40, None))  # utterance index ranges: coverage per stage of a dialogue


def _coverage(rows: list[TurnRow], key: str) -> float:
    gold = sum(r.gold_values for r in rows)
    return round(sum(r.covered[key] for r in rows) / gold, 4) if gold else 0.0


def _buckets(rows: list[TurnRow]) -> dict[str, dict[str, Any]]:
    """Median tokens and coverage of every context per range of turns."""
    out = {}
    for lo, hi in TURN_BUCKETS:
        part = [r for r in rows if r.turn >= lo and (hi is None or r.turn < hi)]
        if part:
            out[f"{lo}-{hi - 1}" if hi else f"{lo}+"] = {
                "turns": len(part), "tokens_median": {k: median([r.tokens[k] for r in part]) for k in CONTEXTS},
                "coverage": {k: _coverage(part, k) for k in CONTEXTS}}
    return out


def _top(errors: dict[str, int], n: int) -> dict[str, int]:
    return dict(sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))[:n])


def summarise(harness: Harness, scaling: ScalingResult, seconds: float, config: dict[str, Any]) -> dict[str, Any]:
    """Every number of one run, in the documented `results.json` shape."""
    total = DomainScore()
    for s in harness.scores.values():
        total.merge(s)
    overall = total.summary()
    rows, late = harness.rows, [r for r in harness.rows if r.turn >= LATE_TURN]
    errors = {f"{d}.{k}": v for d, s in harness.scores.items() for k, v in s.errors.items()}
    ingest_s = sum(harness.ingest_ms) / 1000
    return {
        "dataset": harness.ds.name,
        "dialogues": len(harness.ds.dialogues),
        "turns": len(rows),
        "frames": overall["frames"],
        "joint_goal_accuracy": overall["joint_goal_accuracy"],
        # not the score: what JGA would be if a match with the value's source text also counted
        "joint_goal_accuracy_text_credited": overall["joint_goal_accuracy_text_credited"],
        "turn_joint_goal_accuracy": round(sum(harness.turn_joint) / len(harness.turn_joint), 4) if harness.turn_joint else 0.0,
        "slot_precision": overall["slot_precision"],
        "slot_recall": overall["slot_recall"],
        "slot_f1": overall["slot_f1"],
        "per_domain": {d: {**harness.scores[d].summary(), "top_errors": _top(harness.scores[d].errors, 6)}
                       for d in sorted(harness.scores)},
        "error_classes": _top(errors, 15),
        "tokens_median": {k: median([r.tokens[k] for r in rows]) for k in CONTEXTS},
        "coverage": {k: _coverage(rows, k) for k in CONTEXTS},
        f"turns_at_{LATE_TURN}": len(late),
        f"tokens_median_at_{LATE_TURN}": {k: median([r.tokens[k] for r in late]) for k in CONTEXTS},
        f"coverage_at_{LATE_TURN}": {k: _coverage(late, k) for k in CONTEXTS},
        "by_turn_bucket": _buckets(rows),
        "ingest_ms_p50": round(percentile(harness.ingest_ms, 50), 4),
        "ingest_ms_p99": round(percentile(harness.ingest_ms, 99), 4),
        "render_ms_p50": round(percentile(harness.render_ms, 50), 4),
        "messages_per_s": round(len(harness.ingest_ms) / ingest_s, 1) if ingest_s else 0.0,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "scaling_ratio": scaling.summary()["scaling_ratio"],
        "scaling": scaling.summary(),
        "wall_seconds": round(seconds, 1),
        "config": config,
    }


def ablation_summary(harness: Harness) -> dict[str, Any]:
    """The accuracy and ingest cost of one run of the ablation, overall and per domain."""
    total = DomainScore()
    for s in harness.scores.values():
        total.merge(s)
    return {**total.summary(),
            "turn_joint_goal_accuracy": round(sum(harness.turn_joint) / len(harness.turn_joint), 4) if harness.turn_joint else 0.0,
            "ingest_ms_p50": round(percentile(harness.ingest_ms, 50), 4), "ingest_ms_p99": round(percentile(harness.ingest_ms, 99), 4),
            "per_domain": {d: harness.scores[d].summary() for d in sorted(harness.scores)}}


_LOAD_AND_TIME = """
import json, sys, time
from context_editor.domain.nermodel import model_info
from context_editor.extract.ner import load_trained, scored_spans
model, texts = model_info(sys.argv[1]), json.loads(sys.stdin.read())
t, c = time.perf_counter(), time.process_time()
load_trained(model)
load, load_cpu = time.perf_counter() - t, time.process_time() - c
scored_spans(model, "warm up")
wall, cpu = time.perf_counter(), time.process_time()
for text in texts:
    scored_spans(model, text)
n = max(len(texts), 1)
print(json.dumps([load, load_cpu, (time.perf_counter() - wall) * 1000 / n, (time.process_time() - cpu) * 1000 / n]))
"""


def ner_model_summary(model_dir: str, texts: list[str]) -> dict[str, Any]:
    """The model's card facts, its load time in a fresh interpreter (importing spaCy included:
    what a process pays the first time a domain needs the model), and its cost per message on
    `texts` (distinct utterances of the run), wall and CPU time: on a shared machine the wall
    time of a run measures the queue for the CPU as much as the model."""
    info = model_info(model_dir)
    out = subprocess.run([sys.executable, "-c", _LOAD_AND_TIME, str(info.path)], input=json.dumps(texts), capture_output=True,
                         text=True, check=True)
    load, load_cpu, wall_ms, cpu_ms = json.loads(out.stdout)
    return {"path": str(info.path), "name": info.name, "hash": info.hash, "labels": list(info.labels),
            "size_bytes": size_bytes(info.path), "load_seconds": round(load, 3), "load_cpu_seconds": round(load_cpu, 3),
            "messages_timed": len(texts),
            "model_ms_per_message_wall": round(wall_ms, 3), "model_ms_per_message_cpu": round(cpu_ms, 3)}


def _table(rows: list[tuple[Any, ...]]) -> str:
    head, *body = rows
    lines = ["| " + " | ".join(map(str, head)) + " |", "|" + "---|" * len(head)]
    return "\n".join([*lines, *("| " + " | ".join(map(str, r)) + " |" for r in body)])


def markdown(results: dict[str, Any]) -> str:
    """The README table: accuracy, context size and coverage, speed; then per domain."""
    r = results
    late = f"at_{LATE_TURN}"
    ctx = [("context", "median tokens", "gold values contained", f"median tokens (turn ≥ {LATE_TURN})",
            f"contained (turn ≥ {LATE_TURN})")]
    ctx += [(k, r["tokens_median"][k], f"{r['coverage'][k]:.1%}", r[f"tokens_median_{late}"][k], f"{r[f'coverage_{late}'][k]:.1%}")
            for k in CONTEXTS]
    head = [("metric", "value"),
            ("dialogues / scored user turns / frames", f"{r['dialogues']} / {r['turns']} / {r['frames']}"),
            ("joint goal accuracy (per frame)", f"{r['joint_goal_accuracy']:.3f}"),
            ("joint goal accuracy (per turn, all domains)", f"{r['turn_joint_goal_accuracy']:.3f}"),
            ("not the score: JGA if a match with the source text also counted",
             f"{r['joint_goal_accuracy_text_credited']:.3f}"),
            ("slot precision / recall / F1", f"{r['slot_precision']:.3f} / {r['slot_recall']:.3f} / {r['slot_f1']:.3f}"),
            ("ingest ms p50 / p99", f"{r['ingest_ms_p50']:.2f} / {r['ingest_ms_p99']:.2f}"),
            ("render ms p50", f"{r['render_ms_p50']:.2f}"),
            ("messages/s (one core)", r["messages_per_s"]),
            ("peak RSS MB", r["peak_rss_mb"]),
            (f"scaling_ratio (rounds {r['scaling']['late_rounds']} vs {r['scaling']['early_rounds']}, {r['scaling']['domain']})",
             r["scaling_ratio"]),
            ("ms/message, same 100 rounds in each cycle of the scaling run", " ".join(map(str, r["scaling"]["same_window_each_cycle_ms"])))]
    dom = [("domain", "frames", "JGA", "P", "R", "F1", "largest errors")]
    dom += [(d, s["frames"], f"{s['joint_goal_accuracy']:.3f}", f"{s['slot_precision']:.3f}", f"{s['slot_recall']:.3f}",
             f"{s['slot_f1']:.3f}", ", ".join(f"{k} {v}" for k, v in list(s["top_errors"].items())[:3]))
            for d, s in r["per_domain"].items()]
    buckets = [("turns", "scored", *(f"{k}: tokens / contained" for k in CONTEXTS))]
    buckets += [(name, b["turns"], *(f"{b['tokens_median'][k]:.0f} / {b['coverage'][k]:.1%}" for k in CONTEXTS))
                for name, b in r.get("by_turn_bucket", {}).items()]
    parts = [f"## {r['dataset']}", _table(head), _table(ctx), _table(buckets), _table(dom)]
    if r.get("ablation"):
        parts += _ablation_tables(r["ablation"])
    return "\n\n".join(parts) + "\n"


def _ablation_tables(ab: dict[str, Any]) -> list[str]:
    m = ab["model"]
    modes = ab["modes"]
    head = [("extraction", "JGA per frame", "JGA per turn", "slot P / R / F1", "ingest ms p50 / p99")]
    head += [(mode, f"{s['joint_goal_accuracy']:.3f}", f"{s['turn_joint_goal_accuracy']:.3f}",
              f"{s['slot_precision']:.3f} / {s['slot_recall']:.3f} / {s['slot_f1']:.3f}",
              f"{s['ingest_ms_p50']:.2f} / {s['ingest_ms_p99']:.2f}") for mode, s in modes.items()]
    domains = sorted({d for s in modes.values() for d in s["per_domain"]})
    dom = [("domain (JGA)", *modes)]
    dom += [(d, *(f"{s['per_domain'][d]['joint_goal_accuracy']:.3f}" if d in s["per_domain"] else "—" for s in modes.values()))
            for d in domains]
    note = (f"NER model `{m['name']}` (sha256 `{m['hash'][:12]}`), {m['size_bytes'] / 1e6:.1f} MB, "
            f"cold load {m['load_seconds']:.2f} s wall, {m.get('load_cpu_seconds', 0):.2f} s CPU (import spaCy + load, as a domain loads it); the model alone on {m['messages_timed']} utterances: "
            f"{m['model_ms_per_message_cpu']:.2f} ms CPU, {m['model_ms_per_message_wall']:.2f} ms wall per message.")
    return ["### Ablation: rules only / NER only / both", note, _table(head), _table(dom)]


def plot(rows: list[TurnRow], scaling: ScalingResult, path: Path) -> bool:
    """Tokens per context vs turn, and per-message latency vs round. False when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import ScalarFormatter
    except ImportError:
        print('plot skipped: matplotlib is not installed (fix: pip install "context-editor[bench]")', file=sys.stderr)
        return False
    by_turn: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        for k in CONTEXTS:
            by_turn[r.turn][k].append(r.tokens[k])
    turns = sorted(by_turn)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    for k in CONTEXTS:
        left.plot(turns, [median([float(n) for n in by_turn[t][k]]) for t in turns], label=k, linewidth=2 if k == "editor" else 1.2)
    left.set(xlabel="turn (utterance index)", ylabel="tokens (o200k_base, median)", title="context size vs turn")
    left.legend()
    per_round = scaling.per_round
    rounds = sorted(per_round)
    right.scatter(rounds, [per_round[x] for x in rounds], s=1, alpha=0.25, label="mean per message, each round")
    buckets = range(0, scaling.rounds, 100)
    right.plot([b + 50 for b in buckets], [scaling.window(b, b + 99) for b in buckets], color="black", label="median of 100 rounds")
    right.set(xlabel="round", ylabel="ms per message", title=f"ingest latency vs round ({scaling.domain})", yscale="log")
    right.yaxis.set_major_formatter(ScalarFormatter())
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_outputs(results: dict[str, Any], harness: Harness, scaling: ScalingResult, out_dir: Path) -> list[Path]:
    """results.json, report.md and the plot into `out_dir`; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "results.json", out_dir / "report.md"]
    written[0].write_text(json.dumps(results, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    written[1].write_text(markdown(results), encoding="utf-8")
    png = out_dir / f"{results['dataset']}.png"
    if plot(harness.rows, scaling, png):
        written.append(png)
    return written
