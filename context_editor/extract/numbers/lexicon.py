"""The number finders' vocabulary, read from the registered languages' lexicons.

Every word list the finders use (currency words, bound and budget cues, ID cues, units, place
names that contain numerals) lives in `rules/<lang>/lexicon.yaml`; this module turns the merged
lexicon into the lookups and regex fragments the grammar and the finders compile. It is rebuilt
when the lexicon changes (a language registered at run time).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

from ...lang import Lexicon, lexicon

FLAGS = re.IGNORECASE | re.ASCII


def alt(words: Iterable[str]) -> str:
    """Regex alternation of literal words, longest first so ``块钱`` wins over ``块``.

    A space in a word matches any run of whitespace.
    """
    escaped = (re.escape(w).replace(r"\ ", r"\s+") for w in sorted(set(words), key=len, reverse=True))
    return "(?:" + "|".join(escaped) + ")"


def words_pattern(words: Iterable[str]) -> str:
    """Alternation of ``words`` (longest first) that must not be glued to other Latin letters.

    ``max`` must not fire inside ``maximum`` nor ``to`` inside ``total``; CJK words are unaffected.
    """
    return rf"(?<![a-z]){alt(words)}(?![a-z])"


@dataclass(frozen=True, eq=False)  # hashed by identity: one per lexicon, a cache key
class Vocabulary:
    """The merged word lists, in the shapes the finders look them up."""

    currency_of: dict[str, str]  # lower-cased word or symbol -> ISO code
    currency_prefix: tuple[str, ...]  # markers written before an amount ($, ¥, RMB…)
    currency_codes: tuple[str, ...]  # ISO codes that may be glued to digits (RMB2000)
    bound_before: dict[str, tuple[str, ...]]  # "max"/"min" -> cues before an amount
    bound_after: dict[str, tuple[str, ...]]  # "max"/"min" -> cues after an amount
    budget: tuple[str, ...]
    filler: tuple[str, ...]
    range: tuple[str, ...]
    id_cues: tuple[str, ...]
    not_numbers: tuple[str, ...]  # words and place names that merely contain a numeral
    duration: dict[str, tuple[str, ...]]  # unit -> words
    people: dict[str, tuple[str, ...]]  # adult / child / people -> words
    measure: tuple[str, ...]  # other units after a number that rule out money


def _table(lex: Lexicon, path: str) -> dict[str, tuple[str, ...]]:
    return {k: tuple(v) for k, v in lex.table(path).items()}


@lru_cache(maxsize=2)
def _vocabulary(lex: Lexicon) -> Vocabulary:
    return Vocabulary(
        currency_of=lex.inverse("currency"),
        currency_prefix=tuple(w.lower() for w in lex.words("currency_prefix")),
        currency_codes=tuple(w.lower() for w in lex.words("currency_codes")),
        bound_before=_table(lex, "bound/before"),
        bound_after=_table(lex, "bound/after"),
        budget=tuple(lex.words("budget")),
        filler=tuple(lex.words("filler")),
        range=tuple(lex.words("range")),
        id_cues=tuple(lex.words("id_cues")),
        not_numbers=tuple(lex.words("not_numbers") + lex.words("places")),
        duration=_table(lex, "duration"),
        people=_table(lex, "people"),
        measure=tuple(lex.words("measure")),
    )


def vocabulary() -> Vocabulary:
    """The vocabulary of the currently registered languages."""
    return _vocabulary(lexicon())
