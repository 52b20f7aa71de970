"""Train the small NER model: a CNN tok2vec + transition-based `ner`, on CPU, deterministically.

Why this architecture: spaCy's hash-embedding CNN is a few MB, loads in well under a second and
tags a short message in a few milliseconds on one core; the transition-based `ner` trains
greedily (fast) and is read at run time with a small beam, whose parse probabilities give
every span a score (`extract/ner.py`), which is the confidence a candidate carries. Chinese is
tokenised into characters (spaCy's blank `zh` with the `char` segmenter: nothing to download).

Determinism: one seed fixes spaCy's, thinc's and numpy's generators and the shuffling of
examples; the held-out part is chosen by a hash of each example's group (a dialogue, a line),
not by chance; the best epoch is kept by held-out F1. The same data, seed and options give
byte-identical weights (`model_hash` covers the weight files and the calibration, not the card).

After training, the best epoch's span scores are calibrated on the held-out split, per label
(`calibrate.py`): what a domain compares with a rule's confidence is how often such spans were
right there, and labels learnt too poorly are not served.

Nothing is written until training succeeds: the model is saved into a temporary directory
beside `out`, which then replaces `out`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..domain.nermodel import CALIBRATION_FILE, CARD_FILE, model_hash
from ..errors import Errors, MissingExtraError
from .calibrate import calibrate
from .card import write_card
from .corpus import Example

HELD_OUT = 0.05  # share of the examples (whole dialogues, lines) kept out of training for scores and calibration
HELD_OUT_MIN = 1000  # ... but at least this many (at most HELD_OUT_MAX of a small corpus): calibration needs spans
HELD_OUT_MAX = 0.15

_CONFIG = """
[nlp]
lang = "{lang}"
pipeline = ["ner"]
{tokenizer}

[components]

[components.ner]
factory = "ner"
moves = null
update_with_oracle_cut_size = 100
incorrect_spans_key = null

[components.ner.model]
@architectures = "spacy.TransitionBasedParser.v2"
state_type = "ner"
extra_state_tokens = false
hidden_width = {hidden}
maxout_pieces = 2
use_upper = true
nO = null

[components.ner.model.tok2vec]
@architectures = "spacy.HashEmbedCNN.v2"
pretrained_vectors = null
width = {width}
depth = {depth}
embed_size = {embed}
window_size = 1
maxout_pieces = 3
subword_features = {subwords}
"""
_ZH_TOKENIZER = '[nlp.tokenizer]\n@tokenizers = "spacy.zh.ChineseTokenizer"\nsegmenter = "char"'


@dataclass(frozen=True)
class TrainOptions:
    lang: str = "en"
    seed: int = 0
    max_epochs: int = 10
    patience: int = 3  # epochs without a better held-out F1 before stopping
    width: int = 96
    depth: int = 4
    embed: int = 4000
    hidden: int = 64
    dropout: float = 0.1
    batch_words: int = 1000
    max_examples: int | None = None  # None: all; else a deterministic subset (said on the card)
    min_f1: float = 0.5  # labels with a lower held-out F1 are not served (calibration.json)


@dataclass
class TrainResult:
    out: Path
    labels: list[str]
    scores: dict[str, Any]
    epochs: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    calibration: dict[str, Any] = field(default_factory=dict)
    cpu_seconds: float = 0.0  # this process's CPU time: wall time says little on a shared machine


def blank_pipeline(opts: TrainOptions) -> Any:
    """The untrained pipeline: tokenizer + ner with its own tok2vec (one component, one file)."""
    try:
        from spacy.util import load_config_from_str, load_model_from_config
    except ImportError as exc:  # spaCy is the optional [ner] extra
        raise MissingExtraError("spaCy", "ner", "`context-editor train ner`") from exc

    text = _CONFIG.format(lang=opts.lang, tokenizer=_ZH_TOKENIZER if opts.lang == "zh" else "", hidden=opts.hidden,
                          width=opts.width, depth=opts.depth, embed=opts.embed,
                          subwords="false" if opts.lang == "zh" else "true")
    return load_model_from_config(load_config_from_str(text), auto_fill=True, validate=True)


def split_held_out(examples: list[Example]) -> tuple[list[Example], list[Example]]:
    """(train, held out): whole groups, the ones whose name hashes lowest, until `HELD_OUT` of the
    examples, or `HELD_OUT_MIN` of them but no more than `HELD_OUT_MAX` of a small corpus (at
    least one group when there are two or more)."""
    sizes = Counter(ex.group for ex in examples)
    if len(sizes) < 2:
        return examples, []
    target = max(HELD_OUT * len(examples), min(HELD_OUT_MIN, HELD_OUT_MAX * len(examples)))
    held: set[str] = set()
    count = 0
    for g in sorted(sizes, key=lambda g: (zlib.crc32(g.encode("utf-8")), g)):
        if held and count >= target:
            break
        held.add(g)
        count += sizes[g]
    return [e for e in examples if e.group not in held], [e for e in examples if e.group in held]


def _spacy_examples(nlp: Any, examples: list[Example]) -> list[Any]:
    """spaCy `Example`s; a span that does not fall on token boundaries is widened to them."""
    from spacy.training import Example as SpacyExample
    from spacy.util import filter_spans

    out = []
    for ex in examples:
        ref = nlp.make_doc(ex.text)
        spans = [sp for s, e, label in ex.spans if (sp := ref.char_span(s, e, label=label, alignment_mode="expand")) is not None]
        ref.ents = filter_spans(spans)
        out.append(SpacyExample(nlp.make_doc(ex.text), ref))
    return out


def _batches(examples: list[Any], words: int) -> list[list[Any]]:
    batches: list[list[Any]] = [[]]
    size = 0
    for ex in examples:
        n = len(ex.reference)
        if batches[-1] and size + n > words:
            batches.append([])
            size = 0
        batches[-1].append(ex)
        size += n
    return [b for b in batches if b]


def _scores(nlp: Any, held: list[Any]) -> dict[str, Any]:
    if not held:
        return {"f": None, "p": None, "r": None, "per_label": {}}
    s = nlp.evaluate(held)
    per = {label: {k: round(v[k], 4) for k in ("p", "r", "f")} for label, v in sorted((s.get("ents_per_type") or {}).items())}
    return {"f": round(s["ents_f"], 4), "p": round(s["ents_p"], 4), "r": round(s["ents_r"], 4), "per_label": per}


def train_ner(examples: list[Example], out: str | Path, opts: TrainOptions, *, command: str, data: dict[str, Any],
              log: Callable[[str], None] = lambda s: None) -> TrainResult:
    """Train on `examples`, keep the best epoch by held-out F1, write the model and its card to `out`."""
    try:
        from thinc.api import Adam, fix_random_seed
    except ImportError as exc:  # thinc comes with spaCy, the optional [ner] extra
        raise MissingExtraError("spaCy", "ner", "`context-editor train ner`") from exc

    started, cpu_started = time.monotonic(), time.process_time()
    labels = sorted({label for ex in examples for _, _, label in ex.spans})
    if not labels:
        raise Errors.TRAINING_DATA(problem="the training data has no labelled spans (empty label set)",
                                fix="annotate at least one span with a label (see docs/ner-training.md)")
    if opts.max_examples is not None and len(examples) > opts.max_examples:
        examples = sorted(examples, key=lambda e: (zlib.crc32(e.where.encode("utf-8")), e.where))[: opts.max_examples]
    train, held = split_held_out(examples)
    fix_random_seed(opts.seed)
    rng = random.Random(opts.seed)
    nlp = blank_pipeline(opts)
    ner = nlp.get_pipe("ner")
    for label in labels:
        ner.add_label(label)
    train_eg = _spacy_examples(nlp, train)
    held_eg = _spacy_examples(nlp, held)
    optimizer = Adam(0.001)
    nlp.initialize(lambda: train_eg[:2000], sgd=optimizer)
    best: tuple[float, bytes, dict[str, Any]] | None = None
    best_epoch = 0
    epochs: list[dict[str, Any]] = []
    for epoch in range(1, opts.max_epochs + 1):
        t0, c0 = time.monotonic(), time.process_time()
        rng.shuffle(train_eg)
        losses: dict[str, float] = {}
        for batch in _batches(train_eg, opts.batch_words):
            nlp.update(batch, drop=opts.dropout, sgd=optimizer, losses=losses)
        scores = _scores(nlp, held_eg)
        f = scores["f"] if scores["f"] is not None else -float(losses.get("ner", 0.0))
        epochs.append({"epoch": epoch, "loss": round(float(losses.get("ner", 0.0)), 2), "held_out_f": scores["f"],
                       "seconds": round(time.monotonic() - t0, 1), "cpu_seconds": round(time.process_time() - c0, 1)})
        log(f"epoch {epoch}: loss {losses.get('ner', 0.0):.1f}, held-out F1 {scores['f']}, {time.monotonic() - t0:.0f} s")
        if best is None or f >= best[0]:  # a tie goes to the later, longer-trained epoch
            best, best_epoch = (f, nlp.to_bytes(), scores), epoch
        elif epoch - best_epoch >= opts.patience:
            break
    assert best is not None
    nlp.from_bytes(best[1])
    t0 = time.monotonic()
    calibration = calibrate(nlp, held_eg, labels, opts.min_f1)
    log(f"calibrated on {len(held_eg)} held-out examples in {time.monotonic() - t0:.0f} s; served: "
        + ", ".join(l for l, c in calibration["labels"].items() if c["served"]))
    result = TrainResult(Path(out), labels, {**best[2], "epoch": best_epoch}, epochs, time.monotonic() - started, calibration,
                         time.process_time() - cpu_started)
    _save(nlp, result, opts, command=command, data={**data, "train_examples": len(train), "held_out_examples": len(held),
                                                     "spans": dict(sorted(Counter(l for ex in examples for _, _, l in ex.spans).items()))})
    return result


def _save(nlp: Any, result: TrainResult, opts: TrainOptions, *, command: str, data: dict[str, Any]) -> None:
    """Write into a temporary sibling directory, then move it into place: never half a model."""
    out = result.out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        # The directory name goes on the card, not in meta.json: the weights hash the same wherever they are saved.
        nlp.meta.update({"name": "context_editor_ner", "version": "0.0.0", "description": "context-editor NER (kinds of value)"})
        nlp.to_disk(tmp)
        (tmp / CALIBRATION_FILE).write_text(json.dumps(result.calibration, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        write_card(tmp, result, opts, command=command, data=data, digest=model_hash(tmp))
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    assert json.loads((out / CARD_FILE).read_text("utf-8"))["hash"] == model_hash(out)
