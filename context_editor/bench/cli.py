"""`context-editor import …` and `context-editor bench …`, added to the main CLI by `register`.

    context-editor import sgd SCHEMA.json[.gz] --out DIR [--ner MODEL_DIR]
    context-editor import crosswoz DATABASE_DIR --out DIR [--ner MODEL_DIR]
    context-editor bench sgd --data SPLIT_DIR [--limit N] [--every K] [--ner MODEL_DIR] --out DIR
    context-editor bench crosswoz --data val.json.zip [--database DIR] [--limit N] [--every K] [--offset N] [--ner MODEL_DIR] --out DIR

A benchmark imports the dataset's schema into OUT/domains (so it measures exactly what the
import command produces), runs every dialogue, then the scaling run, and writes results.json,
report.md and a plot into OUT. Progress goes to stderr, the list of files written to stdout.

With `--ner MODEL_DIR` it is an ablation in one run: the dialogues go through three imports of
the schema, rules only (OUT/domains-rules: no model at all), the model only (OUT/domains-ner:
no rule packs; enum values stay, they are the fields' types) and both (OUT/domains-both, which
the main numbers, the scaling run and the plot then describe); results.json gets an `ablation`
section and the model's cold load time.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import time
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any, TypeAlias

from ..importers import import_crosswoz, import_sgd
from ..importers.common import MINIMAL_ROUNDS
from ..registry import OWN_COMMANDS
from .crosswoz import load_crosswoz
from .dataset import Dataset
from .report import ablation_summary, ner_model_summary, summarise, write_outputs
from .runner import Harness
from .sgd import load_sgd
from .speed import scaling_run

SCALING_ROUNDS = 10_000


# The ablation's runs: import options per mode (the last one is the main run).
ABLATION: tuple[tuple[str, dict[str, Any]], ...] = (("rules", {"generic_ner": False}), ("ner", {"rules": False}), ("both", {}))


def cmd_import(args: argparse.Namespace) -> int:
    importer = import_sgd if args.dataset == "sgd" else import_crosswoz
    for path in importer(args.source, args.out, ner=args.ner):
        print(path)
    return 0


def run_environment() -> dict[str, Any]:
    """Where and when a run happened, so its report says it (pinned or not, which machine)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=10,
                                cwd=Path(__file__).parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"date": date.today().isoformat(), "cpu_affinity": sorted(os.sched_getaffinity(0)), "commit": commit,
            "machine": f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, {platform.system()}"}


def _scaling_input(ds: Dataset, harness: Harness) -> tuple[str, list[tuple[str, str]]]:
    """The domain with the most scored frames, and the utterances of the dialogues it takes part in."""
    domain = max(harness.scores, key=lambda d: harness.scores[d].frames) if harness.scores else next(iter(ds.domain_files))
    utterances = [(u.role, u.text) for d in ds.dialogues if domain in d.domains for u in d.utterances]
    return domain, utterances


MECHANISMS = ("answers", "offers", "no_preference", "envelope", "carry", "activation", "compact", "minimal", "line_numbers",
              "user_clauses")
DIALOGUE_SWITCHES = ("answers", "offers", "no_preference")  # switched off in the domain files; the others are the harness's


def switch_off(ds: Dataset, mechanisms: list[str]) -> None:
    """Write `dialogue: {<mechanism>: false}` into every imported domain (an ablation run); without
    `minimal`, the `track` action is the one before it (`minimal: false`, the latest round loaded
    only); without `line_numbers`, its lines say their "mN" on every line (`line_numbers: all`);
    without `user_clauses`, its user lines in the loaded window stay whole;
    without `compact` as well, it shows its state as <field> elements (`state_lines: false`)."""
    for path in ds.domain_files.values() if "minimal" in mechanisms else ():
        text = path.read_text("utf-8").replace("    minimal: true\n", "    minimal: false\n")
        path.write_text(text.replace(f"    history_rounds: {MINIMAL_ROUNDS}\n", "    history_rounds: 0\n"), "utf-8")
    for path in ds.domain_files.values() if "line_numbers" in mechanisms else ():  # "mN" on every line of it
        path.write_text(path.read_text("utf-8").replace("    minimal: true\n", "    minimal: true\n    line_numbers: all\n"), "utf-8")
    for path in ds.domain_files.values() if "user_clauses" in mechanisms else ():  # user lines verbatim in the window
        path.write_text(path.read_text("utf-8").replace("user_clauses: all", "user_clauses: older"), "utf-8")
    for path in ds.domain_files.values() if "compact" in mechanisms else ():
        path.write_text(path.read_text("utf-8").replace("state_lines: true", "state_lines: false"), "utf-8")
    mechanisms = [m for m in mechanisms if m in DIALOGUE_SWITCHES]
    if not mechanisms:
        return
    line = "dialogue: {" + ", ".join(f"{m}: false" for m in sorted(set(mechanisms))) + "}\n"
    for path in ds.domain_files.values():
        path.write_text(path.read_text("utf-8") + line, "utf-8")


def _harness(ds: Dataset, without: list[str]) -> Harness:
    return Harness(ds, envelope="envelope" not in without, carry="carry" not in without, activation="activation" not in without)


def _load(args: argparse.Namespace, domains_out: Path, **import_options: Any) -> Dataset:
    if args.dataset == "sgd":
        ds = load_sgd(args.data, domains_out, args.limit, **import_options)
    else:
        ds = load_crosswoz(args.data, args.database, domains_out, args.limit, **import_options)
    ds.dialogues = ds.dialogues[args.offset:: args.every]  # a sample across the whole split (SGD files are grouped by service)
    return ds


def _ablation(args: argparse.Namespace, out: Path) -> tuple[Dataset, Harness, dict[str, Any]]:
    """Rules only, model only, both: each a full run; returns the last (both) and every summary."""
    runs: dict[str, Any] = {}
    for mode, options in ABLATION:
        options = options if mode == "rules" else {**options, "ner": args.ner}
        ds = _load(args, out / f"domains-{mode}", **options)
        switch_off(ds, args.without or [])
        harness = _harness(ds, args.without or [])
        harness.run(f"bench {ds.name} [{mode}]")
        runs[mode] = ablation_summary(harness)
        if mode != ABLATION[-1][0]:
            harness.close()
    texts = list(dict.fromkeys(u.text for d in ds.dialogues for u in d.utterances))[:500]
    return ds, harness, {"modes": runs, "model": ner_model_summary(args.ner, texts)}


def cmd_bench(args: argparse.Namespace) -> int:
    out = Path(args.out)
    started = time.monotonic()
    environment = run_environment()  # the code measured is the code at the start (a commit during a long run changes HEAD)
    ablation = None
    if args.ner:
        ds, harness, ablation = _ablation(args, out)
    else:
        ds = _load(args, out / "domains")
        switch_off(ds, args.without or [])
        harness = _harness(ds, args.without or [])
        harness.run(f"bench {ds.name}")
    domain, utterances = _scaling_input(ds, harness)
    harness.close()
    scaling = scaling_run(ds.domain_files[domain], utterances, args.scaling_rounds, ds.now)
    config = {"data": str(args.data), "split": ds.split, "limit": args.limit, "every": args.every, "offset": args.offset,
              "domains_dir": str(ds.domain_files[domain].parent),
              "clock": ds.now.isoformat(), "dialogue_domains": dict(Counter(len(d.domains) for d in ds.dialogues)),
              "ner": str(args.ner) if args.ner else None, "without": sorted(args.without or []), **environment}
    results = summarise(harness, scaling, time.monotonic() - started, config)
    if ablation:
        results["ablation"] = ablation
    for path in write_outputs(results, harness, scaling, out):
        print(path)
    return 0


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def register(subparsers: Subparsers) -> None:
    """Add `import` and `bench` to a CLI's subcommands."""
    register_import(subparsers)
    register_bench(subparsers)


def register_import(subparsers: Subparsers) -> None:
    """The `import` command (registered in the `context_editor.commands` entry-point group)."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = subparsers.add_parser("import", help=OWN_COMMANDS["import"],
                              description="Write one linted domain file per service (SGD) or domain (CrossWOZ).", formatter_class=fmt)
    kinds = p.add_subparsers(dest="dataset", required=True, metavar="DATASET")
    k = kinds.add_parser("sgd", help="SGD schema.json[.gz] -> one domain per service")
    k.add_argument("source", metavar="SCHEMA", help="the split's schema.json or schema.json.gz")
    k = kinds.add_parser("crosswoz", help="CrossWOZ database/ -> five domains with gazetteers")
    k.add_argument("source", metavar="DATABASE_DIR", help="CrossWOZ's database/ directory (attraction_db.json, …)")
    for k in kinds.choices.values():
        k.add_argument("--out", required=True, metavar="DIR", help="directory for the domain files (created if missing)")
        k.add_argument("--ner", metavar="MODEL_DIR", help="a model from `context-editor train ner` for every domain to use")
        k.set_defaults(func=cmd_import)


def register_bench(subparsers: Subparsers) -> None:
    """The `bench` command (registered in the `context_editor.commands` entry-point group)."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = subparsers.add_parser("bench", help=OWN_COMMANDS["bench"],
                              description=__doc__, formatter_class=fmt)
    kinds = p.add_subparsers(dest="dataset", required=True, metavar="DATASET")
    k = kinds.add_parser("sgd", help="SGD split directory (schema + dialogues, gzip or plain JSON)")
    k.add_argument("--data", required=True, metavar="DIR", help="e.g. ../shared/data/sgd/dev")
    k = kinds.add_parser("crosswoz", help="CrossWOZ split (the published .json.zip or plain .json)")
    k.add_argument("--data", required=True, metavar="FILE", help="e.g. ../shared/data/crosswoz/val.json.zip")
    k.add_argument("--database", metavar="DIR", help="CrossWOZ database/ (default: database/ beside --data)")
    for k in kinds.choices.values():
        k.add_argument("--limit", type=int, metavar="N", help="only the first N dialogues")
        k.add_argument("--every", type=int, default=1, metavar="K", help="only every K-th dialogue (a sample of the whole split)")
        k.add_argument("--offset", type=int, default=0, metavar="N",
                       help="start the sample at the N-th dialogue (`--every 2 --offset 1`: the odd-numbered half)")
        k.add_argument("--out", required=True, metavar="DIR", help="directory for results.json, report.md, the plot and domains/")
        k.add_argument("--ner", metavar="MODEL_DIR", help="a trained model: run the ablation rules only / model only / both")
        k.add_argument("--without", action="append", choices=MECHANISMS, metavar="MECHANISM",
                       help="switch a mechanism off, to measure its share: answers, offers, no_preference (in the imported domains), "
                            "envelope (render each frame domain's context alone and add up their tokens), carry (no "
                            "values carried between domains), activation (every domain reads every turn, not only "
                            "the turns the dataset says are its own), compact (the track action's state as <field> "
                            "elements, not lines), minimal (the track action shows the latest round and the summary "
                            "zone, not each value once)")
        k.add_argument("--scaling-rounds", type=int, default=SCALING_ROUNDS, metavar="N",
                       help=f"user rounds fed to one session in the scaling run (default {SCALING_ROUNDS})")
        k.set_defaults(func=cmd_bench)
