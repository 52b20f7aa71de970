"""Write the README's "Results" section from the benchmark outputs.

    python benchmarks/readme_results.py

Reads benchmarks/out/{sgd,crosswoz}/results.json (from `context-editor bench`) and
benchmarks/out/render_speed.json (from benchmarks/render_speed.py) and replaces the text
between the README's `<!-- results:start -->` and `<!-- results:end -->` markers, so the
published numbers are always the measured ones. The prose around the tables (split, --limit,
core pinning, machine, date) is read from each run's `config` too, never written by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
START, END = "<!-- results:start -->", "<!-- results:end -->"
CONTEXTS = ("full_history", "window_5", "window_10", "editor")


# Published figures, each on the split its paper used: compare like with like, or say it.
REFERENCES = {
    "SGD": ("the baseline of the SGD paper (DSTC8)", 0.25, "test"),
    "CrossWOZ": ("the TRADE baseline of the CrossWOZ paper", 0.36, "test"),
}
LABELS = {"sgd": "SGD", "crosswoz": "CrossWOZ"}


def measured(name: str, r: dict[str, Any]) -> str:
    """What one run measured, from its own config: split, limit, core pinning."""
    c = r["config"]
    what = (f"the full {c['split']} split ({r['dialogues']:,} dialogues)" if c.get("limit") is None
            else f"the first {r['dialogues']:,} dialogues of the {c['split']} split (--limit {c['limit']})")
    cores = c["cpu_affinity"]
    pinned = f"pinned to core {cores[0]}" if len(cores) == 1 else f"not pinned (cores {', '.join(map(str, cores))})"
    commit = f", commit {c['commit']}" if c.get("commit") else ""
    return f"{name}: {what}, {pinned}, on {c['date']}{commit}"


def reference(name: str, r: dict[str, Any]) -> str:
    who, jga, split = REFERENCES[name]
    ours = r["config"]["split"]
    same = "the same split" if ours == split else f"the {split} split, while this run is on the {ours} split: not a like-for-like comparison"
    return f"{name}: {who} reports ≈ {jga:.2f} JGA on {same}"


def reproduce(name: str, key: str, r: dict[str, Any]) -> str:
    c = r["config"]
    pin = f"taskset -c {c['cpu_affinity'][0]} " if len(c["cpu_affinity"]) == 1 else ""
    limit = f" --limit {c['limit']}" if c.get("limit") is not None else ""
    return f"{pin}context-editor bench {key} --data {c['data']}{limit} --out benchmarks/out/{key}"


def dataset_table(results: dict[str, dict[str, Any]]) -> list[str]:
    names = list(results)
    rows = [
        ("dialogues / scored user turns", lambda r: f"{r['dialogues']:,} / {r['turns']:,}"),
        ("joint goal accuracy", lambda r: f"{r['joint_goal_accuracy']:.3f}"),
        ("not the score: JGA if the source text also counted", lambda r: f"{r['joint_goal_accuracy_text_credited']:.3f}"),
        ("slot precision / recall / F1", lambda r: f"{r['slot_precision']:.3f} / {r['slot_recall']:.3f} / {r['slot_f1']:.3f}"),
        *[(f"median tokens: {c.replace('_', ' ')}", lambda r, c=c: f"{r['tokens_median'][c]:.0f} ({r['coverage'][c]:.0%} of gold values)")
          for c in CONTEXTS],
        *[(f"turn ≥ 20: {c.replace('_', ' ')}", lambda r, c=c: f"{r['tokens_median_at_20'][c]:.0f} ({r['coverage_at_20'][c]:.0%})")
          for c in CONTEXTS],
        ("ingest ms p50 / p99 (wall time)", lambda r: f"{r['ingest_ms_p50']:.2f} / {r['ingest_ms_p99']:.2f}"),
        ("render ms p50 (wall time)", lambda r: f"{r['render_ms_p50']:.2f}"),
        ("messages/s (one process, wall time)", lambda r: f"{r['messages_per_s']:,.0f}"),
        ("peak RSS MB", lambda r: f"{r['peak_rss_mb']:.0f}"),
        ("scaling ratio (CPU ms per message, late vs early rounds of one session)",
         lambda r: f"{r['scaling_ratio']:.2f} (rounds {r['scaling']['late_rounds']} vs {r['scaling']['early_rounds']})"),
    ]
    lines = ["| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [f"| {label} | " + " | ".join(fmt(results[n]) for n in names) + " |" for label, fmt in rows]
    return lines


def render_table(rows: list[dict]) -> list[str]:
    lines = ["| domain | action | messages | render ms p50 / p99 (CPU p50) | after a new message: p50 / p99 (CPU p50) "
             "| context tokens | full history tokens | ratio |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['domain']} | {r['action']} | {r['messages']:,} | {r['render_ms_p50']} / {r['render_ms_p99']} "
              f"({r['render_cpu_ms_p50']}) | {r['fresh_ms_p50']} / {r['fresh_ms_p99']} ({r['fresh_cpu_ms_p50']}) | "
              f"{r['context_tokens']} | {r['full_history_tokens']} | {r['ratio']:.1%} |" for r in rows]
    return lines


def section() -> str:
    runs = {key: json.loads((OUT / key / "results.json").read_text()) for key in LABELS if (OUT / key / "results.json").exists()}
    if not runs:
        sys.exit("no benchmarks/out/*/results.json: run `context-editor bench` first (see benchmarks/README.md)")
    results = {LABELS[key]: r for key, r in runs.items()}
    machines = sorted({r["config"]["machine"] for r in results.values()})
    parts = [
        f"Measured on {' and '.join(machines)}, shared with other work while it ran (latencies are noisy).",
        *(f"- {measured(name, r)}." for name, r in results.items()),
        "",
        "The editor context is each imported domain's general `track` action. JGA scores the editor's values",
        "only; the row below it is what JGA would be if a match with a value's source text also counted.",
        "Published reference points:",
        *(f"- {reference(name, r)}." for name, r in results.items()),
        "",
        "Scoring details: [benchmarks/README.md](benchmarks/README.md).",
        "",
        *dataset_table(results),
    ]
    speed = OUT / "render_speed.json"
    if speed.exists():
        parts += ["", "Bundled domains, one long session each (`python benchmarks/render_speed.py`):", "",
                  *render_table(json.loads(speed.read_text()))]
    parts += ["", "Reproduce:", "", "```bash", *(reproduce(LABELS[key], key, r) for key, r in runs.items()),
              "python benchmarks/render_speed.py && python benchmarks/readme_results.py", "```"]
    return "\n".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.parse_args()
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        sys.exit(f"README.md has no {START} … {END} markers")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{START}\n{section()}\n{END}{tail}", encoding="utf-8")
    print(f"updated the Results section of {readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
