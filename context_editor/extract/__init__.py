"""Extract: messages -> candidates (rules, enum synonyms, tool JSON; NER where a domain asks)."""

from ..lang import detect_language  # re-exported: it lives below extract and inject
from .engine import Extractor

__all__ = ["Extractor", "detect_language"]
