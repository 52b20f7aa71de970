"""Per-field precision and recall of extraction on the golden conversations, zh and en apart,
and what extraction costs per message.

    python benchmarks/extraction_eval.py [--repeats 5]

Scoring (final state of each conversation against its `expect.state`, context_editor/domaintest.py,
the code `context-editor test` runs):
a field with the expected value is a true positive; a field with another value is a false
positive (and a false negative when a value was expected); an expected field left unset is a
false negative. Known misses (`xfail` in the files) count as misses — they are what the numbers
are for.

Cost: `Extractor.extract` alone (rules, enums, dates, numbers; no store, no validation) timed on
every message of every golden conversation, p50 and p99 over all calls. "with NER" runs the same
messages through the travel domain with `ner.GPE` added to origin and destination; spaCy then
runs on the English messages of the roles that may set those fields, so its cost is also shown
on English user messages alone. Its effect on those two fields is scored too.
Writes benchmarks/out/extraction_eval.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from context_editor import ContextEditor  # noqa: E402
from context_editor.domain import load_domain  # noqa: E402
from context_editor.domain.model import domain_from_source  # noqa: E402
from context_editor.extract import Extractor, detect_language  # noqa: E402
from context_editor.model import Message  # noqa: E402
from context_editor.domaintest import Case, Counts, load_cases  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "extraction_eval.json"
NER_FIELDS = ("origin", "destination")
DOMAINS = ("ecommerce", "travel", "finance")


class Golden:
    """A golden case with the domain its directory names."""

    def __init__(self, domain: str, case: Case):
        self.domain, self.case = domain, case
        self.id, self.lang, self.messages = case.id, case.lang, case.messages
        self.expect = case.expect.state or {}


def all_goldens() -> list[Golden]:
    return [Golden(d, c) for d in DOMAINS for c in load_cases(ROOT / "tests" / "golden" / d)]


def final_state(g: Golden, editor: ContextEditor) -> dict:
    return editor.ingest(g.id, g.messages).values()


def score(goldens, editor_for) -> dict:
    """(domain, lang) -> field -> Counts."""
    table: dict = defaultdict(lambda: defaultdict(Counts))
    for g in goldens:
        state = final_state(g, editor_for(g))
        for name in editor_for(g).domain.fields:
            table[(g.domain, g.lang)][name].add(g.expect.get(name), state.get(name))
    return table


def fmt(x: float | None) -> str:
    return "  -  " if x is None else f"{x:.2f}"


def print_tables(table: dict) -> None:
    for (domain, lang) in sorted(table):
        rows = table[(domain, lang)]
        total = Counts(sum(c.tp for c in rows.values()), sum(c.fp for c in rows.values()), sum(c.fn for c in rows.values()))
        print(f"\n{domain} / {lang}  (micro P {fmt(total.precision)}  R {fmt(total.recall)})")
        print("| field | TP | FP | FN | precision | recall |\n|---|---|---|---|---|---|")
        for name, c in rows.items():
            if c.tp + c.fp + c.fn:
                print(f"| {name} | {c.tp} | {c.fp} | {c.fn} | {fmt(c.precision)} | {fmt(c.recall)} |")


def with_ner(domain_name: str):
    """The bundled domain with `ner.GPE` added to origin and destination."""
    source = copy.deepcopy(load_domain(domain_name).source)
    for name in NER_FIELDS:
        source["fields"][name]["extract"] = [*source["fields"][name].get("extract", []), "ner.GPE"]
    return domain_from_source(source, f"{domain_name}+ner")


def messages(goldens) -> list[tuple[str, Message]]:
    out = []
    for g in goldens:
        rnd = 0
        for i, m in enumerate(g.messages):
            rnd += m["role"] == "user"
            out.append((g.domain, Message(session=g.id, index=i, round=rnd, role=m["role"], content=m["content"],
                                          timestamp=m.get("timestamp"))))
    return out


def cost(extractors: dict, msgs: list[tuple[str, Message]], repeats: int) -> dict:
    """p50/p99 (microseconds) of one extract call, after one warm-up pass."""
    timings = []
    for rep in range(repeats + 1):
        for domain, msg in msgs:
            ex = extractors.get(domain)
            if ex is None:
                continue
            now = msg.time()
            t0 = time.perf_counter_ns()
            ex.extract(msg, now)
            if rep:
                timings.append((time.perf_counter_ns() - t0) / 1000)
    timings.sort()
    return {"calls": len(timings), "p50_us": round(statistics.median(timings), 1),
            "p99_us": round(timings[int(0.99 * (len(timings) - 1))], 1), "mean_us": round(statistics.fmean(timings), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    goldens = all_goldens()
    table = score(goldens, lambda g: ContextEditor(g.domain, "memory://"))
    print(f"{len(goldens)} golden conversations, {sum(len(g.messages) for g in goldens)} messages")
    print_tables(table)

    travel = [g for g in goldens if g.domain == "travel"]
    ner_domain = with_ner("travel")
    ner_table = score(travel, lambda g: ContextEditor(ner_domain, "memory://"))
    print("\ntravel with ner.GPE on origin and destination:")
    for lang in ("zh", "en"):
        for name in NER_FIELDS:
            before, after = table[("travel", lang)][name], ner_table[("travel", lang)][name]
            print(f"  {lang} {name}: P {fmt(before.precision)} -> {fmt(after.precision)}, R {fmt(before.recall)} -> {fmt(after.recall)}")

    msgs = messages(goldens)
    rules = cost({d: Extractor(load_domain(d)) for d in ("ecommerce", "travel", "finance")}, msgs, args.repeats)
    travel_msgs = [(d, m) for d, m in msgs if d == "travel"]
    travel_rules = cost({"travel": Extractor(load_domain("travel"))}, travel_msgs, args.repeats)
    travel_ner = cost({"travel": Extractor(ner_domain)}, travel_msgs, args.repeats)
    en_user = [(d, m) for d, m in travel_msgs if m.role == "user" and detect_language(m.content) == "en"]
    en_rules = cost({"travel": Extractor(load_domain("travel"))}, en_user, args.repeats)
    en_ner = cost({"travel": Extractor(ner_domain)}, en_user, args.repeats)
    print("\nextraction cost per message (Extractor.extract):")
    print(f"  rules + dates, all domains: p50 {rules['p50_us']} us, p99 {rules['p99_us']} us ({rules['calls']} calls)")
    print(f"  travel, rules + dates:      p50 {travel_rules['p50_us']} us, p99 {travel_rules['p99_us']} us")
    print(f"  travel, with NER:           p50 {travel_ner['p50_us']} us, p99 {travel_ner['p99_us']} us")
    print(f"  travel, English user messages only ({en_rules['calls'] // args.repeats}): "
          f"rules p50 {en_rules['p50_us']} / p99 {en_rules['p99_us']} us; with NER p50 {en_ner['p50_us']} / p99 {en_ner['p99_us']} us")

    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({
        "conversations": len(goldens),
        "fields": {f"{d}/{lang}": {name: {"tp": c.tp, "fp": c.fp, "fn": c.fn, "precision": c.precision, "recall": c.recall}
                                   for name, c in rows.items()} for (d, lang), rows in sorted(table.items())},
        "ner_travel": {f"{lang}/{name}": {"precision": ner_table[("travel", lang)][name].precision,
                                          "recall": ner_table[("travel", lang)][name].recall}
                       for lang in ("zh", "en") for name in NER_FIELDS},
        "cost": {"rules_all_domains": rules, "travel_rules": travel_rules, "travel_with_ner": travel_ner,
                 "travel_en_user_rules": en_rules, "travel_en_user_with_ner": en_ner},
    }, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
