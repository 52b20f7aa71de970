"""Inject: per-action XML contexts within an exact token budget."""

from .render import RenderedContext, Renderer, format_value
from .tokens import count_tokens

__all__ = ["Renderer", "RenderedContext", "format_value", "count_tokens"]
