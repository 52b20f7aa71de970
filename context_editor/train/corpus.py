"""Training examples for the NER model: text + labelled character spans, from three formats.

- `golden`: the project's own format, JSONL, one example per line (docs/ner-training.md):
  `{"text": "Fly to Paris", "spans": [{"start": 7, "end": 12, "label": "PLACE", "text": "Paris"}]}`.
  `text` on a span is optional; when given it must equal the characters it covers. A line may
  carry any other keys (ignored).
- `sgd`: an SGD split directory (`schema.json[.gz]`, `dialogues_*.json[.gz]`); every slot span
  of every turn (user and system), labelled with the kind of its slot (`domain.kinds`).
- `crosswoz`: a CrossWOZ split (`val.json.zip` or plain JSON); the values that enter the dialogue
  state at each user turn, found in the utterance, labelled by the kind of their slot.

Every example remembers where it came from (`file:line` or `file#dialogue`), so an error names
the place to fix. Readers validate everything before anything is trained or written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..domain.kinds import train_label, value_kind
from ..errors import Errors, TrainingDataError
from ..importers import read_json  # the dataset files as published (plain, .gz, .zip)

FORMATS = ("golden", "sgd", "crosswoz")


@dataclass(frozen=True)
class Example:
    text: str
    spans: tuple[tuple[int, int, str], ...]  # (start, end, label), character offsets, sorted, no overlaps
    where: str  # file:line or file#dialogue, for errors and the model card
    group: str  # examples of one group (a dialogue, a file) stay on the same side of the held-out split


def _no_overlaps(spans: list[tuple[int, int, str]]) -> tuple[tuple[int, int, str], ...]:
    """Sorted spans, dropping any that overlaps an earlier (longer first) one."""
    kept: list[tuple[int, int, str]] = []
    for s in sorted(set(spans), key=lambda x: (x[0], -(x[1] - x[0]), x[2])):
        if all(s[1] <= k[0] or s[0] >= k[1] for k in kept):
            kept.append(s)
    return tuple(sorted(kept))


# --- golden ------------------------------------------------------------------------------------

def _golden_line(obj: Any, path: Path, line: int) -> Example:
    def bad(what: str, fix: str) -> TrainingDataError:
        return Errors.TRAINING_DATA(problem=what, file=str(path), line=line, fix=fix)

    if not isinstance(obj, dict):
        raise bad("a line must be a JSON object", 'write {"text": ..., "spans": [...]}')
    text, raw = obj.get("text"), obj.get("spans")
    if not isinstance(text, str) or not text:
        raise bad("`text` must be a non-empty string", "give each line the text it annotates")
    if not isinstance(raw, list):
        raise bad("`spans` must be a list", 'write "spans": [{"start": 0, "end": 5, "label": "PLACE"}]')
    spans = []
    for i, s in enumerate(raw):
        if not isinstance(s, dict) or not isinstance(s.get("start"), int) or not isinstance(s.get("end"), int) \
                or not isinstance(s.get("label"), str) or not s["label"]:
            raise bad(f"span {i} needs integer `start`, `end` and a non-empty `label`", "fix span {i} of this line")
        start, end, label = s["start"], s["end"], s["label"]
        if not 0 <= start < end <= len(text):
            raise bad(f"span {i} ({start}, {end}) is outside the text (length {len(text)})",
                      "offsets count characters of `text`, end exclusive")
        if "text" in s and text[start:end] != s["text"]:
            raise bad(f"span {i} ({start}, {end}) covers {text[start:end]!r}, not {s['text']!r}",
                      "fix the offsets (characters, end exclusive) or the span's `text`")
        spans.append((start, end, label))
    return Example(text, _no_overlaps(spans), f"{path}:{line}", f"{path}:{line}")


def read_golden(path: Path) -> Iterator[Example]:
    files = sorted(path.glob("**/*.jsonl")) if path.is_dir() else [path]
    if not path.exists():
        raise Errors.TRAINING_DATA(problem=f"no such file: {path}", file=str(path), fix="pass a .jsonl file or a directory of them")
    if not files:
        raise Errors.TRAINING_DATA(problem=f"no .jsonl files in {path}", file=str(path), fix="pass a .jsonl file or a directory of them")
    for f in files:
        for n, raw in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError as exc:
                raise Errors.TRAINING_DATA(problem=f"not a JSON object: {exc}", file=str(f), line=n, fix="one JSON object per line") from exc
            yield _golden_line(obj, f, n)


# --- SGD ---------------------------------------------------------------------------------------

def _sgd_file(root: Path, stem: str) -> Path:
    for suffix in (".json.gz", ".json"):
        if (root / f"{stem}{suffix}").is_file():
            return root / f"{stem}{suffix}"
    raise Errors.TRAINING_DATA(problem=f"no {stem}.json[.gz] in {root}", file=str(root), fix="pass an SGD split directory (e.g. sgd/train)")


def sgd_labels(schema: list[dict[str, Any]]) -> dict[tuple[str, str], str | None]:
    """(service, slot) -> the label a model learns for it, through the one mapping the importer uses."""
    out: dict[tuple[str, str], str | None] = {}
    for service in schema:
        siblings = [(s["name"], s.get("description", "")) for s in service["slots"]]
        for name, desc in siblings:
            out[(service["service_name"], name)] = train_label(value_kind(name, desc, siblings))
    return out


def read_sgd(root: Path) -> Iterator[Example]:
    if not root.is_dir():
        raise Errors.TRAINING_DATA(problem=f"no such directory: {root}", file=str(root), fix="pass an SGD split directory (e.g. sgd/train)")
    schema = read_json(_sgd_file(root, "schema"))
    labels = sgd_labels(schema)
    files = sorted(root.glob("dialogues_*.json*"))
    if not files:
        raise Errors.TRAINING_DATA(problem=f"no dialogues_*.json[.gz] in {root}", file=str(root), fix="pass an SGD split directory")
    for f in files:
        for d in read_json(f):
            for t, turn in enumerate(d["turns"]):
                text = turn["utterance"]
                spans = []
                for frame in turn["frames"]:
                    for s in frame.get("slots", []):
                        label = labels.get((frame["service"], s["slot"]))
                        if label and 0 <= s["start"] < s["exclusive_end"] <= len(text):
                            spans.append((s["start"], s["exclusive_end"], label))
                yield Example(text, _no_overlaps(spans), f"{f}#{d['dialogue_id']}/{t}", d["dialogue_id"])


# --- CrossWOZ ----------------------------------------------------------------------------------

def _state(m: dict[str, Any]) -> dict[tuple[str, str], str]:
    """A system turn's `sys_state_init` as (domain, slot) -> value, without `selectedResults`."""
    return {(dom, slot): str(v) for dom, slots in (m.get("sys_state_init") or {}).items() if isinstance(slots, dict)
            for slot, v in slots.items() if slot != "selectedResults" and v not in ("", None, [])}


def read_crosswoz(path: Path) -> Iterator[Example]:
    """Each user turn with the values that enter the dialogue state at that turn (the next system
    turn's `sys_state_init` against the previous one) found in its words, labelled by their slot's
    kind: what a user states as a constraint, not every value their acts inform (a name picked from
    the results, "就去天安门广场吧", is no constraint; "天安门广场周边的酒店" makes it the hotel's
    nearby place, `VENUE.NEAR`). Multi-valued slots ("中式餐厅 早餐服务") are found item by item."""
    data = read_json(path)
    if not isinstance(data, dict) or not all(isinstance(v, dict) and "messages" in v for v in data.values()):
        raise Errors.TRAINING_DATA(problem="not a CrossWOZ split (an object of dialogues with `messages`)", file=str(path),
                                fix="pass val.json.zip (or train/test) as published by CrossWOZ")
    slots: dict[str, set[str]] = {}
    for d in data.values():
        for m in d["messages"]:
            for dom, names in (m.get("sys_state_init") or {}).items():
                slots.setdefault(dom, set()).update(n for n in (names if isinstance(names, dict) else {}) if n != "selectedResults")
    # A CrossWOZ slot's description is its domain's name (景点, 酒店, …), as in the importer.
    labels = {(dom, s): train_label(value_kind(s, dom, [(x, dom) for x in sorted(names)])) for dom, names in slots.items() for s in names}
    for did, d in data.items():
        before: dict[tuple[str, str], str] = {}
        msgs = d["messages"]
        for t, m in enumerate(msgs):
            if m["role"] != "usr":
                continue
            nxt = msgs[t + 1] if t + 1 < len(msgs) else None
            state = _state(nxt) if nxt is not None and nxt.get("role") == "sys" else before
            text = m["content"]
            # What changes first, then what the state keeps and the user says again ("还是4.5分以上").
            changed = sorted(state, key=lambda k: before.get(k) == state[k])
            spans: list[tuple[int, int, str]] = []
            for key in changed:
                label, value = labels.get(key), state[key]
                for item in value.split() if key[1] in _LISTS else [value]:
                    start = text.find(item)
                    span = (start, start + len(item), label or "")
                    if label and start >= 0 and all(span[1] <= k[0] or span[0] >= k[1] for k in spans):
                        spans.append(span)
            before = state
            yield Example(text, tuple(sorted(spans)), f"{path}#{did}/{t}", did)


_LISTS = ("推荐菜", "酒店设施")  # CrossWOZ's multi-valued slots, space-joined in the state


def read_examples(fmt: str, path: str | Path) -> list[Example]:
    """All examples of `path` in format `fmt`, validated; an error names the file and line."""
    p = Path(path)
    if fmt == "golden":
        examples = list(read_golden(p))
    elif fmt == "sgd":
        examples = list(read_sgd(p))
    elif fmt == "crosswoz":
        examples = list(read_crosswoz(p))
    else:
        raise Errors.TRAINING_DATA(problem=f"unknown format {fmt!r}", fix=f"use one of: {', '.join(FORMATS)}")
    if not any(ex.spans for ex in examples):
        raise Errors.TRAINING_DATA(problem="the training data has no labelled spans (empty label set)", file=str(p),
                                fix="annotate at least one span with a label (see docs/ner-training.md)")
    return examples
