"""What a scorer and a summarizer must be (structural: any object with these methods fits)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..model import Message


@runtime_checkable
class Scorer(Protocol):
    """Relevance of an older message to the action being rendered, on the articles' 1-5 scale.
    The renderer applies the thresholds: >= 4 keep, 3 fill by recency, <= 2 compress."""

    def __call__(self, message: Message, ctx: dict[str, Any]) -> float: ...


@runtime_checkable
class BatchScorer(Scorer, Protocol):
    """A scorer that scores all older messages of a render in one call (one LLM request)."""

    def score_batch(self, messages: list[Message], ctx: dict[str, Any]) -> list[float]: ...


@runtime_checkable
class Summarizer(Protocol):
    """Distils one trace into one short line (checked by `distil.check_line`)."""

    def __call__(self, text: str, ctx: dict[str, Any]) -> str: ...
