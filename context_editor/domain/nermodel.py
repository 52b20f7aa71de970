"""A trained NER model as a domain sees it: where it is, its labels, language and hash.

Read from the model's card (`card.json`, written by `context-editor train ner`) without
loading spaCy, so that loading or linting a domain stays cheap; the hash is recomputed from the
weight files on disk every time, so a changed model is a changed domain version.

`calibration.json` (written by training, part of the hash: it changes what the model serves)
maps each label's raw beam probability to the precision its spans had on the held-out split,
and says which labels are served at all (held-out F1 at least the training's floor). A model
without it (trained before calibration existed) serves every label at its raw probability.
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import Errors, NerModelError

CARD_FILE = "card.json"
CALIBRATION_FILE = "calibration.json"
MIN_CONFIDENCE = 0.5  # a span whose calibrated precision is below this is more often wrong than right: not served
CARD_FILES = frozenset({CARD_FILE, "README.md"})  # written after training: not part of the weights' hash


@dataclass(frozen=True)
class NerModel:
    """What a domain knows about a trained model without loading it (read from its card)."""

    path: Path
    name: str
    hash: str  # sha256 of the weight files
    lang: str
    labels: tuple[str, ...]
    # label -> (lower bin edges of the raw probability, held-out precision per bin); only served labels.
    # None: an uncalibrated model (every label served, confidence = raw probability).
    calibration: tuple[tuple[str, tuple[float, ...], tuple[float, ...]], ...] | None = None

    @property
    def extractor(self) -> str:
        return f"ner:{self.name}@{self.hash[:12]}"

    def confidence(self, label: str, raw: float) -> float | None:
        """The calibrated confidence of a span of `label` with beam probability `raw`, or None
        when the model does not serve it (an unserved label, a bin below `MIN_CONFIDENCE`)."""
        if self.calibration is None:
            return raw
        table = next((t for t in self.calibration if t[0] == label), None)
        if table is None:
            return None
        _, edges, precision = table
        i = bisect_right(edges, raw) - 1
        if i < 0 or precision[i] < MIN_CONFIDENCE:
            return None
        return precision[i]

    @property
    def served(self) -> tuple[str, ...]:
        return self.labels if self.calibration is None else tuple(t[0] for t in self.calibration)


def model_hash(path: str | Path) -> str:
    """sha256 over the model's files (relative path and bytes, sorted), the card excluded."""
    root = Path(path)
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file() and p.relative_to(root).as_posix() not in CARD_FILES):
        h.update(f.relative_to(root).as_posix().encode("utf-8") + b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def size_bytes(path: Path) -> int:
    """The model's size on disk: weights and vocabulary, without the card."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and f.relative_to(path).as_posix() not in CARD_FILES)


def model_info(path: str | Path) -> NerModel:
    """The model at `path`, from its card, with its hash recomputed from the files on disk."""
    root = Path(path)
    card_path = root / CARD_FILE
    if not card_path.is_file():
        raise Errors.NER_MODEL(problem=f"no trained NER model at {root} (no {CARD_FILE})", file=str(root),
                               fix="train one with `context-editor train ner … --out DIR` and point `ner: {model: DIR}` at it")
    try:
        card = json.loads(card_path.read_text(encoding="utf-8"))
        return NerModel(root.resolve(), str(card["name"]), model_hash(root), str(card["lang"]), tuple(card["labels"]),
                        _calibration(root / CALIBRATION_FILE))
    except (ValueError, KeyError, TypeError) as exc:
        raise Errors.NER_MODEL(problem=f"{card_path} is not a model card: {exc}", file=str(card_path),
                               fix="retrain the model with `context-editor train ner`") from exc


def _calibration(path: Path) -> tuple[tuple[str, tuple[float, ...], tuple[float, ...]], ...] | None:
    if not path.is_file():
        return None
    labels = json.loads(path.read_text(encoding="utf-8"))["labels"]
    return tuple((label, tuple(map(float, t["edges"])), tuple(map(float, t["precision"])))
                 for label, t in sorted(labels.items()) if t["served"])


MARGIN = 0.05  # a model span outranks a rule hit only when its confidence is higher by this much
STORED_KEY = "_ner_models"  # resolved models kept in the stored document: replay finds the same files


def configured_models(config: Any, base_dir: Path) -> dict[str, NerModel]:
    """Language -> model, from a domain's `ner:` value (paths relative to the domain file).

    `ner: ./models/x` or `ner: {model: ./models/x}` serves the model's own language;
    `en:` / `zh:` name the model of that language explicitly."""
    entries = {"model": config} if isinstance(config, str) else {k: v for k, v in (config or {}).items() if k != "margin"}
    out: dict[str, NerModel] = {}
    for key, rel in sorted(entries.items(), key=lambda kv: kv[0] != "model"):  # explicit languages win
        model = model_info(base_dir / str(rel))
        out[model.lang if key == "model" else key] = model
    return out


def stored_models(models: dict[str, NerModel]) -> dict[str, dict[str, str]]:
    return {lang: {"path": str(m.path), "name": m.name, "hash": m.hash} for lang, m in sorted(models.items())}


def reloaded_models(stored: dict[str, dict[str, str]]) -> dict[str, NerModel]:
    """The models a stored domain names, as they are on disk now (their hash may differ from the
    recorded one: the domain version then differs too, and replay says so)."""
    return {lang: model_info(entry["path"]) for lang, entry in stored.items()}
