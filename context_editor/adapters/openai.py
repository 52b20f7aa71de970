"""OpenAI Chat Completions and Responses formats -> the project's messages.

Chat: messages pass through (role, content, tool_calls, tool_call_id); content parts keep their
text, and images, audio and files become placeholders; a tool message is named after the call
it answers. Responses: `instructions` becomes a system message; message items (typed or just
role + content) keep their text; `function_call` items become the assistant's tool calls
(consecutive ones in one message) and `function_call_output` items tool messages; `reasoning`
items are the model's private reasoning and are left out.
"""

from __future__ import annotations

from typing import Any

from .common import message, placeholder, plain, tool_call, unknown

PART_PLACEHOLDERS = {"image_url": "image", "input_image": "image", "input_audio": "audio", "input_file": "file",
                     "file": "file"}
TEXT_PARTS = {"text", "input_text", "output_text"}


def _parts(content: Any, where: str, fmt: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    parts = []
    for part in content:
        kind = part.get("type")
        if kind in TEXT_PARTS:
            parts.append(part.get("text", ""))
        elif kind == "refusal":
            parts.append(part.get("refusal", ""))
        elif kind in PART_PLACEHOLDERS:
            parts.append(placeholder(PART_PLACEHOLDERS[kind]))
        else:
            raise unknown(str(kind), where, fmt)
    return "\n".join(parts)


def from_openai_chat(messages: Any) -> list[dict[str, Any]]:
    """ChatCompletionMessageParam dicts or ChatCompletionMessage objects, or a request {"messages"}."""
    data = plain(messages)
    if isinstance(data, dict) and "messages" in data:
        data = data["messages"]
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for i, m in enumerate(data):
        calls = list(m.get("tool_calls") or [])
        if m.get("function_call"):  # the legacy single function call
            calls.append(tool_call(None, m["function_call"]["name"], m["function_call"].get("arguments", "{}")))
        for c in calls:
            if c.get("id"):
                names[c["id"]] = c.get("function", {}).get("name", "")
        name = m.get("name") or (names.get(m.get("tool_call_id", "")) if m.get("role") == "tool" else None)
        out.append(message(m["role"], _parts(m.get("content"), f"message {i}", "OpenAI chat"), id=m.get("id"),
                           name=name, tool_call_id=m.get("tool_call_id"), tool_calls=calls, timestamp=m.get("timestamp")))
    return out


def from_openai_responses(items: Any, instructions: str | None = None) -> list[dict[str, Any]]:
    """Responses API input items or output items (dicts or objects), or a request {"instructions", "input"}."""
    data = plain(items)
    if isinstance(data, dict) and "input" in data:
        instructions, data = data.get("instructions", instructions), data["input"]
    if isinstance(data, str):
        data = [{"role": "user", "content": data}]
    out: list[dict[str, Any]] = [message("system", instructions)] if instructions else []
    names: dict[str, str] = {}
    for i, item in enumerate(data):
        kind, where = item.get("type", "message"), f"item {i}"
        if kind == "message":
            role = item["role"]
            out.append(message(role, _parts(item.get("content"), where, "OpenAI Responses"), id=item.get("id")))
        elif kind == "function_call":
            names[item["call_id"]] = item["name"]
            call = tool_call(item["call_id"], item["name"], item.get("arguments", "{}"))
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":
                last["tool_calls"] = [*last.get("tool_calls", []), call]  # one assistant turn, several calls
            else:
                out.append(message("assistant", "", tool_calls=[call]))
        elif kind == "function_call_output":
            output = item.get("output", "")
            text = output if isinstance(output, str) else _parts(output, where, "OpenAI Responses")
            out.append(message("tool", text, tool_call_id=item["call_id"], name=names.get(item["call_id"])))
        elif kind != "reasoning":
            raise unknown(str(kind), where, "OpenAI Responses")
    return out


__all__ = ["from_openai_chat", "from_openai_responses"]
