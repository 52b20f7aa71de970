"""How many tokens a context may take: an absolute number, or a share of the model's window
with room kept for the answer (the articles: input about 60%, output 10-20%)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import Errors


@dataclass(frozen=True)
class Window:
    """A model's context window and the part of it reserved for the model's answer."""

    tokens: int
    output_reserve: float = 0.15  # a share of the window (< 1) or a number of tokens (>= 1)

    @property
    def reserved(self) -> int:
        r = self.output_reserve
        return int(self.tokens * r) if r < 1 else int(r)

    @property
    def input_tokens(self) -> int:
        """The most a prompt may take: the window less the answer's reservation."""
        return self.tokens - self.reserved


def resolve_budget(requested: int | str | None, default: int, window: Window | None) -> int:
    """`requested`: tokens (int or "600"), a share of the window ("60%"), or None (the action's
    budget). Whatever is asked, a known window caps it so the answer keeps its reservation."""
    if isinstance(requested, str):
        text = requested.strip()
        if text.endswith("%"):
            if window is None:
                raise Errors.BAD_BUDGET(problem=f"budget {requested!r} is a share of the model's window, and no window is set",
                                        fix="pass context_window=N to ContextEditor (--context-window N), or a budget in tokens")
            try:
                share = float(text[:-1]) / 100
            except ValueError:
                share = -1.0
            if not 0 < share <= 1:
                raise Errors.BAD_BUDGET(problem=f"budget {requested!r} is not a share between 0% and 100%", fix='write it like "60%"')
            requested = int(window.tokens * share)
        elif text.isdigit():
            requested = int(text)
        else:
            raise Errors.BAD_BUDGET(problem=f"budget {requested!r} is neither a number of tokens nor a share",
                                    fix='pass tokens (600) or a share of the model window ("60%")')
    budget = default if requested is None else requested
    if budget <= 0:
        raise Errors.BAD_BUDGET(problem=f"budget {budget} must be a positive number of tokens", fix="pass a budget above 0")
    return min(budget, window.input_tokens) if window else budget
