"""Why the editor misses CrossWOZ gold state: every slot error of a half of the validation split.

    python benchmarks/crosswoz_misses.py --half even [--ner MODEL_DIR] [--without offers] [--oracle-domains] [--examples FILE] [--max-examples N] [--json FILE]

CrossWOZ has one published split here (val), and it is also what is reported: error analysis is
done on the even-numbered dialogues (file positions 0, 2, 4, …) only, and the odd ones are kept
as held out from it (`bench crosswoz --every 2 --offset 1`). The script runs the bench harness
(same import, same editors, same scorer) and classifies every scored slot that is not exactly
right by its field and by where gold and prediction come from:
- `missed`/`wrong`/`extra` as the bench counts them;
- the gold side: `user-inform` (a user act of this turn informs this slot with this value),
  `user-earlier` (an earlier user act did), `not-said` (no user act informs it: the wizard's own
  state, a landmark, a pick);
- the prediction side: `stale` (the editor holds an earlier gold value of the slot).
Per class: slot errors and the scored turns this class alone makes wrong (what fixing it would
add to per-turn JGA).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from context_editor.bench.cli import switch_off
from context_editor.bench.contexts import HistoryMeter
from context_editor.bench.crosswoz import load_crosswoz
from context_editor.bench.metrics import norm, slot_score
from context_editor.bench.runner import Harness
from context_editor.importers import read_json
from context_editor.importers.crosswoz import DOMAINS


FIELD = {(d.name, s.field): (d.zh, s.zh) for d in DOMAINS for s in d.slots}


def _user_informs(msgs: list[dict[str, Any]], upto: int) -> list[dict[tuple[str, str], str]]:
    """Per user turn up to `upto`: (domain zh, slot zh) -> value its Inform acts give."""
    out = []
    for m in msgs[: upto + 1]:
        if m["role"] == "usr":
            acts: dict[tuple[str, str], str] = {}
            for act, dom, slot, value in m["dialog_act"]:
                if act == "Inform":
                    if slot.startswith("酒店设施-") and value == "是":
                        slot, value = "酒店设施", slot.split("-", 1)[1]
                    acts[(dom, slot)] = (acts[(dom, slot)] + " " + value) if (dom, slot) in acts else value
            out.append(acts)
    return out


class Classifier(Harness):
    def __init__(self, ds: Any, raw: dict[str, Any]):
        super().__init__(ds)
        self.raw = raw
        self.errors: Counter[str] = Counter()
        self.sole: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = defaultdict(list)
        self.history: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        self.turns = 0
        self.by_source: dict[str, Counter[str]] = defaultdict(Counter)
        self.turn_errors: list[set[str]] = []  # per scored turn: the fields with an error
        self.seen: set[tuple[str, str, Any, Any]] = set()
        self.max_examples = 25

    oracle_domains = False

    def dialogue(self, d: Any) -> None:
        """With `oracle_domains` (an upper bound, not a result): each user message is read only by
        the domains its gold dialogue acts name; the others get a bare "。" in its place."""
        if not self.oracle_domains:
            return super().dialogue(d)
        meter = HistoryMeter()
        zh = {s.name: s.zh for s in DOMAINS}
        msgs = self.raw[d.id]["messages"]
        for t, u in enumerate(d.utterances):
            acts = {a[1] for a in msgs[t]["dialog_act"]}
            for name in d.domains:
                text = u.text if u.role != "user" or zh[name] in acts else "。"
                self.editors[name].add(d.id, {"role": u.role, "content": text, "timestamp": self.ds.now.isoformat()})
            meter.add(u.role, u.text)
            if u.frames is not None:
                self._score(d, t, u, meter)

    def _score(self, d: Any, t: int, u: Any, meter: Any) -> None:
        super()._score(d, t, u, meter)
        self.turns += 1
        msgs = self.raw[d.id]["messages"]
        informs = _user_informs(msgs, t)
        classes: set[str] = set()
        for domain in d.domains:
            gold = (u.frames or {}).get(domain, {})
            state = self.editors[domain].state(d.id)
            for name in self.ds.scored_fields[domain]:
                g = gold.get(name)
                fs = state.fields.get(name)
                p = self.predicted(domain, d.id).get(name)
                if g is not None:
                    hist = self.history[(d.id, domain, name)]
                    if not hist or hist[-1] != g.variants[0]:
                        hist.append(g.variants[0])
                if g is None and p is None or g is not None and p is not None and slot_score(g, p) == 1.0:
                    continue
                key = FIELD[(domain, name)]
                kind = "missed" if p is None else "extra" if g is None else "wrong"
                if g is not None:
                    said = [a.get(key) for a in informs]
                    origin = ("user-inform" if said and said[-1] and norm(said[-1]) == norm(g.variants[0]) else
                              "user-earlier" if any(s and norm(s) == norm(g.variants[0]) for s in said[:-1]) else
                              "user-other-value" if said and said[-1] else "not-said")
                else:
                    origin = "user-inform-now" if informs and informs[-1].get(key) else "-"
                if kind == "wrong" and any(norm(p.value) == norm(h) for h in self.history[(d.id, domain, name)][:-1]):
                    origin += "/stale"
                cls = f"{domain}.{name}:{kind}:{origin}"
                classes.add(cls)
                self.errors[cls] += 1
                self.by_source[cls][fs.source if fs is not None and p is not None else '-'] += 1
                first = (d.id, cls, p.value if p else None, g.variants[0] if g else None) not in self.seen
                self.seen.add((d.id, cls, p.value if p else None, g.variants[0] if g else None))
                if first and len(self.examples[cls]) < self.max_examples:  # each error once, where it starts
                    ctx = " || ".join(f"{m['role']}: {m['content']}" for m in msgs[max(0, t - 2):t + 1])
                    src = fs.provenance if fs is not None and fs.provenance else None
                    self.examples[cls].append(f"{d.id} t{t} gold={g.variants[0] if g else None} pred={p.value if p else None} "
                                              f"src={fs.source if fs else None} ext={getattr(src, 'extractor', None)} "
                                              f"prov={src.text if src else None!r}@{src.message_index if src else None}\n    {ctx}")
        self.turn_errors.append({c.split(':')[0] for c in classes})
        if len(classes) == 1:
            self.sole[next(iter(classes))] += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data/crosswoz/val.json.zip")
    ap.add_argument("--half", choices=("even", "odd"), default="even")
    ap.add_argument("--every", type=int, default=1, help="then every K-th of that half")
    ap.add_argument("--ner")
    ap.add_argument("--oracle-domains", action="store_true", help="upper bound: read each user message only in the domains its gold acts name")
    ap.add_argument("--without", action="append", choices=("answers", "offers"), help="switch a dialogue mechanism off")
    ap.add_argument("--domains", default="/tmp/crosswoz_misses_domains")
    ap.add_argument("--json")
    ap.add_argument("--examples", help="write up to 25 examples per class to this file")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--max-examples", type=int, default=25, help="examples per class (each error once, at the turn it starts)")
    args = ap.parse_args(argv)
    ds = load_crosswoz(args.data, None, args.domains, **({"ner": args.ner} if args.ner else {}))
    ds.dialogues = ds.dialogues[(args.half == "odd"):: 2][:: args.every]
    switch_off(ds, args.without or [])
    raw = read_json(Path(args.data))
    h = Classifier(ds, raw)
    h.oracle_domains = args.oracle_domains
    h.max_examples = args.max_examples
    h.run("classify")
    frames = sum(s.frames for s in h.scores.values())
    jga = sum(s.joint for s in h.scores.values()) / max(1, frames)
    turn = sum(h.turn_joint) / max(1, len(h.turn_joint))
    print(f"{len(ds.dialogues)} dialogues, {frames} frames, {h.turns} turns, JGA per frame {jga:.3f}, per turn {turn:.3f}")
    print("| class | slot errors | turns wrong by this class alone |")
    print("|---|---|---|")
    for cls, n in h.errors.most_common(args.top):
        print(f"| {cls} | {n} | {h.sole[cls]} | {', '.join(f'{k} {v}' for k, v in h.by_source[cls].most_common())} |")
    print("Per-turn JGA if a field's errors were all fixed (greedy, cumulative):")
    fixed: set[str] = set()
    fields = {f for e in h.turn_errors for f in e}
    for _ in range(min(12, len(fields))):
        best = max(fields - fixed, key=lambda f: sum(not (e - fixed - {f}) for e in h.turn_errors))
        fixed.add(best)
        print(f"  + {best}: {sum(not (e - fixed) for e in h.turn_errors) / max(1, h.turns):.3f}")
    if args.examples:
        Path(args.examples).write_text("\n".join(f"## {c} ({h.errors[c]})\n" + "\n".join(x) for c, x in
                                                 sorted(h.examples.items(), key=lambda kv: -h.errors[kv[0]])), encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps({"frame_jga": jga, "turn_jga": turn, "errors": dict(h.errors), "sole": dict(h.sole)},
                                              ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
