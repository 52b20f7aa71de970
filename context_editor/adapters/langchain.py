"""LangChain `BaseMessage` lists (or `messages_to_dict` output) -> the project's messages.

HumanMessage -> user, AIMessage -> assistant (its `tool_calls` become tool calls), SystemMessage
-> system, ToolMessage -> tool (answering its `tool_call_id`); list content keeps its text and
marks images as placeholders.
"""

from __future__ import annotations

from typing import Any

from .common import message, placeholder, plain, tool_call, unknown

ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool",
         "HumanMessageChunk": "user", "AIMessageChunk": "assistant"}


def _content(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        if isinstance(part, str):
            parts.append(part)
        elif part.get("type") == "text":
            parts.append(part.get("text", ""))
        elif part.get("type") in ("image_url", "image"):
            parts.append(placeholder("image"))
        elif part.get("type") in ("file", "audio"):
            parts.append(placeholder(part["type"]))
        elif part.get("type") not in ("tool_use", "reasoning", "thinking"):  # tool_use repeats tool_calls
            raise unknown(str(part.get("type")), where, "LangChain")
    return "\n".join(parts)


def from_langchain(messages: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for i, raw in enumerate(plain(messages)):
        m = raw["data"] if "data" in raw and isinstance(raw["data"], dict) else raw  # messages_to_dict form
        kind, where = m.get("type", raw.get("type")), f"message {i}"
        role = m.get("role") if kind == "chat" else ROLES.get(kind)
        if role is None:
            raise unknown(str(kind), where, "LangChain message")
        calls = [tool_call(c.get("id"), c["name"], c.get("args", {})) for c in m.get("tool_calls") or []]
        for c in m.get("tool_calls") or []:
            if c.get("id"):
                names[c["id"]] = c["name"]
        name = m.get("name") or (names.get(m.get("tool_call_id", "")) if role == "tool" else None)
        out.append(message(role, _content(m.get("content"), where), id=m.get("id"), name=name,
                           tool_call_id=m.get("tool_call_id"), tool_calls=calls))
    return out
