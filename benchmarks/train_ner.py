"""Train the benchmark NER models and summarise their cards.

    nice -n 10 python benchmarks/train_ner.py [--data ../shared/data] [--out benchmarks/out/models] [--only sgd|crosswoz] [--subset N] [--table [MODEL…]] [--ablation RESULTS_JSON…]

- `sgd-en`: the whole SGD train split (97 files, ~224,000 turns, ~159,000 slot spans), 2 epochs.
  `--subset N` trains on a deterministic subset of N turns (chosen by hash, all services), one
  epoch, for a machine too busy for the full pass. Measured on SGD dev by `context-editor bench
  sgd --ner`.
- `crosswoz-zh`: the CrossWOZ *validation* split, the only one here. Its numbers on that split
  are therefore measured on the data it was trained on, and must be reported as such.

Each model is trained by the CLI (`context-editor train ner`, so its card records that exact
command), in the background-friendly way: run it under `nice`. `--table` only prints the
markdown table of the existing cards (training time, size, held-out F1) for the README.
The models are rebuilt here, never committed (benchmarks/out/ is ignored).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

MODELS = {
    "sgd": ("sgd-en", ["--format", "sgd", "{data}/sgd/train", "--max-epochs", "2"]),
    "crosswoz": ("crosswoz-zh", ["--format", "crosswoz", "{data}/crosswoz/val.json.zip", "--max-epochs", "6"]),
}


def train(name: str, data: str, out: Path, subset: int | None) -> None:
    model, args = MODELS[name]
    if subset and name == "sgd":
        args = [*args[:-1], "1", "--max-examples", str(subset)]
    cmd = ["context-editor", "train", "ner", *(a.format(data=data) for a in args), "--out", str(out / model)]
    print(" ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True)


def table(out: Path, names: list[str] | None = None) -> str:
    rows = ["| model | data | examples (train / held out) | labels served | held-out P / R / F1 | size | training wall / CPU | epochs |",
            "|---|---|---|---|---|---|---|---|"]
    for model in names or [m for m, _ in MODELS.values()]:
        card_path = out / model / "card.json"
        if not card_path.is_file():
            continue
        c = json.loads(card_path.read_text("utf-8"))
        h, d = c["held_out"], c["data"]
        cal = (c.get("calibration") or {}).get("labels")
        served = f"{sum(1 for x in cal.values() if x['served'])} of {len(c['labels'])}" if cal else f"all {len(c['labels'])} (uncalibrated)"
        cpu = f"{c['training_cpu_seconds'] / 60:.1f} min" if "training_cpu_seconds" in c else "—"
        rows.append(f"| `{model}` | {d['format']} `{Path(d['path']).name}` | {d['train_examples']:,} / {d['held_out_examples']:,} "
                    f"| {served} | {h['p']:.3f} / {h['r']:.3f} / {h['f']:.3f} | {c['size_bytes'] / 1e6:.1f} MB "
                    f"| {c['training_seconds'] / 60:.1f} / {cpu} | {len(c['epochs'])} (best {h.get('epoch')}) |")
    return "\n".join(rows) + "\n"


def ablation(results: list[Path]) -> str:
    """The rules / NER / both rows of `context-editor bench … --ner` runs (their results.json)."""
    rows = ["| run | extraction | JGA per frame | JGA per turn | slot P / R / F1 | ingest ms p50 |", "|---|---|---|---|---|---|"]
    for path in results:
        r = json.loads(path.read_text("utf-8"))
        c, a = r["config"], r["ablation"]
        run = f"{r['dataset']} `{Path(c['data']).name}`, every {c['every']} ({r['dialogues']} dialogues), model `{a['model']['name']}` ({a['model']['hash'][:12]})"
        for mode, m in a["modes"].items():
            rows.append(f"| {run if mode == 'rules' else '…'} | {mode} | {m['joint_goal_accuracy']:.3f} | {m['turn_joint_goal_accuracy']:.3f} "
                        f"| {m['slot_precision']:.3f} / {m['slot_recall']:.3f} / {m['slot_f1']:.3f} | {m['ingest_ms_p50']:.2f} |")
    return "\n".join(rows) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--out", default="benchmarks/out/models", type=Path)
    ap.add_argument("--only", choices=sorted(MODELS))
    ap.add_argument("--table", nargs="*", metavar="MODEL", help="only print the table of the existing cards (these model dirs under --out; default the two above)")
    ap.add_argument("--subset", type=int, metavar="N", help="SGD: a deterministic subset of N turns, 1 epoch (default: every turn, 2 epochs)")
    ap.add_argument("--ablation", nargs="+", type=Path, metavar="RESULTS_JSON",
                    help="only print the ablation table of these `bench … --ner` results")
    args = ap.parse_args()
    if args.ablation:
        print(ablation(args.ablation), end="")
        return 0
    if args.table is None:
        for name in [args.only] if args.only else list(MODELS):
            train(name, args.data, args.out, args.subset)
    print(table(args.out, args.table), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
