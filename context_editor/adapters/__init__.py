"""Message-format adapters: the conversations agents already hold -> the project's messages.

Each adapter is a function from the native objects (or their JSON) to plain message dicts
(`role`, `content`, `id`, `name`, `tool_call_id`, `tool_calls` in the OpenAI shape), which
`conversation.normalise_message` then checks like any other input:
- `from_anthropic`: Anthropic Messages (`system`, text, `tool_use`, `tool_result`, images as placeholders)
- `from_openai_chat`, `from_openai_responses`: OpenAI Chat Completions and Responses
- `from_langchain`: LangChain `BaseMessage` lists
`to_messages(obj, format=None)` picks the adapter, detecting the format when none is given.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import Errors
from .anthropic import from_anthropic
from .common import plain
from .langchain import from_langchain
from .openai import from_openai_chat, from_openai_responses

ADAPTERS: dict[str, Callable[[Any], list[dict[str, Any]]]] = {
    "anthropic": from_anthropic,
    "openai-chat": from_openai_chat,
    "openai-responses": from_openai_responses,
    "langchain": from_langchain,
}
FORMATS = ("project", *ADAPTERS)
_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "image", "document", "thinking", "redacted_thinking"}
_RESPONSES_ITEMS = {"function_call", "function_call_output", "reasoning", "message"}
_RESPONSES_PARTS = {"input_text", "output_text", "input_image", "input_file"}
_LANGCHAIN_TYPES = {"human", "ai", "system", "tool", "function", "chat"}


def detect(data: Any) -> str:
    """The format of a conversation (already plain data): one of FORMATS."""
    if isinstance(data, dict):
        if "input" in data or "instructions" in data:
            return "openai-responses"
        if "system" in data:
            return "anthropic"
        data = data.get("messages", [data])
    items = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    if any(m.get("type") in _LANGCHAIN_TYPES and ("data" in m or "role" not in m) for m in items):
        return "langchain"
    if any(m.get("type") in _RESPONSES_ITEMS for m in items):
        return "openai-responses"
    parts = [p for m in items if isinstance(m.get("content"), list) for p in m["content"] if isinstance(p, dict)]
    kinds = {p.get("type") for p in parts}
    if kinds & _ANTHROPIC_BLOCKS:
        return "anthropic"
    if kinds & _RESPONSES_PARTS:
        return "openai-responses"
    if kinds - {"text"} or any("function_call" in m for m in items):
        return "openai-chat"
    return "project"


def to_messages(obj: Any, format: str | None = None) -> list[Any]:
    """The project's messages from a conversation in `format` (detected when None or "auto").
    The project's own format is returned as given (normalise_message checks it)."""
    data = plain(obj)
    fmt = detect(data) if format in (None, "auto") else format
    if fmt == "project":
        if isinstance(data, dict):
            data = data.get("messages", [data])
        return list(data) if isinstance(data, list) else [data]
    if fmt not in ADAPTERS:
        raise Errors.BAD_CONVERSATION(problem=f"unknown conversation format {format!r}",
                                      fix=f"use one of: auto, {', '.join(FORMATS)}")
    return ADAPTERS[fmt](data)


__all__ = ["to_messages", "detect", "FORMATS", "from_anthropic", "from_openai_chat", "from_openai_responses",
           "from_langchain"]
