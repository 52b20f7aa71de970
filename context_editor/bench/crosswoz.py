"""Read CrossWOZ (`val.json.zip` as published, or the plain JSON) into a `Dataset`.

Gold after a user turn is the next system turn's `sys_state_init`: the user's constraints as the
system first queried them, before it relaxed anything, without `selectedResults` (those are the
system's answers, not the user's state). A user turn with no system turn after it has no gold.
Values are compared exactly after normalisation; space-separated multi-value slots (dishes,
facilities) as sets. Every dialogue is fed to all five domains.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import Errors
from ..importers import import_crosswoz, read_json
from ..importers.crosswoz import DOMAINS, gold_slots
from .dataset import Dataset, Dialogue, Utterance
from .metrics import Gold

CLOCK = datetime(2020, 1, 1, 9, 0)  # CrossWOZ says no dates; a fixed clock keeps runs identical
_ROLES = {"usr": "user", "sys": "assistant"}
_LISTS = {(d.zh, s.zh) for d in DOMAINS for s in d.slots if s.is_list}


def _gold(state: dict[str, Any]) -> dict[str, dict[str, Gold]]:
    out = {}
    for spec in DOMAINS:
        slots = gold_slots(spec.zh)
        frame = {slots[k]: Gold((str(v),), "set" if (spec.zh, k) in _LISTS else "exact")
                 for k, v in (state.get(spec.zh) or {}).items() if k in slots and v not in ("", None, [])}
        if frame:
            out[spec.name] = frame
    return out


def _dialogue(did: str, d: dict[str, Any]) -> Dialogue:
    msgs = d["messages"]
    utterances = []
    for i, m in enumerate(msgs):
        role = _ROLES[m["role"]]
        nxt = msgs[i + 1] if i + 1 < len(msgs) else None
        frames = _gold(nxt["sys_state_init"]) if role == "user" and nxt and "sys_state_init" in nxt else None
        utterances.append(Utterance(role, m["content"], frames))
    return Dialogue(did, tuple(s.name for s in DOMAINS), tuple(utterances))


def load_crosswoz(data_file: str | Path, database_dir: str | Path | None, domains_out: str | Path,
                  limit: int | None = None, **import_options: Any) -> Dataset:
    """Import the five domains (gazetteers from `database_dir`, default `database/` beside the
    data file; `import_crosswoz`'s options) into `domains_out` and read the dialogues (the first
    `limit`, in file order)."""
    data_path = Path(data_file)
    db = Path(database_dir) if database_dir else data_path.parent / "database"
    data = read_json(data_path)
    if not isinstance(data, dict) or not all(isinstance(v, dict) and "messages" in v for v in data.values()):
        raise Errors.BAD_DATASET(problem=f"{data_path} is not a CrossWOZ split (an object of dialogues with `messages`)",
                           fix="pass val.json.zip (or train/test) as published by CrossWOZ")
    paths = import_crosswoz(db, domains_out, **import_options)
    scored = {spec.name: frozenset(gold_slots(spec.zh).values()) for spec in DOMAINS}
    ids = list(data)[:limit]
    dialogues = [_dialogue(did, data[did]) for did in ids]
    return Dataset("crosswoz", {p.stem: p for p in paths}, scored, dialogues, CLOCK,
                   split=data_path.name.split(".")[0], frames_from_predictions=True)
