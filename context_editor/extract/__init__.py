"""Extract: messages -> candidates (rules, enum synonyms, tool JSON; NER where a domain asks)."""

from .engine import Extractor, detect_language

__all__ = ["Extractor", "detect_language"]
