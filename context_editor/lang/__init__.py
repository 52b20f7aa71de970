"""Languages: detection and lexicons, below every stage (extract and inject both read them).

A language is a code and a directory holding its `lexicon.yaml` (the words the built-in finders
read: currency, bounds, ID cues, place names that contain numerals, yes-words, negation cues,
month names…) and its rule packs (`*.yaml`). Languages are registered in the
`context_editor.languages` entry-point group; the built-ins `zh` and `en` live in the bundled
`rules/` folder. `rules/common/lexicon.yaml` holds the language-neutral symbols ($, ¥, %, …).

Adding a language needs no code: see docs/adding-a-language.md.
"""

from __future__ import annotations

from .detect import detect_language
from .lexicon import Language, Lexicon, language, languages, lexicon, lexicon_fingerprint, reset

__all__ = ["Language", "Lexicon", "detect_language", "language", "languages", "lexicon", "lexicon_fingerprint", "reset"]
