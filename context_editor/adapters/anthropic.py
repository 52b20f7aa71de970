"""Anthropic Messages API -> the project's messages.

`system` (a string or text blocks) becomes a system message. In `messages`, text blocks are
the text; `image` and `document` blocks are placeholders; an assistant's `tool_use` blocks
become tool calls; a user's `tool_result` blocks become tool messages (answering the call by
its id, named after the called tool), emitted before the user's own text as the API orders them.
`thinking` blocks are the model's private reasoning, not conversation, and are left out.
"""

from __future__ import annotations

from typing import Any

from .common import message, placeholder, plain, tool_call, unknown

PLACEHOLDERS = {"image": "image", "document": "document", "search_result": "search result"}
HIDDEN = {"thinking", "redacted_thinking"}


def _text(blocks: Any, where: str) -> str:
    if isinstance(blocks, str):
        return blocks
    parts = []
    for block in blocks or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind in PLACEHOLDERS:
            parts.append(placeholder(PLACEHOLDERS[kind]))
        elif kind not in HIDDEN:
            raise unknown(str(kind), where, "Anthropic")
    return "\n".join(parts)


def from_anthropic(messages: Any, system: Any = None) -> list[dict[str, Any]]:
    """`messages`: MessageParam dicts or Message objects (responses), or a whole request
    {"system", "messages", ...}; `system`: the request's system prompt."""
    data = plain(messages)
    if isinstance(data, dict) and "messages" in data:
        system, data = data.get("system", system), data["messages"]
    out: list[dict[str, Any]] = []
    if system:
        out.append(message("system", _text(plain(system), "system")))
    names: dict[str, str] = {}  # tool_use id -> tool name, to name the results
    for i, m in enumerate(data if isinstance(data, list) else [data]):
        where, content = f"message {i}", m.get("content")
        if isinstance(content, str):
            out.append(message(m.get("role", "user"), content, id=m.get("id")))
            continue
        text_blocks, calls = [], []
        for block in content or []:
            kind = block.get("type")
            if kind in ("tool_use", "server_tool_use"):
                names[block["id"]] = block["name"]
                calls.append(tool_call(block["id"], block["name"], block.get("input", {})))
            elif kind == "tool_result":
                out.append(message("tool", _text(block.get("content", ""), where), tool_call_id=block.get("tool_use_id"),
                                   name=names.get(block.get("tool_use_id", ""))))
            else:
                text_blocks.append(block)
        text = _text(text_blocks, where)
        if text or calls:
            out.append(message(m.get("role", "user"), text, id=m.get("id"), tool_calls=calls))
    return out
