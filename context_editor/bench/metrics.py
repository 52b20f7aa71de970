"""Scoring a tracked state against gold dialogue state, the way published DST evaluations do.

Per slot a score in [0, 1]:
- `exact`: the canonical value, compared after normalisation (SGD categorical slots, CrossWOZ);
- `fuzzy`: the DSTC8 script's fuzzywuzzy `token_sort_ratio / 100`, best over the gold variants.
  Implemented with difflib (tokens lower-cased, non-alphanumerics dropped, sorted): a dependency
  for one ratio is not worth it, and for the short strings of slot values the two agree to
  within a point;
- `set`: the same items, in any order (CrossWOZ's space-separated multi-value slots).
A slot is scored on the editor's value as rendered ("2019-03-11", "2000 CNY"), in the dataset's
own representation where it has one (`scored_value`): an amount in the dataset's currency as the
bare amount ("1520", as SGD writes dollars; the editor's "1520 USD" would lose a third of a fuzzy
score for the unit alone), and no preference as the dataset's word for it (SGD's "dontcare"; the
editor's "any"). Both are a change of notation, not leniency: an amount in another currency, or
"any" where gold has a value, still scores as before. Gold brings the
canonical forms the dialogue's own annotations give a surface value, so "the 11th" can match a
resolved date. A frame's joint goal accuracy is the product of its slot scores over gold and
predicted slots (a missing or extra slot scores 0), as in DSTC8; precision and recall count the
same scores as soft true positives. A second joint figure also credits a match with the text the
value was extracted from (its provenance); it is reported separately, never as the score.
"""

from __future__ import annotations

import difflib
import re
import statistics
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from ..inject import format_value
from ..model import is_no_preference

_NON_ALNUM = re.compile(r"[^\w]+")


def norm(text: str) -> str:
    """NFKC (full-width -> ASCII), lower case, no whitespace: the key for exact comparisons."""
    return "".join(unicodedata.normalize("NFKC", str(text)).lower().split())


def token_sort_ratio(a: str, b: str) -> float:
    """fuzzywuzzy's token_sort_ratio / 100: sorted alphanumeric tokens, then a sequence ratio."""
    ta = " ".join(sorted(_NON_ALNUM.sub(" ", a.lower()).split()))
    tb = " ".join(sorted(_NON_ALNUM.sub(" ", b.lower()).split()))
    if not ta or not tb:
        return 0.0
    return round(difflib.SequenceMatcher(None, ta, tb, autojunk=False).ratio() * 100) / 100


@dataclass(frozen=True)
class Gold:
    """The gold value of one slot: acceptable surface forms and how to compare them."""

    variants: tuple[str, ...]
    kind: str = "exact"  # exact | fuzzy | set
    surface: bool = True  # counts for context coverage (False for categorical labels like "True")


@dataclass(frozen=True)
class Predicted:
    """What the editor holds for a field: its value as rendered, its source text, list items."""

    value: str
    text: str | None = None
    items: tuple[str, ...] = ()


def scored_value(value: Any, currency: str | None = None, no_preference: str | None = None) -> str:
    """A field's value as compared with a dataset's gold: as rendered, except an amount in the
    dataset's `currency` (its bare amount) and no preference (the dataset's word for it)."""
    if no_preference is not None and is_no_preference(value):
        return no_preference
    if currency is not None and isinstance(value, dict) and "amount" in value and value.get("currency") == currency:
        return format_value({"amount": value["amount"]})
    if isinstance(value, list):
        return ", ".join(scored_value(v, currency, no_preference) for v in value)
    return format_value(value)


def slot_score(gold: Gold, pred: Predicted, credit_text: bool = False) -> float:
    """The value against gold; with `credit_text`, the better of value and source text."""
    if gold.kind == "set":
        items = {norm(x) for x in pred.items} if pred.items else {norm(pred.value)}
        return float(any(items == {norm(x) for x in g.split()} for g in gold.variants))
    offered = [pred.value] + ([pred.text] if credit_text and pred.text else [])
    if gold.kind == "fuzzy":
        return max(token_sort_ratio(g, p) for g in gold.variants for p in offered)
    return float(any(norm(g) == norm(p) for g in gold.variants for p in offered))


@dataclass
class DomainScore:
    """Accumulates frames of one domain: joint goal accuracy, soft P/R/F1 and error classes."""

    frames: int = 0
    joint: float = 0.0
    joint_text_credited: float = 0.0  # the same, when a match with the source text also counts
    tp: float = 0.0
    predicted: int = 0
    gold: int = 0
    errors: dict[str, int] = field(default_factory=dict)  # "field:missed|extra|wrong" -> count

    def add(self, gold: dict[str, Gold], pred: dict[str, Predicted]) -> float:
        """Score one frame; returns its joint score."""
        joint = credited = 1.0
        for name in gold.keys() | pred.keys():
            g, p = gold.get(name), pred.get(name)
            score = slot_score(g, p) if g and p else 0.0
            if g and p:
                self.tp += score
            joint *= score
            credited *= slot_score(g, p, credit_text=True) if g and p else 0.0
            kind = "missed" if p is None else "extra" if g is None else "wrong" if score < 1 else None
            if kind:
                key = f"{name}:{kind}"
                self.errors[key] = self.errors.get(key, 0) + 1
        self.frames += 1
        self.joint += joint
        self.joint_text_credited += credited
        self.predicted += len(pred)
        self.gold += len(gold)
        return joint

    def merge(self, other: DomainScore) -> None:
        self.frames += other.frames
        self.joint += other.joint
        self.joint_text_credited += other.joint_text_credited
        self.tp += other.tp
        self.predicted += other.predicted
        self.gold += other.gold
        for k, v in other.errors.items():
            self.errors[k] = self.errors.get(k, 0) + v

    def summary(self) -> dict[str, Any]:
        p = self.tp / self.predicted if self.predicted else 0.0
        r = self.tp / self.gold if self.gold else 0.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        per_frame = 1 / self.frames if self.frames else 0.0
        return {"frames": self.frames, "joint_goal_accuracy": _r(self.joint * per_frame),
                "joint_goal_accuracy_text_credited": _r(self.joint_text_credited * per_frame),
                "slot_precision": _r(p), "slot_recall": _r(r), "slot_f1": _r(f1),
                "gold_slots": self.gold, "predicted_slots": self.predicted}


def contained(haystack_norm: str, gold: Gold) -> bool:
    """Does a context (already `norm`-ed) contain this gold value (any variant, every set item)?"""
    if gold.kind == "set":
        return any(all(norm(x) in haystack_norm for x in g.split()) for g in gold.variants)
    return any(norm(g) in haystack_norm for g in gold.variants)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    s = sorted(values)
    k = (len(s) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _r(x: float) -> float:
    return round(x, 4)
