"""The LLM half behind one interface: Scorer and Summarizer protocols, an OpenAI-compatible
Chat Completions client for both, and the rule checks that keep a model's output honest.

Nothing here is needed by default: the rule scorer and the extractive summarizer are
deterministic and offline. A model is opt-in (`ContextEditor(scorer=ChatScorer(...))`), and every
failure falls back to the rules with an alert."""

from .chat import Answers, ChatClient, ChatScorer, ChatSummarizer
from .distil import check_line, distil
from .protocols import BatchScorer, Scorer, Summarizer

__all__ = ["Answers", "BatchScorer", "ChatClient", "ChatScorer", "ChatSummarizer", "Scorer", "Summarizer", "check_line", "distil"]
