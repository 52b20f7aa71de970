"""Extract: messages -> candidates (rules, enum synonyms, tool JSON; NER where a domain asks)."""

from .engine import Extractor, Prior, detect_language

__all__ = ["Extractor", "Prior", "detect_language"]
