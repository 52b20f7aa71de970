"""Calibrate a trained model's span scores on its held-out split, per label.

Why: the beam probability of a span says how sure the parser is among its own parses, not how
often such a span is right: most spans score above 0.95 whether their label is learnt well or
not at all, so a raw score would outrank a hand-set rule confidence of 0.9 almost always. The
held-out split (never trained on) tells how often spans of each label and score were right:

- every span the run-time reader serves (`extract.ner.beam_spans`: the beam probability, at or
  above `MIN_SCORE`) is compared with the held-out gold spans; a span is right when its start,
  end and label all match;
- per label, the spans are binned by raw probability (`EDGES`); a bin's precision is smoothed
  toward the label's precision (and that toward the model's) by `PRIOR` pseudo-spans, so a
  label or bin seen a few times does not claim 0 or 1, then made non-decreasing in the raw
  probability (pool adjacent violators);
- a label is served only if its held-out F1 (of these same spans) is at least the floor
  (`TrainOptions.min_f1`): a label that is found worse than that does more harm than good
  beside rules. A label with no gold span in the held-out split cannot be measured and is not
  served either.

The result is `calibration.json` in the model directory (read by `domain.nermodel`; part of the
model's hash) and a table on the model card.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..domain.nermodel import MIN_CONFIDENCE
from ..extract.ner import BEAM_WIDTH, MIN_SCORE, beam_spans

EDGES = (MIN_SCORE, 0.8, 0.95, 0.99)  # lower edges of the raw-probability bins
PRIOR = 5.0  # pseudo-spans pulling a bin toward its label's precision, and a label toward the model's


def _bin(p: float) -> int:
    return max(i for i, edge in enumerate(EDGES) if p >= edge)


def monotone(values: list[float], weights: list[float]) -> list[float]:
    """Pool adjacent violators: the closest non-decreasing sequence (weighted least squares)."""
    blocks: list[list[float]] = []  # [value, weight, count]
    for v, w in zip(values, weights):
        blocks.append([v, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, c2 = blocks.pop()
            b = blocks[-1]
            b[0], b[1], b[2] = (b[0] * b[1] + v2 * w2) / (b[1] + w2), b[1] + w2, b[2] + c2
    return [b[0] for b in blocks for _ in range(int(b[2]))]


def calibrate(nlp: Any, held: list[Any], labels: list[str], min_f1: float) -> dict[str, Any]:
    """The calibration document of `nlp`, measured on the held-out spaCy `Example`s."""
    hits: dict[str, list[list[int]]] = defaultdict(lambda: [[0, 0] for _ in EDGES])  # label -> per bin [right, spans]
    gold: dict[str, int] = defaultdict(int)
    for eg in held:
        truth = {(e.start_char, e.end_char, e.label_) for e in eg.reference.ents}
        for _, _, label in truth:
            gold[label] += 1
        for start, end, label, p in beam_spans(nlp, eg.reference.text):
            cell = hits[label][_bin(p)]
            cell[0] += (start, end, label) in truth
            cell[1] += 1
    right_all = sum(c[0] for bins in hits.values() for c in bins)
    spans_all = sum(c[1] for bins in hits.values() for c in bins)
    model_p = (right_all + PRIOR * 0.5) / (spans_all + PRIOR)
    out: dict[str, Any] = {}
    for label in labels:
        bins = hits[label]
        right, spans = sum(c[0] for c in bins), sum(c[1] for c in bins)
        p = right / spans if spans else 0.0
        r = right / gold[label] if gold[label] else 0.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        label_p = (right + PRIOR * model_p) / (spans + PRIOR)
        precision = monotone([(c[0] + PRIOR * label_p) / (c[1] + PRIOR) for c in bins], [c[1] + PRIOR for c in bins])
        served = gold[label] > 0 and f1 >= min_f1
        out[label] = {"served": served, "why": _why(gold[label], f1, min_f1), "gold": gold[label], "spans": spans,
                      "p": round(p, 4), "r": round(r, 4), "f1": round(f1, 4), "edges": list(EDGES),
                      "precision": [round(x, 4) for x in precision], "n": [c[1] for c in bins]}
    return {"method": "per-label binned precision of the beam probability on the held-out split "
                      f"(smoothed by {PRIOR:g} pseudo-spans, monotone)", "beam_width": BEAM_WIDTH, "min_f1": min_f1,
            "min_confidence": MIN_CONFIDENCE, "held_out_examples": len(held), "labels": out}


def _why(gold: int, f1: float, floor: float) -> str:
    if not gold:
        return "no gold span in the held-out split: not measured, not served"
    return "served" if f1 >= floor else f"held-out F1 {f1:.3f} < floor {floor:g}: not served"
