"""Does a trained NER model help the bundled domains? Per-field P/R on their golden conversations,
rules alone vs rules + model, for every field whose kind of value a model has learned.

    python benchmarks/ner_bundled.py --model benchmarks/out/models/sgd-en [--model benchmarks/out/models/crosswoz-zh]

For each bundled domain (ecommerce, travel, finance) each field gets the label of its kind —
read from its name and description by the same `value_kind` the importers and `train ner` use —
when a given model has that label (or its kind), so nothing here is chosen per field by hand.
Scoring is extraction_eval.py's (final state against each case's expected state,
tests/golden/<domain>/*.yaml). The bundled domains' golden conversations carry no span annotations,
so they are test data here, never training data. Writes benchmarks/out/ner_bundled.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from context_editor import ContextEditor  # noqa: E402
from context_editor.domain import load_domain  # noqa: E402
from context_editor.domain.kinds import served_label, value_kind  # noqa: E402
from context_editor.domain.model import domain_from_source  # noqa: E402
from context_editor.domain.nermodel import STORED_KEY, configured_models, model_info, stored_models  # noqa: E402
from context_editor.domaintest import Counts  # noqa: E402
from extraction_eval import all_goldens, final_state  # noqa: E402  (the golden cases, read one way)

OUT = ROOT / "benchmarks" / "out" / "ner_bundled.json"
DOMAINS = ("ecommerce", "travel", "finance")


def with_models(name: str, model_dirs: list[Path]):
    """The bundled domain with `ner:` naming the models and each field opted into its kind."""
    domain = load_domain(name)
    source = copy.deepcopy(domain.source)
    infos = [model_info(p) for p in model_dirs]
    labels = [label for m in infos for label in m.labels]
    siblings = [(n, f.description) for n, f in domain.fields.items()]
    opted = {}
    for n, spec in domain.fields.items():
        if "user" not in spec.sources:
            continue
        label = served_label(value_kind(n, spec.description, siblings), labels)
        if label:
            source["fields"][n]["extract"] = [*source["fields"][n].get("extract", []), f"ner.{label}"]
            opted[n] = label
    source["ner"] = {m.lang: str(m.path) for m in infos}
    source[STORED_KEY] = stored_models(configured_models(source["ner"], ROOT))
    return domain_from_source(source, f"{name}+ner"), opted


def score(goldens, domain) -> dict:
    table: dict = defaultdict(Counts)
    for g in goldens:
        state = final_state(g, ContextEditor(domain, "memory://"))
        for n in domain.fields:
            table[(g.lang, n)].add(g.expect.get(n), state.get(n))
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", type=Path, required=True, help="a model directory (repeatable: en and zh)")
    args = ap.parse_args()
    goldens = all_goldens()
    report = {}
    for name in DOMAINS:
        mine = [g for g in goldens if g.domain == name]
        ner_domain, opted = with_models(name, args.model)
        before, after = score(mine, load_domain(name)), score(mine, ner_domain)
        rows = {}
        for (lang, n) in sorted(before):
            if n not in opted:
                continue
            b, a = before[(lang, n)], after[(lang, n)]
            if b.tp + b.fp + b.fn + a.tp + a.fp + a.fn == 0:
                continue
            rows[f"{lang}/{n}"] = {"label": opted[n], "rules": {"tp": b.tp, "fp": b.fp, "fn": b.fn},
                                   "rules+ner": {"tp": a.tp, "fp": a.fp, "fn": a.fn}}
        report[name] = {"conversations": len(mine), "opted_in": opted, "fields": rows}
        print(f"\n{name}: {len(mine)} golden conversations; fields opted in: {opted or 'none'}")
        for key, r in rows.items():
            print(f"  {key} ({r['label']}): rules TP/FP/FN {r['rules']['tp']}/{r['rules']['fp']}/{r['rules']['fn']}"
                  f" -> with model {r['rules+ner']['tp']}/{r['rules+ner']['fp']}/{r['rules+ner']['fn']}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"models": [str(p) for p in args.model], "domains": report}, indent=2, ensure_ascii=False) + "\n",
                   encoding="utf-8")
    print(f"\nwrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
