"""The contexts the editor is compared with: the full history, last-K-utterance windows, and
the window an agent could send for the editor's price (the most recent whole utterances that fit
in as many tokens as the editor's context).

Each utterance is one line `role: text` ending in a newline. o200k_base never merges a token
across a newline followed by a letter, so the tokens of the joined history are exactly the sum
of the tokens of its lines: counting each line once keeps the work per utterance constant.
"""

from __future__ import annotations

from ..inject.tokens import count_tokens
from .metrics import norm

WINDOWS = (5, 10)


class HistoryMeter:
    """Token counts and normalised text of the baselines for one dialogue, line by line."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.tokens: list[int] = []
        self.normed: list[str] = []
        self.total = 0

    def add(self, role: str, text: str) -> None:
        line = f"{role}: {text.strip()}\n"
        n = count_tokens(line)
        self.lines.append(line)
        self.tokens.append(n)
        self.normed.append(norm(line))
        self.total += n

    def sizes(self) -> dict[str, int]:
        out = {"full_history": self.total}
        for k in WINDOWS:
            out[f"window_{k}"] = sum(self.tokens[-k:])
        return out

    def texts(self) -> dict[str, str]:
        """Each baseline's normalised text, for coverage checks."""
        out = {"full_history": "".join(self.normed)}
        for k in WINDOWS:
            out[f"window_{k}"] = "".join(self.normed[-k:])
        return out

    def equal_window(self, tokens: int) -> tuple[int, str]:
        """The most recent whole utterances whose tokens sum to at most `tokens`: their token
        count and normalised text. Never larger than the editor's context it is compared with."""
        used, first = 0, len(self.tokens)
        while first > 0 and used + self.tokens[first - 1] <= tokens:
            first -= 1
            used += self.tokens[first]
        return used, "".join(self.normed[first:])
