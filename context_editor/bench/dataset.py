"""The neutral shape both benchmark datasets are read into.

A `Dialogue` is a list of utterances; each user utterance that has gold state carries its
frames: domain -> field -> `Gold`. Field names are the imported domains' own, so the harness
never needs to know which dataset it is scoring.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .metrics import Gold


@dataclass(frozen=True)
class Utterance:
    role: str  # "user" | "assistant"
    text: str
    frames: dict[str, dict[str, Gold]] | None = None  # gold after this user turn; None: not scored
    # The domains this turn speaks for, when the dataset gives them as input (SGD: the services of
    # the turn's frames, which its official evaluation hands the tracker); empty: not known.
    domains: tuple[str, ...] = ()


@dataclass(frozen=True)
class Dialogue:
    id: str
    domains: tuple[str, ...]  # the domains (one editor each) this dialogue is fed to
    utterances: tuple[Utterance, ...]


@dataclass
class Dataset:
    """A benchmark input: imported domain files, the fields gold can speak about, dialogues."""

    name: str
    domain_files: dict[str, Path]  # domain name -> imported domain file
    scored_fields: dict[str, frozenset[str]]  # domain -> fields compared with gold (no intents, no tool-only fields)
    dialogues: list[Dialogue]
    now: datetime  # the clock of the dialogues ("today" in SGD is 2019-03-01)
    split: str  # the published split read ("dev", "val"), for reports that say what was measured
    # CrossWOZ gold lists every domain each turn; a domain counts as a frame when gold or the
    # editor has something in it. SGD names the frames of each turn itself.
    frames_from_predictions: bool = False
    # How the dataset writes two kinds of value (metrics.scored_value): amounts in its own currency
    # bare ("1520", no "USD"), and no preference as a word of its own ("dontcare").
    currency: str | None = None
    no_preference: str | None = None
