"""Write the README's "Results" section from the benchmark outputs.

    python benchmarks/readme_results.py [--machine "2 cores, …"]

Reads benchmarks/out/{sgd,crosswoz}/results.json (from `context-editor bench`) and
benchmarks/out/render_speed.json (from benchmarks/render_speed.py) and replaces the text
between the README's `<!-- results:start -->` and `<!-- results:end -->` markers, so the
published numbers are always the measured ones.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
START, END = "<!-- results:start -->", "<!-- results:end -->"
CONTEXTS = ("full_history", "window_5", "window_10", "editor")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
        cpu = model
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, {platform.system()}"


def dataset_table(results: dict[str, dict]) -> list[str]:
    names = list(results)
    rows = [
        ("dialogues / scored user turns", lambda r: f"{r['dialogues']:,} / {r['turns']:,}"),
        ("joint goal accuracy", lambda r: f"{r['joint_goal_accuracy']:.3f}"),
        ("slot precision / recall / F1", lambda r: f"{r['slot_precision']:.3f} / {r['slot_recall']:.3f} / {r['slot_f1']:.3f}"),
        *[(f"median tokens: {c.replace('_', ' ')}", lambda r, c=c: f"{r['tokens_median'][c]:.0f} ({r['coverage'][c]:.0%} of gold values)")
          for c in CONTEXTS],
        *[(f"turn ≥ 20: {c.replace('_', ' ')}", lambda r, c=c: f"{r['tokens_median_at_20'][c]:.0f} ({r['coverage_at_20'][c]:.0%})")
          for c in CONTEXTS],
        ("ingest ms p50 / p99", lambda r: f"{r['ingest_ms_p50']:.2f} / {r['ingest_ms_p99']:.2f}"),
        ("render ms p50", lambda r: f"{r['render_ms_p50']:.2f}"),
        ("messages/s (one core)", lambda r: f"{r['messages_per_s']:,.0f}"),
        ("peak RSS MB", lambda r: f"{r['peak_rss_mb']:.0f}"),
        ("scaling ratio (rounds 9,900–10,000 vs 10–110)", lambda r: f"{r['scaling_ratio']:.2f}"),
    ]
    lines = ["| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [f"| {label} | " + " | ".join(fmt(results[n]) for n in names) + " |" for label, fmt in rows]
    return lines


def render_table(rows: list[dict]) -> list[str]:
    lines = ["| domain | action | render ms p50 / p99 | context tokens | full history tokens | ratio |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['domain']} | {r['action']} | {r['render_ms_p50']} / {r['render_ms_p99']} | {r['context_tokens']} | "
              f"{r['full_history_tokens']} | {r['ratio']:.1%} |" for r in rows]
    return lines


def section(machine_text: str) -> str:
    results = {name.upper() if name == "sgd" else "CrossWOZ": json.loads((OUT / name / "results.json").read_text())
               for name in ("sgd", "crosswoz") if (OUT / name / "results.json").exists()}
    if not results:
        sys.exit("no benchmarks/out/*/results.json: run `context-editor bench` first (see benchmarks/README.md)")
    parts = [
        f"Measured on {date.today().isoformat()} on {machine_text}; each dataset run pinned to one core.",
        "SGD: the full dev split; CrossWOZ: the full validation split. The editor context is each imported",
        "domain's general `track` action. Published reference points: SGD baseline ≈ 0.25 JGA (test split),",
        "a neural CrossWOZ baseline ≈ 0.36. Scoring details: [benchmarks/README.md](benchmarks/README.md).",
        "",
        *dataset_table(results),
    ]
    speed = OUT / "render_speed.json"
    if speed.exists():
        parts += ["", "Bundled domains, one long session each (`python benchmarks/render_speed.py`):", "",
                  *render_table(json.loads(speed.read_text()))]
    parts += ["", "Reproduce:", "", "```bash",
              "taskset -c 0 context-editor bench sgd --data ../shared/data/sgd/dev --out benchmarks/out/sgd",
              "taskset -c 1 context-editor bench crosswoz --data ../shared/data/crosswoz/val.json.zip --out benchmarks/out/crosswoz",
              "python benchmarks/render_speed.py && python benchmarks/readme_results.py", "```"]
    return "\n".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--machine", help="describe the machine (default: read from this one)")
    args = ap.parse_args()
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        sys.exit(f"README.md has no {START} … {END} markers")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{START}\n{section(args.machine or machine())}\n{END}{tail}", encoding="utf-8")
    print(f"updated the Results section of {readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
