"""What every schema importer shares: reading published dataset files and writing domain files.

An importer turns someone else's schema into domain files a person will read and edit, so the
output is plain YAML in the documented order (header comment, fields, machine, actions) with no
YAML anchors, and every file is linted right after it is written: an importer must never hand
the user a domain that `context-editor lint` rejects.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..domain import lint_domain
from ..domain.nermodel import model_info
from ..errors import Errors

_NON_NAME = re.compile(r"[^a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def read_json(path: str | Path) -> Any:
    """JSON from a plain, gzipped (`.gz`) or zipped (`.zip`, first `.json` member) file."""
    p = Path(path)
    if not p.is_file():
        raise Errors.BAD_DATASET(problem=f"no such file: {p}", fix="check the path (datasets are read where they are, never copied)")
    try:
        if p.suffix == ".gz":
            with gzip.open(p, "rt", encoding="utf-8") as fh:
                return json.load(fh)
        if p.suffix == ".zip":
            with zipfile.ZipFile(p) as z:
                names = [n for n in z.namelist() if n.endswith(".json")]
                if not names:
                    raise Errors.BAD_DATASET(problem=f"{p} holds no .json file", fix="pass the published zip (e.g. crosswoz/val.json.zip)")
                return json.loads(z.read(names[0]).decode("utf-8"))
        return json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise Errors.BAD_DATASET(problem=f"{p} is not readable JSON: {exc}",
                           fix="pass the file as published (plain .json, .json.gz or .json.zip)") from exc


@dataclass(frozen=True)
class NerRef:
    """A trained model as an imported domain names it: its path relative to the domain file (so
    domains and model move together) and the labels it serves."""

    path: str
    labels: tuple[str, ...]


def model_ref(model_dir: str | Path, out_dir: str | Path) -> NerRef:
    """The model at `model_dir` for domain files written to `out_dir` (its card is read now: a
    missing model is one clear error, not a lint failure per written domain)."""
    info = model_info(model_dir)
    return NerRef(Path(os.path.relpath(Path(model_dir).resolve(), Path(out_dir).resolve())).as_posix(), info.labels)


def snake(name: str) -> str:
    """`ReserveRestaurant` -> `reserve_restaurant`, `Restaurants_2` -> `restaurants_2`."""
    out = _NON_NAME.sub("_", _CAMEL.sub("_", name).lower()).strip("_")
    return out if out[:1].isalpha() else f"x_{out}"


def words(name: str) -> str:
    """`ReserveRestaurant` -> `reserve restaurant` (a phrase a user might say)."""
    return snake(name).replace("_", " ")


class _Dumper(yaml.SafeDumper):
    """Block-style YAML without anchors: a person edits these files, `&id001` only confuses."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _short_lists_inline(dumper: _Dumper, data: list[Any]) -> yaml.Node:
    flow = len(data) <= 12 and all(isinstance(x, (str, int, float)) and len(str(x)) < 40 for x in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _short_lists_inline)


def dump_domain(doc: dict[str, Any], header: str) -> str:
    """The YAML text of a domain document, headed by `header` as comment lines."""
    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=110, default_flow_style=False)
    comment = "".join(f"# {line}".rstrip() + "\n" for line in header.strip().splitlines())
    return comment + body


def write_domains(docs: dict[str, tuple[dict[str, Any], str]], out_dir: str | Path) -> list[Path]:
    """Write `name -> (document, header)` as `out_dir/<name>.yaml`, each checked by lint once all
    are written (a `carry:` names its sibling files)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (doc, header) in docs.items():
        (out / f"{name}.yaml").write_text(dump_domain(doc, header), encoding="utf-8")
    for name in docs:
        path = out / f"{name}.yaml"
        problems = [p for p in lint_domain(path)[1] if p.is_error]  # warnings are the user's to read in `lint`
        if problems:
            detail = "\n".join(p.format(str(path)) for p in problems[:5])
            raise Errors.IMPORTER_BUG(detail=detail, file=str(path))
        written.append(path)
    return written


MINIMAL_ROUNDS = 4  # rounds before the latest the track action loads: a conversation this short may be shown whole


def track_action(fields: list[str], description: str) -> dict[str, Any]:
    """The general action every imported domain gets: all fields and the latest user message,
    each value once (`minimal`): the tracked state, the turns it did not absorb, the message the
    latest one replies to while pending, or the conversation itself while it is shorter (not
    `conversation_form: always`: measured, it costs CrossWOZ 5 tokens at turns 0-9 for no value,
    README "Issue 10, session 8"); a user line not shown as a turn keeps only its clauses with
    values the state did not take (`user_clauses: all`).

    Its budget leaves room for every field so that measuring context size never truncates.
    """
    return {"description": description, "fields": fields, "recent_rounds": 1, "history_rounds": MINIMAL_ROUNDS,
            "budget_tokens": 600 + 40 * len(fields), "state_lines": True, "minimal": True, "user_clauses": "all"}
