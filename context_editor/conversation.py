"""Reading conversations: JSONL (one message per line) or a JSON array in OpenAI chat format.

The whole input is checked before anything is ingested, so a bad line costs nothing: the error
names the file, the line (or array item) and what to fix, and the store is untouched.
"""

from __future__ import annotations

import json
import math
import re
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from . import adapters
from .errors import ConversationError, Errors
from .model import ROLES

MAX_MESSAGE_BYTES = 1_000_000  # user/assistant/system text: beyond this it is not a chat message
MAX_TOOL_MESSAGE_BYTES = 16_000_000  # tool results may be large; Inject trims them
ROLE_ALIASES = {"developer": "system", "function": "tool", "human": "user", "ai": "assistant"}
_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_DEPTH = 64  # nesting of tool_calls / structured content; a chat message is never deeper
SURROGATE_FIX = "fix the encoder that produced this text (a \\ud83d escape without its pair)"


def check_value(value: Any, where: str, file: str = "<input>", line: int | None = None) -> None:
    """Refuse a value that cannot be stored and hashed as UTF-8 JSON: a lone surrogate in any
    string (keys included), a number JSON cannot hold, or nesting deeper than MAX_DEPTH.
    Iterative, so a 10,000-deep document is refused without recursion."""
    found = _first_problem(value)
    if found is None:
        return
    kind, item, trail = found
    if kind == "deep":
        raise Errors.BAD_CONVERSATION(problem=f"{where}: nested deeper than {MAX_DEPTH} levels", file=file, line=line,
                                      fix="flatten the structure; a chat message or tool call is never this deep")
    path = _path(where, trail)
    if kind == "number":
        raise Errors.BAD_CONVERSATION(problem=f"{path}: {item} is not a JSON number", file=file, line=line,
                                      fix="write numbers that JSON can hold (no NaN or Infinity)")
    lone = _SURROGATE.search(item)
    assert lone is not None
    raise Errors.BAD_CONVERSATION(problem=f"{path}: lone surrogate \\u{ord(lone.group(0)):04x} at character {lone.start()} "
                                  "is not valid Unicode", file=file, line=line, fix=SURROGATE_FIX)


_KEY = object()  # the step of a trail that leads to a dict's key rather than to its value

# Where an item lies, kept as a linked list (parent trail, step) that is only spelled out when the
# item is refused: the common case, a value with nothing to refuse, never formats a path. A stack
# entry carries its parent's trail and its own step, so a link is made per container, not per item.
_Trail = tuple[Any, Any] | None


def _first_problem(value: Any) -> tuple[str, Any, _Trail] | None:
    """The first item `check_value` refuses, as (kind, item, trail), or None. A dict or list at
    MAX_DEPTH with anything in it is "deep": its contents would lie deeper than MAX_DEPTH."""
    stack: list[tuple[Any, int, _Trail, Any]] = [(value, 0, None, None)]
    search, pop, push = _SURROGATE.search, stack.pop, stack.append
    while stack:
        item, depth, parent, step = pop()
        if isinstance(item, str):
            if search(item):
                return "surrogate", item, _link(parent, step)
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "number", item, _link(parent, step)
        elif isinstance(item, dict):
            trail = _link(parent, step)
            if item and depth >= MAX_DEPTH:
                return "deep", item, trail
            for k, v in item.items():
                if isinstance(k, str):
                    if search(k):
                        return "surrogate", k, (trail, _KEY)
                    push((v, depth + 1, trail, k))
                else:  # a key JSON would turn into a string: checked as an item; its value keeps the dict's path
                    push((k, depth + 1, trail, _KEY))
                    push((v, depth + 1, trail, None))
        elif isinstance(item, (list, tuple)):
            trail = _link(parent, step)
            if item and depth >= MAX_DEPTH:
                return "deep", item, trail
            stack.extend((v, depth + 1, trail, i) for i, v in enumerate(item))
    return None


def _link(parent: _Trail, step: Any) -> _Trail:
    return parent if step is None else (parent, step)


def _path(where: str, trail: _Trail) -> str:
    """`where` followed by the trail's steps: `.key` into a dict, `[i]` into a list, ` key` for a dict key."""
    steps = []
    while trail is not None:
        trail, step = trail
        steps.append(" key" if step is _KEY else f"[{step}]" if isinstance(step, int) else f".{step}")
    return where + "".join(reversed(steps))


def _content_text(content: Any, where: str, file: str, line: int | None) -> str:
    """OpenAI content may be a string, null (tool calls only) or a list of typed parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    if isinstance(content, (dict, int, float, bool)):
        return json.dumps(content, ensure_ascii=False)  # structured tool output given as JSON
    raise Errors.BAD_CONVERSATION(problem=f"{where}: `content` must be a string, got {type(content).__name__}",
                            file=file, line=line, fix="put the message text in a JSON string")


def normalise_message(raw: Any, *, file: str = "<input>", line: int | None = None, where: str = "message") -> dict[str, Any]:
    """Check one raw message and return it with only the known keys."""
    check_value(raw, where, file, line)
    if not isinstance(raw, dict):
        raise Errors.BAD_CONVERSATION(problem=f"{where}: expected a JSON object, got {type(raw).__name__}", file=file, line=line,
                                fix='write each message as {"role": "user", "content": "..."}')
    role = raw.get("role")
    role = ROLE_ALIASES.get(role, role) if isinstance(role, str) else role
    if role not in ROLES:
        raise Errors.BAD_CONVERSATION(problem=f"{where}: unknown role {raw.get('role')!r}", file=file, line=line,
                                fix=f"use one of: {', '.join(ROLES)}")
    content = _content_text(raw.get("content"), where, file, line)
    limit = MAX_TOOL_MESSAGE_BYTES if role == "tool" else MAX_MESSAGE_BYTES
    size = len(content.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise Errors.BAD_CONVERSATION(problem=f"{where}: message is {size:,} bytes, the limit for {role} messages is {limit:,}",
                                file=file, line=line, fix="split the message or store the payload elsewhere and pass a reference")
    msg: dict[str, Any] = {"role": role, "content": content}
    ts = raw.get("timestamp")
    if ts is not None:
        try:
            datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
        except ValueError:
            raise Errors.BAD_CONVERSATION(problem=f"{where}: timestamp {ts!r} is not ISO 8601", file=file, line=line,
                                    fix="write it like 2024-05-01T10:00:00+08:00") from None
        msg["timestamp"] = str(ts).replace("Z", "+00:00")
    for key in ("id", "name", "tool_call_id"):
        if raw.get(key) is not None:
            msg[key] = str(raw[key])
    if raw.get("tool_calls"):
        if not isinstance(raw["tool_calls"], list):
            raise Errors.BAD_CONVERSATION(problem=f"{where}: `tool_calls` must be a list", file=file, line=line,
                                    fix="use the OpenAI format: a list of {id, type, function: {name, arguments}}")
        msg["tool_calls"] = raw["tool_calls"]
    meta = raw.get("metadata")
    for key, what, example in (("asks", "field names", '{"role": "assistant", "content": "...", "asks": ["budget_max"]}'),
                               ("domains", "domain names", '{"role": "user", "content": "...", "domains": ["hotel"]}')):
        names = raw.get(key, meta.get(key) if isinstance(meta, dict) else None)
        if names is not None:
            if not isinstance(names, list) or not all(isinstance(a, str) for a in names):
                raise Errors.BAD_CONVERSATION(problem=f"{where}: `{key}` must be a list of {what}", file=file, line=line,
                                              fix=f"write it like {example}")
            if names:
                msg[key] = names
    return msg


EXPORT_RECORDS = ("session", "message", "edit")  # record types of `context-editor audit export`


def _too_deep(file: str, line: int) -> ConversationError:
    return Errors.BAD_CONVERSATION(problem=f"JSON nested deeper than {MAX_DEPTH} levels", file=file, line=line,
                             fix="flatten the structure; a chat message or tool call is never this deep")


def parse_conversation(data: bytes, file: str = "<input>", format: str | None = None) -> list[dict[str, Any]]:
    """Parse a whole conversation (JSONL, a JSON array, the JSONL of `audit export` (its messages
    are taken with their timestamps), or a request object such as Anthropic's {"system",
    "messages"} or OpenAI Responses' {"instructions", "input"}) in `format` (detected when None:
    see `adapters`); raise on the first bad line or message."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise Errors.BAD_CONVERSATION(problem=f"invalid UTF-8 at byte {exc.start}", file=file, line=line,
                                fix="save the file as UTF-8") from None
    stripped = text.lstrip("\ufeff \t\r\n")
    whole = _whole_document(stripped, file)
    if whole is not None:
        return adapt(whole, file, format)
    rows: list[tuple[int, Any]] = []
    for n, row in enumerate(text.lstrip("\ufeff").splitlines(), start=1):
        if not row.strip():
            continue
        try:
            raw = json.loads(row)
        except json.JSONDecodeError as exc:
            raise Errors.BAD_CONVERSATION(problem=f"invalid JSON: {exc.msg} (column {exc.colno})", file=file, line=n,
                                    fix='each line must be one JSON object like {"role": "user", "content": "..."}') from None
        except RecursionError:
            raise _too_deep(file, n) from None
        if isinstance(raw, dict) and raw.get("type") in EXPORT_RECORDS and "session" in raw:
            if raw["type"] != "message":
                continue  # an `audit export` file: its header and edits are the record, the messages are the input
            raw = {k: v for k, v in raw.items() if k != "type"}
        rows.append((n, raw))
    if adapters.detect([r for _, r in rows]) == "project" and format in (None, "auto", "project"):
        return [normalise_message(raw, file=file, line=n, where=f"line {n}") for n, raw in rows]
    return adapt([r for _, r in rows], file, format)


def _whole_document(text: str, file: str) -> Any:
    """A JSON array, or one JSON object holding a conversation; None for JSONL."""
    if text.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise Errors.BAD_CONVERSATION(problem=f"invalid JSON: {exc.msg}", file=file, line=exc.lineno,
                                    fix="fix the JSON syntax (or write one message per line as JSONL)") from None
        except RecursionError:
            raise _too_deep(file, 1) from None
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            return None  # several lines: JSONL
        except RecursionError:
            raise _too_deep(file, 1) from None
        if isinstance(doc, dict) and ({"messages", "input"} & set(doc)):
            return doc
    return None


def adapt(doc: Any, file: str = "<input>", format: str | None = None) -> list[dict[str, Any]]:
    """Messages of any supported format, converted by its adapter and checked one by one."""
    try:
        raw = adapters.to_messages(doc, format)
    except ConversationError as exc:
        exc.file = file
        raise
    except (KeyError, TypeError, AttributeError) as exc:  # a required key of the format is missing
        raise Errors.BAD_CONVERSATION(problem=f"not a valid {format or adapters.detect(doc)} conversation: {type(exc).__name__} {exc}",
                                file=file, fix="check the messages against the format's documentation, "
                                "or pass --format explicitly") from None
    return [normalise_message(m, file=file, where=f"message {i}") for i, m in enumerate(raw)]


def read_conversation(path: str, format: str | None = None) -> list[dict[str, Any]]:
    """A conversation from a file path, or stdin for `-`."""
    if path == "-":
        return parse_conversation(sys.stdin.buffer.read(), "<stdin>", format)
    p = Path(path)
    if not p.exists():
        raise Errors.BAD_CONVERSATION(problem="file not found", file=path, fix="check the path of the conversation file")
    return parse_conversation(p.read_bytes(), path, format)
