"""Our extraction on real Chinese dialogue: the constraints CrossWOZ users state, utterance by utterance.

    python benchmarks/crosswoz_constraints.py [--data /work/shared/data/crosswoz]

CrossWOZ (validation split, 500 dialogues, Apache-2.0) annotates every user utterance with the
dialogue acts it performs. The gold for one utterance is its `Inform` acts on the slots our
extraction covers: price ranges (餐馆 人均消费, 酒店 价格, 景点 门票), ratings (评分), hotel types
(酒店类型), hotel facilities (酒店设施-X = 是) and venue names (名称 of hotels, restaurants and
attractions). The prediction is what `Extractor.extract` finds in that utterance alone with the
domain benchmarks/crosswoz_constraints.yaml, whose name gazetteers are filled from the CrossWOZ
database here (one enum value per venue name). Negated mentions do not count as constraints.

A venue named as the start or end of a taxi or metro ride (出租/地铁 出发地/目的地) is a venue-name
mention too, so it counts as gold for the gazetteer that holds the name.

Counting is per (slot, value) pair and utterance. Price ranges and ratings are compared after
normalising how they are written (spaces, 到/至/~ -> -, a trailing 元 on both bounds -> one; a
rating "4.5以上" or a bare "4.5分" is CrossWOZ's "4.5分以上", 5 being the top of the scale);
their domain (restaurant, hotel or attraction) is not scored, as the same phrase serves all three.
Where gazetteer matches of different fields overlap ("故宫" inside "故宫餐厅", the facility 中餐厅
inside a restaurant's name), the longer one wins.
Price ranges and ratings are found by the generic `slot.price` / `slot.rating` families of
rules/zh/slots.yaml, the ones the CrossWOZ importer selects. Until 2026-11-30 a pack written for
this benchmark alone (rules/zh/venues.yaml) found them: overall F1 0.965 -> 0.935, rating recall
0.975 -> 0.771, because the generic rating rules attribute a rating only when the kind of place
(景点, 餐馆, 酒店, …) follows in the sentence.
This is a measure of extraction, not of dialogue state tracking (see context_editor/bench for that).
Writes benchmarks/out/crosswoz_constraints.json.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
import zipfile
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from context_editor.domain.model import domain_from_source  # noqa: E402
from context_editor.extract import Extractor  # noqa: E402
from context_editor.model import Message  # noqa: E402
from context_editor.domaintest import Counts  # noqa: E402

DOMAIN_FILE = ROOT / "benchmarks" / "crosswoz_constraints.yaml"
OUT = ROOT / "benchmarks" / "out" / "crosswoz_constraints.json"
NOW = datetime(2024, 5, 1, 10)
GAZETTEERS = {"attraction_name": ("attraction_db.json", "景点"), "restaurant_name": ("restaurant_db.json", "餐馆"),
              "hotel_name": ("hotel_db.json", "酒店")}
PRICE_SLOTS = {"人均消费", "价格", "门票"}
NAME_FIELD = {domain: field for field, (_, domain) in GAZETTEERS.items()}
RIDES = {"出租", "地铁"}
ENUMS = (*GAZETTEERS, "hotel_type", "hotel_facilities")  # matched from lists: overlaps are resolved


def venue_names(db_dir: Path) -> dict[str, list[str]]:
    """Gazetteer field -> the venue names of its CrossWOZ database."""
    return {field: sorted({name.strip() for name, _ in json.loads((db_dir / db_file).read_text(encoding="utf-8")) if name.strip()})
            for field, (db_file, _) in GAZETTEERS.items()}


def build_domain(names: dict[str, list[str]]):
    """The measurement domain plus one enum field per venue gazetteer."""
    source = yaml.safe_load(DOMAIN_FILE.read_text(encoding="utf-8"))
    for field, values in names.items():
        source["fields"][field] = {"type": "enum", "values": {name: [] for name in values}}
        source["actions"]["search"]["fields"].append(field)
    return domain_from_source(source, str(DOMAIN_FILE))


def norm_price(text: str) -> str:
    s = re.sub(r"\s+", "", text).replace("之间", "")
    s = re.sub(r"[到至~～－]", "-", s)
    s = re.sub(r"元(?=-)", "", s)
    return s if s == "免费" or s.endswith(("元", "以上", "以下")) or "元以" in s else s + "元"


def norm_rating(text: str) -> str:
    s = re.sub(r"\s+", "", text)
    s = re.sub(r"(?<=[0-9])(?=以)", "分", s)
    return s + "以上" if s.endswith("分") and float(s[:-1]) < 5 else s


def gold_pairs(acts: list, field_of_name: dict[str, str]) -> set[tuple[str, str]]:
    out = set()
    for act, domain, slot, value in acts:
        if act != "Inform" or not value:
            continue
        if slot in PRICE_SLOTS:
            out.add(("price_range", norm_price(value)))
        elif slot == "评分":
            out.add(("rating", norm_rating(value)))
        elif slot == "酒店类型":
            out.add(("hotel_type", value))
        elif slot.startswith("酒店设施-") and value == "是":
            out.add(("hotel_facilities", slot.split("-", 1)[1]))
        elif slot == "名称" and domain in NAME_FIELD:
            out.add((NAME_FIELD[domain], value))
        elif domain in RIDES and value in field_of_name:
            out.add((field_of_name[value], value))
    return out


def predicted_pairs(candidates) -> set[tuple[str, str]]:
    kept = [c for c in candidates if not c.negated and c.kind == "value"]
    listed = [c.provenance.span for c in kept if c.field in ENUMS]
    out = set()
    for c in kept:
        s, e = c.provenance.span
        if c.field in ENUMS and any(a <= s and e <= b and e - s < b - a for a, b in listed):
            continue  # inside a longer gazetteer match of another field
        value = norm_price(c.value) if c.field == "price_range" else norm_rating(c.value) if c.field == "rating" else c.value
        out.add((c.field, value))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("/work/shared/data/crosswoz"))
    args = ap.parse_args()
    with zipfile.ZipFile(args.data / "val.json.zip") as z:
        dialogues = json.loads(z.read("val.json"))
    names = venue_names(args.data / "database")
    field_of_name = {name: field for field, values in names.items() for name in values}
    extractor = Extractor(build_domain(names))
    counts: dict[str, Counts] = defaultdict(Counts)
    timings = []
    utterances = 0
    for did, dialogue in sorted(dialogues.items()):
        for i, m in enumerate(dialogue["messages"]):
            if m["role"] != "usr":
                continue
            utterances += 1
            msg = Message(session=did, index=i, round=i // 2 + 1, role="user", content=m["content"])
            t0 = time.perf_counter_ns()
            candidates = extractor.extract(msg, NOW)
            timings.append((time.perf_counter_ns() - t0) / 1000)
            gold, pred = gold_pairs(m["dialog_act"], field_of_name), predicted_pairs(candidates)
            for pair in gold | pred:
                c = counts[pair[0]]
                c.tp += pair in gold and pair in pred
                c.fp += pair in pred and pair not in gold
                c.fn += pair in gold and pair not in pred
    total = Counts(sum(c.tp for c in counts.values()), sum(c.fp for c in counts.values()), sum(c.fn for c in counts.values()))
    timings.sort()
    print(f"CrossWOZ val: {len(dialogues)} dialogues, {utterances} user utterances")
    print("| slot | TP | FP | FN | precision | recall | F1 |\n|---|---|---|---|---|---|---|")
    rows = {}
    for name in [*sorted(counts), "all"]:
        c = total if name == "all" else counts[name]
        p, r = c.precision or 0.0, c.recall or 0.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        rows[name] = {"tp": c.tp, "fp": c.fp, "fn": c.fn, "precision": round(p, 4), "recall": round(r, 4), "f1": round(f1, 4)}
        print(f"| {name} | {c.tp} | {c.fp} | {c.fn} | {p:.3f} | {r:.3f} | {f1:.3f} |")
    cost = {"p50_us": round(statistics.median(timings), 1), "p99_us": round(timings[int(0.99 * (len(timings) - 1))], 1)}
    print(f"extraction per utterance: p50 {cost['p50_us']} us, p99 {cost['p99_us']} us")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"dialogues": len(dialogues), "utterances": utterances, "slots": rows, "cost": cost},
                              indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
