"""Read an SGD split directory (`schema.json[.gz]`, `dialogues_NNN.json[.gz]`) into a `Dataset`.

Gold after a user turn is, for each frame (service) of that turn, `state.slot_values`: a list of
acceptable surface forms per slot, plus their canonical forms from the dialogue's annotations. Categorical slots are compared exactly, the others fuzzily,
as the DSTC8 script does. Each dialogue is fed to the editors of its `services`.
"""

from __future__ import annotations

import itertools
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from ..errors import Errors
from ..importers import import_sgd, read_json
from ..importers.common import snake
from ..importers.sgd import load_schema
from .dataset import Dataset, Dialogue, Utterance
from .metrics import Gold

TODAY = datetime(2019, 3, 1, 9, 0)  # SGD's "today": its default reservation date is 2019-03-01
_ROLES = {"USER": "user", "SYSTEM": "assistant"}
CURRENCY = "USD"  # SGD's amounts are dollars, written without a unit ("1520"); the importer's default_currency
DONTCARE = "dontcare"  # SGD's value for a slot the user has no preference about
_FIX = "pass an SGD split directory, e.g. ../shared/data/sgd/dev"


def _one(data_dir: Path, stem: str) -> Path:
    for suffix in (".json.gz", ".json"):
        if (data_dir / f"{stem}{suffix}").is_file():
            return data_dir / f"{stem}{suffix}"
    raise Errors.BAD_DATASET(problem=f"no {stem}.json or {stem}.json.gz in {data_dir}", fix=_FIX)


def _canonical_forms(d: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    """(service, slot, surface value) -> its canonical form, from the dialogue's own action
    annotations ("today" -> "2019-03-01", "half past 11 in the morning" -> "11:30"), so an editor
    that stores the resolved value is matched as well as one that keeps the words."""
    forms = {}
    for turn in d["turns"]:
        for frame in turn["frames"]:
            for action in frame["actions"]:
                for value, canonical in zip(action["values"], action.get("canonical_values") or []):
                    forms[(frame["service"], action["slot"], value)] = canonical
    return forms


def _frames(turn: dict[str, Any], categorical: dict[str, dict[str, bool]], forms: dict[tuple[str, str, str], str]) -> dict[str, dict[str, Any]]:
    out = {}
    for frame in turn["frames"]:
        service, kinds = frame["service"], categorical[frame["service"]]
        gold = {}
        for slot, values in frame["state"]["slot_values"].items():
            cat = kinds.get(slot, False)
            variants = tuple(dict.fromkeys([*values, *(forms[k] for v in values if (k := (service, slot, v)) in forms)]))
            gold[slot] = Gold(variants, "exact" if cat else "fuzzy", surface=not cat and values != [DONTCARE])
        out[snake(service)] = gold
    return out


def _dialogue(d: dict[str, Any], categorical: dict[str, dict[str, bool]]) -> Dialogue:
    forms = _canonical_forms(d)
    utterances = []
    for turn in d["turns"]:
        role = _ROLES[turn["speaker"]]
        frames = _frames(turn, categorical, forms) if role == "user" else None
        services = tuple(dict.fromkeys(snake(f["service"]) for f in turn["frames"]))
        utterances.append(Utterance(role, turn["utterance"], frames, services))
    return Dialogue(d["dialogue_id"], tuple(snake(s) for s in d["services"]), tuple(utterances))


def _dialogues(files: dict[str, Path], categorical: dict[str, dict[str, bool]]) -> Iterator[Dialogue]:
    """Dialogues file by file, read lazily so that --limit does not read the whole split."""
    for stem in sorted(files):
        for d in read_json(files[stem]):
            yield _dialogue(d, categorical)


def load_sgd(data_dir: str | Path, domains_out: str | Path, limit: int | None = None, **import_options: Any) -> Dataset:
    """Import the split's schema into `domains_out` (with `import_sgd`'s options: a trained model,
    rules on or off) and read its dialogues (the first `limit`)."""
    root = Path(data_dir)
    if not root.is_dir():
        raise Errors.BAD_DATASET(problem=f"no such directory: {root}", fix=_FIX)
    schema_path = _one(root, "schema")
    services = load_schema(schema_path)
    files = {p.stem.removesuffix(".json"): p for p in root.glob("dialogues_*.json*")}
    if not files:
        raise Errors.BAD_DATASET(problem=f"no dialogues_*.json[.gz] files in {root}", fix=_FIX)
    paths = import_sgd(schema_path, domains_out, **import_options)
    categorical = {s["service_name"]: {x["name"]: x["is_categorical"] for x in s["slots"]} for s in services}
    scored = {snake(s["service_name"]): frozenset(x["name"] for x in s["slots"]) for s in services}
    dialogues = list(itertools.islice(_dialogues(files, categorical), limit))
    return Dataset("sgd", {p.stem: p for p in paths}, scored, dialogues, TODAY, split=root.name,
                   currency=CURRENCY, no_preference=DONTCARE)
