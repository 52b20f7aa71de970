"""Extract: messages -> candidates (rules, enum synonyms, tool JSON; NER where a domain asks)."""

from ..lang import detect_language  # re-exported: it lives below extract and inject
from .engine import Extractor, Prior

__all__ = ["Extractor", "Prior", "detect_language"]
