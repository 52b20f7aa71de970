"""What every adapter shares: native objects to plain dicts, tool calls in one shape, placeholders."""

from __future__ import annotations

import json
from typing import Any

from ..errors import ConversationError, Errors


def plain(obj: Any) -> Any:
    """A native message object (pydantic model of anthropic, openai or langchain-core) as plain
    JSON-like data; dicts and lists are walked; everything else is returned as is."""
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json", exclude_none=True)
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


def tool_call(call_id: str | None, name: str, arguments: Any) -> dict[str, Any]:
    """A tool call in the project's (OpenAI) shape, whatever format it came from."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def placeholder(kind: str) -> str:
    """Non-text content (an image, a file, audio) is kept as a visible mark, never dropped silently."""
    return f"[{kind}]"


def message(role: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **{k: v for k, v in extra.items() if v not in (None, [], "")}}


def unknown(kind: str, where: str, fmt: str) -> ConversationError:
    return Errors.BAD_CONVERSATION(problem=f"{where}: unknown {fmt} content type {kind!r}", file="<input>",
                             fix="convert it to a text message, or remove it before ingesting")
