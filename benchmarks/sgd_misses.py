"""Why the editor misses SGD gold state: every slot error classified by where its gold value came from.

    python benchmarks/sgd_misses.py --data ../shared/data/sgd/train --every 40 [--ner MODEL_DIR] [--json OUT]

Runs the bench harness (same import, same editors, same scorer) and, for every scored slot that
is not exactly right, traces the gold value back through SGD's dialogue-act annotations to the
user turn where the state took that value:
- `dontcare`: gold is "dontcare";
- `answer`: the user informed the slot right after the system REQUESTed it;
- `user-stated`: the user informed it unprompted (plain extraction);
- `offer-accepted`: the user did not inform it; the system OFFERed that value the turn before;
- `assistant-confirmed`: the system CONFIRMed / INFORMed that value the turn before;
- `carry`: the value came from another service's state earlier in the dialogue;
- `assistant-earlier`: the system said it in an earlier turn (not the one before);
- `importer`: the field cannot hold it (tool-only or no extractor for a user value);
and the prediction side:
- `wrong/normalisation`: the value's source text matches gold, the value as stored does not;
- `wrong/stale`: the editor holds an earlier gold value of the slot (the update was missed);
- `extra/before-service`: a value set before the service's first frame (another service's talk);
- `extra/carry`: carried from another service (`carry:`) where gold has nothing;
- `extra/from-offer`: set by accepting an assistant offer gold does not hold; `extra/user`: else.
Per class: slot errors, distinct (dialogue, service, slot, origin) misses, and the frames this
class alone makes wrong (what fixing it would add to JGA). Error analysis belongs on train.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from context_editor.bench.metrics import norm, slot_score
from context_editor.bench.runner import Harness
from context_editor.bench.sgd import load_sgd
from context_editor.importers import read_json
from context_editor.importers.common import snake


def _raw(data: Path, ids: set[str]) -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(data.glob("dialogues_*.json*")):
        for d in read_json(path):
            if d["dialogue_id"] in ids:
                out[d["dialogue_id"]] = d
    return out


def _acts(frame: dict[str, Any] | None, slot: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for a in (frame or {}).get("actions", []):
        if a["slot"] == slot:
            out[a["act"]] += [v.lower() for v in a["values"]]
    return out


def origins(d: dict[str, Any]) -> dict[tuple[int, str, str], str]:
    """(user turn index, service, slot) -> origin class of the gold value held at that turn."""
    out: dict[tuple[int, str, str], str] = {}
    last: dict[str, dict[str, list[str]]] = defaultdict(dict)
    origin: dict[tuple[str, str], str] = {}
    said: list[tuple[int, str, str]] = []  # (turn, service, lower value) the system said
    for t, turn in enumerate(d["turns"]):
        frames = {f["service"]: f for f in turn["frames"]}
        if turn["speaker"] == "SYSTEM":
            said += [(t, s, v.lower()) for s, f in frames.items() for a in f["actions"] for v in a["values"]]
            continue
        prev = {f["service"]: f for f in d["turns"][t - 1]["frames"]} if t else {}
        for service, f in frames.items():
            for slot, values in f["state"]["slot_values"].items():
                if last[service].get(slot) != values:
                    origin[(service, slot)] = _origin(d, t, service, slot, values, f, prev.get(service), last, said)
                out[(t, service, slot)] = origin[(service, slot)]
            last[service] = dict(f["state"]["slot_values"])
    return out


def _origin(d: dict[str, Any], t: int, service: str, slot: str, values: list[str], frame: dict[str, Any],
            sys_frame: dict[str, Any] | None, last: dict[str, dict[str, list[str]]], said: list[tuple[int, str, str]]) -> str:
    low = {v.lower() for v in values}
    if "dontcare" in low:
        return "dontcare"
    user = _acts(frame, slot)
    system = _acts(sys_frame, slot)
    if "INFORM" in user and low & set(user["INFORM"]):
        return "answer" if "REQUEST" in system else "user-stated"
    if low & set(system.get("OFFER", [])):
        return "offer-accepted"
    if low & set(system.get("CONFIRM", []) + system.get("INFORM", [])):
        return "assistant-confirmed"
    if any(low & set(map(str.lower, vals)) for s, state in last.items() if s != service for vals in state.values()):
        return "carry"
    if any(v in low and s != service for _, s, v in said):
        return "carry"
    if any(v in low for _, s, v in said):
        return "assistant-earlier"
    if "INFORM" in user:
        return "user-stated"
    return "other"


class Classifier(Harness):
    def __init__(self, ds: Any, raw: dict[str, dict[str, Any]], without: list[str]):
        super().__init__(ds, carry="carry" not in without, activation="activation" not in without)
        self.raw = raw
        self.origin: dict[str, dict[tuple[int, str, str], str]] = {}
        self.errors: Counter[str] = Counter()
        self.distinct: dict[str, set[tuple[str, ...]]] = defaultdict(set)
        self.sole: Counter[str] = Counter()
        self.by_slot: dict[str, Counter[str]] = defaultdict(Counter)
        self.frames = 0
        self.history: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        self.first_frame: dict[tuple[str, str], int] = {}
        self.examples: dict[str, list[str]] = defaultdict(list)

    def _score(self, d: Any, t: int, u: Any, meter: Any) -> None:
        super()._score(d, t, u, meter)
        if d.id not in self.origin:
            self.origin[d.id] = origins(self.raw[d.id])
        for domain, gold in (u.frames or {}).items():
            self.first_frame.setdefault((d.id, domain), t)
            self.frames += 1
            classes = set()
            state = self.editors[domain].state(d.id)
            spec = self.editors[domain].domain.fields
            preds = self.predicted(domain, d.id)  # as the harness scores them
            for name in self.ds.scored_fields[domain]:
                g, fs = gold.get(name), state.fields.get(name)
                p = preds.get(name)
                if g is None and p is None:
                    continue
                if g is not None:
                    hist = self.history[(d.id, domain, name)]
                    if not hist or hist[-1] != g.variants[0]:
                        hist.append(g.variants[0])
                if g is not None and p is not None and slot_score(g, p) == 1.0:
                    continue
                service = next((s for s in self.raw[d.id]["services"] if snake(s) == domain), domain)
                if g is None:
                    assert fs is not None and fs.provenance is not None
                    before = fs.provenance.message_index < self.first_frame[(d.id, domain)]
                    cls = ("extra/carry" if fs.source == "carry" else "extra/before-service" if before else
                           "extra/from-offer" if fs.source == "confirmation" else "extra/user")
                else:
                    cls = self.origin[d.id].get((t, service, name), "other")
                    f = spec.get(name)
                    if cls not in ("dontcare", "carry") and f is not None and ("user" not in f.sources or not (f.extract or f.synonyms or f.type in ("int", "bool"))):
                        cls = "importer"
                    if p is None:
                        cls = f"missed/{cls}"
                    elif slot_score(g, p, credit_text=True) == 1.0:
                        cls = "wrong/normalisation"
                    elif any(norm(p.value) == norm(h) for h in self.history[(d.id, domain, name)][:-1]):
                        cls = "wrong/stale"
                    else:
                        cls = f"wrong/{cls}"
                classes.add(cls)
                self.errors[cls] += 1
                self.by_slot[cls][f"{domain}.{name}"] += 1
                src = fs.provenance.message_index if fs is not None and fs.provenance else -1
                key = (d.id, domain, name, str(g.variants[0] if g else src))
                if key not in self.distinct[cls] and len(self.examples[cls]) < 60:
                    turns = self.raw[d.id]["turns"]
                    ctx = " || ".join(f"{x['speaker'][0]}: {x['utterance']}" for x in turns[max(0, t - 3):t + 1])
                    self.examples[cls].append(f"{d.id} t{t} {domain}.{name} gold={g.variants if g else None} "
                                              f"pred={p.value if p else None} src={fs.source if fs else None} "
                                              f"prov={fs.provenance.text if fs and fs.provenance else None!r}@{src}\n    {ctx}")
                self.distinct[cls].add(key)
            if len(classes) == 1:
                self.sole[next(iter(classes))] += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--ner")
    ap.add_argument("--domains", default="/tmp/sgd_misses_domains")
    ap.add_argument("--json")
    ap.add_argument("--examples", help="write up to 60 examples per class to this file")
    ap.add_argument("--without", action="append", default=[], choices=("carry", "activation"),
                    help="switch a harness mechanism off (as `bench --without`)")
    args = ap.parse_args(argv)
    ds = load_sgd(args.data, args.domains, args.limit, **({"ner": args.ner} if args.ner else {}))
    ds.dialogues = ds.dialogues[:: args.every]
    raw = _raw(Path(args.data), {d.id for d in ds.dialogues})
    h = Classifier(ds, raw, args.without)
    h.run("classify")
    jga = sum(s.joint for s in h.scores.values()) / max(1, sum(s.frames for s in h.scores.values()))
    print(f"{len(ds.dialogues)} dialogues, {h.frames} frames, JGA per frame {jga:.3f}")
    print("| class | slot errors | distinct misses | frames wrong by this class alone | JGA if fixed | top slots |")
    print("|---|---|---|---|---|---|")
    for cls, n in h.errors.most_common():
        top = ", ".join(f"{k} {v}" for k, v in h.by_slot[cls].most_common(4))
        print(f"| {cls} | {n} | {len(h.distinct[cls])} | {h.sole[cls]} | +{h.sole[cls] / h.frames:.3f} | {top} |")
    if args.examples:
        Path(args.examples).write_text("\n".join(f"## {c}\n" + "\n".join(x) for c, x in h.examples.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"jga": jga, "frames": h.frames, "errors": dict(h.errors), "sole": dict(h.sole),
                                               "by_slot": {k: dict(v.most_common(30)) for k, v in h.by_slot.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
