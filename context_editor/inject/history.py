"""Working memory: which raw messages an action's context shows, and in what shape.

- The last K rounds are shown verbatim (`recent_rounds` of the action).
- Older messages inside `history_rounds` are ranked by a deterministic relevance score: the
  message's role, being the source of a value the action shows, lexical overlap with the action
  and its fields, references to IDs in state; recency decays only middling scores, so a strong
  old message (the round-1 budget) is never outranked by recent chit-chat.
- An assistant tool call and the tool results answering it form one unit: kept or dropped whole.
- Identical tool results (same tool, same content) are shown once, the latest.
- Large JSON tool results are trimmed by the domain's per-tool declaration (keep conclusion keys,
  cut long arrays to N items with "N more omitted"); nothing is ever cut mid-value.
- Spans that were the source of a field outside the action's scope are masked, and so are its
  keys and values inside tool JSON (a card number in a payment result never reaches `track`).
- Personal data (e-mail, phone, card and resident id numbers, passports; see pii.py) is masked
  in every message unless the action shows a field holding that value.
Any scorer (`ContextEditor(scorer=...)`: a callable `(message, ctx) -> 1..5`, optionally with a
`score_batch(messages, ctx)` for one call per render, e.g. `context_editor.llm.ChatScorer`) goes
through the articles' thresholds: >= 4 keep, 3 fill the budget by recency, <= 2 compress.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any, Callable

from ..domain import ActionSpec, Domain
from ..model import Message, State
from . import pii

ROLE_WEIGHT = {"user": 1.0, "tool": 0.8, "assistant": 0.5, "system": 0.3}
SOURCE_BONUS = 2.0  # the message a shown value came from
REFERENCE_BONUS = 0.5  # mentions an ID or value that is in state
MIDDLING = (0.5, 2.0)  # only scores in this band decay with age
MIN_SCORE = 0.8  # below this an older message is noise, whatever the budget
KEEP, FILL = 4.0, 3.0  # the articles' thresholds on a 1-5 score: >= 4 keep, 3 fill by recency, <= 2 compress
HALF_LIFE_ROUNDS = 10.0
_LATIN_WORD = re.compile(r"[A-Za-z0-9]+")
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]+")
# An identifier as agents and tools write them (MU5101, ORD-2024-001, SKU12345): shared with the
# digest and the entity graph (compact.py), so "is this an ID" has one answer in inject.
ID = re.compile(r"(?<![A-Za-z0-9-])(?:[A-Z]{1,6}-?\d[A-Za-z0-9-]*)(?![A-Za-z0-9-])")

Scorer = Callable[[Message, dict[str, Any]], float]


@dataclass
class Unit:
    """One droppable piece of history: a message, or a tool call with its results."""

    messages: list[Message]
    score: float
    reason: str | None = None  # "retrieved": brought back by search from before the loaded window

    @property
    def round(self) -> int:
        return self.messages[0].round


def terms(text: str) -> list[str]:
    """Latin words (lowercased) and CJK character bigrams, in order, repeats kept (single Chinese
    characters match far too much; a bigram is how both languages get comparable units)."""
    out = [w.lower() for w in _LATIN_WORD.findall(text)]
    for run in _CJK_RUN.findall(text):
        out.extend(run[i:i + 2] for i in range(max(len(run) - 1, 1)))
    return out


@lru_cache(maxsize=1 << 16)
def words(text: str) -> frozenset[str]:
    """The set of `terms`. Cached: the same message and summary-line texts are matched on every render."""
    return frozenset(terms(text))


_STOP = {"the", "a", "of", "to", "and", "is"}
_static_vocabulary: dict[tuple[str, str], frozenset[str]] = {}


def _action_words(domain: Domain, action: ActionSpec) -> frozenset[str]:
    """The fixed part of an action's vocabulary (name, fields, synonyms), once per domain version."""
    key = (domain.version_hash, action.name)
    if key not in _static_vocabulary:
        vocab = words(action.name.replace("_", " ")) | words(action.description)
        for name in action.fields:
            vocab |= words(name.replace("_", " "))
            for canonical, phrases in domain.fields[name].synonyms.items():
                vocab |= words(canonical) | {w for p in phrases for w in words(p)}
        _static_vocabulary[key] = frozenset(vocab - _STOP)
    return _static_vocabulary[key]


def action_vocabulary(domain: Domain, action: ActionSpec, state: State) -> set[str]:
    """Words that make a message relevant to this action: its name, its fields, their synonyms and values."""
    said: set[str] = set()
    for name in action.fields:
        value = state.get(name)
        if value is not None:
            said |= words(json.dumps(value, ensure_ascii=False))
    vocab = set(_action_words(domain, action))  # one copy of the (possibly large) fixed part
    vocab.update(said - _STOP)
    return vocab


def default_score(msg: Message, ctx: dict[str, Any]) -> float:
    """Deterministic relevance of an older message to the action being rendered."""
    return _aged(msg, ctx, _unaged(msg, ctx))


def _unaged(msg: Message, ctx: dict[str, Any]) -> float:
    """`default_score` before its decay with age: the same from render to render while the
    action's vocabulary, the sources of shown values and the references stay (`select_history`
    keeps it per message)."""
    score = ROLE_WEIGHT.get(msg.role, 0.3)
    if msg.index in ctx["source_indexes"]:
        score += SOURCE_BONUS
    w = words(msg.content[:4000])
    if w:
        score += len(w & ctx["vocabulary"]) / math.sqrt(len(w))
    if any(ref in msg.content for ref in ctx["references"]):
        score += REFERENCE_BONUS
    return score


def _aged(msg: Message, ctx: dict[str, Any], score: float) -> float:
    low, high = MIDDLING
    # A retrieved message matched this very query: its age says nothing against it.
    if low < score < high and msg.index not in ctx.get("retrieved", ()):
        age = ctx["round"] - msg.round
        score *= 0.5 ** (age / HALF_LIFE_ROUNDS)
    return round(score, 6)


def chains(messages: list[Message]) -> list[list[Message]]:
    """Group each assistant tool call with the tool messages that answer it."""
    units: list[list[Message]] = []
    open_calls: dict[str, list[Message]] = {}
    for m in messages:
        if m.role == "tool" and m.tool_call_id and m.tool_call_id in open_calls:
            open_calls[m.tool_call_id].append(m)
            continue
        unit = [m]
        units.append(unit)
        for call in m.tool_calls:
            if isinstance(call, dict) and call.get("id"):
                open_calls[str(call["id"])] = unit
    return units


def dedupe_tool_results(messages: list[Message]) -> list[Message]:
    """Drop a tool result identical (same tool, same content) to a later one."""
    seen: set[tuple[Any, ...]] = set()
    keep: list[Message] = []
    for m in reversed(messages):
        key = (m.name, m.content) if m.role == "tool" else None
        if key is not None and key in seen:
            continue
        if key is not None:
            seen.add(key)
        keep.append(m)
    return keep[::-1]


def trim_json(value: Any, keep: tuple[str, ...], max_items: int, depth: int = 0) -> Any:
    """Keep only `keep` keys and the first `max_items` of long arrays.

    `keep` filters an object only when it names at least one of that object's keys: declaring
    `keep: [orders, total]` keeps each order whole instead of emptying it, while `keep: [sku]`
    still trims the items that carry a `sku`."""
    if depth > 20:
        return "…"
    if isinstance(value, dict):
        items: list[tuple[Any, Any]] = list(value.items())
        if keep and any(k in value for k in keep):
            items = [(k, v) for k, v in value.items() if k in keep]
        return {k: trim_json(v, keep, max_items, depth + 1) for k, v in items}
    if isinstance(value, list):
        head = [trim_json(v, keep, max_items, depth + 1) for v in value[:max_items]]
        if len(value) > max_items:
            head.append(f"{len(value) - max_items} more omitted")
        return head
    return value


@dataclass
class Hidden:
    """What an action may not see of fields outside its scope (e.g. card numbers): the source
    spans per message, the JSON keys that carry them in tool results, and their values."""

    spans: dict[int, list[tuple[int, int, str]]]
    keys: dict[str, str]  # lower-cased JSON key -> field
    values: dict[str, str]  # value as text (4+ characters) -> field
    allowed: set[str] = field(default_factory=set)  # personal values the action may show: its own fields' values
    protected: dict[str, str] = field(default_factory=dict)  # a `pii:` field's value as text -> what is shown instead
    protected_keys: dict[str, tuple[str, str]] = field(default_factory=dict)  # its JSON keys -> (policy, field)

    def fingerprint(self, spans: bool = True) -> tuple[Any, ...]:
        """Everything hidden, hashable (for memo keys): every field, so one added later is never
        left out of a key; without the per-message spans if asked."""
        return tuple(_frozen(getattr(self, f.name)) for f in fields(self) if spans or f.name != "spans")


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return frozenset((k, tuple(v) if isinstance(v, list) else v) for k, v in value.items())
    return frozenset(value) if isinstance(value, set) else value


def shown_text(text: str, hidden: Hidden) -> str:
    """A text as any context may show it: hidden values replaced, `pii:` values under their
    policy, other personal data masked (turns and summary lines alike)."""
    for value, name in hidden.values.items():
        if value in text:
            text = text.replace(value, f"[{name} hidden]")
    for value in sorted(hidden.protected, key=len, reverse=True):  # "4111 1111…" before a part of it
        if value in text:
            text = text.replace(value, hidden.protected[value])
    return pii.mask(text, hidden.allowed)


def mask_json(value: Any, hidden: Hidden, depth: int = 0) -> Any:
    """The JSON with every value under a hidden key, and every hidden value, replaced."""
    if depth > 64:
        return "…"
    if isinstance(value, dict):
        return {k: f"[{hidden.keys[str(k).lower()]} hidden]" if str(k).lower() in hidden.keys
                else _protect_under(hidden.protected_keys[str(k).lower()], v)
                if str(k).lower() in hidden.protected_keys and _scalar(v)
                else mask_json(v, hidden, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_json(v, hidden, depth + 1) for v in value]
    if _scalar(value) and str(value) in hidden.values:
        return f"[{hidden.values[str(value)]} hidden]"
    if _scalar(value) and str(value) in hidden.protected:
        return hidden.protected[str(value)]
    return value


def _protect_under(policy_field: tuple[str, str], value: Any) -> str:
    policy, name = policy_field
    return pii.protect(policy, str(value), name)


def _scalar(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (str, int, float))


def tool_text(domain: Domain, msg: Message, hidden: Hidden | None = None) -> str:
    """What the model sees of a tool result: JSON with hidden keys and values masked and trimmed
    by the tool's rule, or the text as is."""
    rule = domain.tools.get(msg.name or "") or domain.tools.get("*")
    content = msg.content
    if (rule is None and not (hidden and (hidden.keys or hidden.values or hidden.protected_keys or hidden.protected))) or not content.lstrip().startswith(("{", "[")):
        return content
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        return content
    masked = mask_json(data, hidden) if hidden else data
    if rule is None and masked == data:
        return content
    return json.dumps(trim_json(masked, rule.keep, rule.max_items) if rule else masked, ensure_ascii=False)


def hidden_spans(domain: Domain, action: ActionSpec, state: State) -> Hidden:
    """What this action may not see. Built once per render from the history of the scoped fields
    only: every entry, those a capped state keeps only in compact form (`FieldState.earlier`) first."""
    out = Hidden({}, {}, {})
    for name in action.fields:
        value = state.get(name)
        spec = domain.fields.get(name)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and not (spec and spec.pii):
            out.allowed.add(re.sub(r"[\s-]", "", str(value)))
    for name, fs in state.fields.items():
        spec = domain.fields.get(name)
        if spec is not None and spec.pii:  # shown under its policy wherever it appears, to every action
            out.protected_keys.update({key.lower(): (spec.pii, name) for key in (*spec.tool_keys, name)})
            for text in fs.earlier.texts if fs.earlier else ():
                out.protected[text] = pii.protect(spec.pii, text, name)
            for h in fs.history:
                for v in (h.value, h.provenance.text if h.provenance else None):
                    if _scalar(v) and len(str(v)) >= 4:
                        out.protected[str(v)] = pii.protect(spec.pii, str(v), name)
        if spec is None or not spec.scopes or action.scope in spec.scopes:
            continue
        out.keys.update({key.lower(): name for key in (*spec.tool_keys, name)})
        if fs.earlier:
            for index, a, b in fs.earlier.triples(fs.earlier.spans):
                out.spans.setdefault(index, []).append((a, b, name))
            out.values.update(dict.fromkeys(fs.earlier.texts, name))
        for h in fs.history:
            p = h.provenance
            if p is not None and p.span[1] > p.span[0]:
                out.spans.setdefault(p.message_index, []).append((p.span[0], p.span[1], name))
            for v in (h.value, p.text if p else None):
                if not isinstance(v, bool) and isinstance(v, (str, int, float)) and len(str(v)) >= 4:
                    out.values[str(v)] = name
    return out


def turn(domain: Domain, msg: Message, hidden: Hidden) -> dict[str, Any]:
    """What the model sees of one message: tool JSON masked and trimmed, or the text with hidden
    spans masked; an assistant's tool calls as the called names and their (trimmed) arguments;
    then any hidden value still in it (arguments included)."""
    text = tool_text(domain, msg, hidden) if msg.role == "tool" else msg.content
    if text is msg.content:  # re-serialised tool JSON has no prose spans left
        for start, end, name in sorted(hidden.spans.get(msg.index, ()), reverse=True):
            text = text[:start] + f"[{name} hidden]" + text[end:]
    calls = [tool_call_parts(c) for c in msg.tool_calls if isinstance(c, dict)]
    if calls:
        text = "\n".join([text, *(args for _, args in calls)] if text else [args for _, args in calls])
    text = shown_text(text, hidden)
    return {"round": msg.round, "role": msg.role, "name": msg.name, "content": text,
            "tool_call": ",".join(name for name, _ in calls) or None}


MAX_ARGUMENT_CHARS = 300


def tool_call_parts(call: dict[str, Any]) -> tuple[str, str]:
    """(name, arguments as compact JSON) of one tool call, OpenAI-shaped ({function: {name,
    arguments}}) or flat ({name, arguments}). Long arguments keep their first top-level keys
    whole and say how many were left out: a value is never cut."""
    nested = call.get("function")
    fn: dict[str, Any] = nested if isinstance(nested, dict) else call
    name = str(fn.get("name") or "tool")
    args: Any = fn.get("arguments", fn.get("input", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return name, args if len(args) <= MAX_ARGUMENT_CHARS else f"[{len(args)} characters of arguments omitted]"
    compact = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    if len(compact) <= MAX_ARGUMENT_CHARS or not isinstance(args, dict):
        return name, compact if len(compact) <= MAX_ARGUMENT_CHARS else f"[{len(compact)} characters of arguments omitted]"
    kept: dict[str, Any] = {}
    for key, value in args.items():
        trial = {**kept, key: value}
        if len(json.dumps(trial, ensure_ascii=False, separators=(",", ":"))) > MAX_ARGUMENT_CHARS - 40:
            break
        kept = trial
    omitted = len(args) - len(kept)
    return name, json.dumps({**kept, "…": f"{omitted} more argument{'s' if omitted != 1 else ''} omitted"},
                            ensure_ascii=False, separators=(",", ":"))


def grade(raw: float) -> int:
    """The rule score on the articles' 1-5 scale (5: the source of a shown value, 1: noise)."""
    return 5 if raw >= 3.0 else 4 if raw >= 2.0 else 3 if raw >= MIN_SCORE else 2 if raw >= MIN_SCORE / 2 else 1


def rule_score(msg: Message, ctx: dict[str, Any]) -> float:
    """The built-in scorer: the deterministic relevance score, graded 1-5."""
    return float(grade(default_score(msg, ctx)))


UNAGED_VIEWS = 64  # (vocabulary, sources, references) views whose unaged scores are kept
UNAGED_MESSAGES = 4096  # messages per view whose unaged score is kept
GRADED_KEPT = 4096  # (unaged score, age) pairs whose grade is kept (all dropped when full, as the memos above)
_unaged_memo: dict[tuple[Any, ...], dict[tuple[int, str], float]] = {}
_graded: dict[tuple[float, int | None], float] = {}  # (unaged score, age if it ages) -> rule score


def forget_scores() -> None:
    """Drop the remembered scores (after an erasure: they are keyed by the messages' texts)."""
    _unaged_memo.clear()
    _graded.clear()


def _rule_scores(messages: list[Message], ctx: dict[str, Any]) -> list[float]:
    """`rule_score` of each message, the unaged part remembered per view and message (a render
    after a new message scores the same older messages again under the same view)."""
    view = (frozenset(ctx["vocabulary"]), frozenset(ctx["source_indexes"]), frozenset(ctx["references"]))
    memo = _unaged_memo.get(view)
    if memo is None:
        if len(_unaged_memo) >= UNAGED_VIEWS:
            _unaged_memo.clear()
        memo = _unaged_memo[view] = {}
    out = []
    now, retrieved, low, high = ctx["round"], ctx.get("retrieved", ()), *MIDDLING
    for m in messages:
        key = (m.index, m.content)
        unaged = memo.get(key)
        if unaged is None:
            if len(memo) >= UNAGED_MESSAGES:
                memo.clear()
            unaged = memo[key] = _unaged(m, ctx)
        # Only a middling score ages (`_aged`): the others grade alike at every age.
        aged = low < unaged < high and m.index not in retrieved
        graded = (unaged, now - m.round if aged else None)
        score = _graded.get(graded)
        if score is None:
            if len(_graded) >= GRADED_KEPT:
                _graded.clear()
            score = _graded[graded] = float(grade(_aged(m, ctx, unaged)))
        out.append(score)
    return out


def _scores(scorer: Scorer, messages: list[Message], ctx: dict[str, Any]) -> dict[int, float]:
    """Message index -> score; one call for all messages when the scorer has `score_batch`."""
    if scorer is rule_score:
        return {m.index: v for m, v in zip(messages, _rule_scores(messages, ctx))}
    batch = getattr(scorer, "score_batch", None)
    values = batch(messages, ctx) if batch is not None else [scorer(m, ctx) for m in messages]
    return {m.index: float(v) for m, v in zip(messages, values)}


def select_history(action: ActionSpec, state: State, older: list[Message], vocabulary: set[str],
                   scorer: Scorer | None = None, anchors: dict[str, Any] | None = None,
                   retrieved: list[Message] | None = None) -> list[Unit]:
    """Older units in the order the budget keeps them, by the articles' thresholds applied to
    any scorer's 1-5 scores: >= 4 kept first (best first), 3 fill what is left by recency
    (newest first), <= 2 are compressed: never shown verbatim, left to the summary zone.
    `retrieved`: messages from before the loaded window that search matched, best first. They are
    scored by the same scorer and compete in the same order, each 3 ahead of the window's 3s (in
    search order): the search says they answer this query, recency says nothing about them."""
    found = retrieved or []
    if not older and not found:
        return []
    shown = set(action.fields)
    ctx = {
        "round": state.round,
        "vocabulary": vocabulary,
        "source_indexes": {fs.provenance.message_index for n, fs in state.fields.items()
                           if n in shown and fs.present and fs.provenance},
        "references": {str(v) for v in state.values().values() if isinstance(v, str) and ID.fullmatch(v)},
        "action": action.name, "description": action.description,
        "goal": (anchors or {}).get("goal", {}).get("text"), "subtask": (anchors or {}).get("subtask", {}).get("text"),
        "retrieved": {m.index for m in found},
    }
    deduped = dedupe_tool_results(older)
    scores = _scores(scorer or rule_score, deduped + found, ctx)
    units = [Unit(u, scores[u[0].index] if len(u) == 1 else max(scores[m.index] for m in u)) for u in chains(deduped)]
    rank = {m.index: i for i, m in enumerate(found)}
    back = [Unit([m], scores[m.index], "retrieved") for m in found]
    keep = sorted((u for u in units + back if u.score >= KEEP), key=lambda u: (-u.score, -u.messages[0].index))
    brought = sorted((u for u in back if FILL <= u.score < KEEP), key=lambda u: rank[u.messages[0].index])
    fill = sorted((u for u in units if FILL <= u.score < KEEP), key=lambda u: -u.messages[0].index)
    return keep + brought + fill
