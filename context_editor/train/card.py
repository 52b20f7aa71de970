"""The model card: what a trained NER model was trained on, how well it does, what it costs.

Two files beside the weights: `card.json` (read by domains: name, language, labels, hash) and
`README.md` (the same for people). Both repeat the calibration (`calibration.json`, which is
part of the weights' hash: which labels are served, and how sure their spans are). Neither is part of the weights' hash: training time and the
command differ between two runs that produce identical weights.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..domain.nermodel import CARD_FILE, size_bytes

if TYPE_CHECKING:
    from .ner import TrainOptions, TrainResult


def write_card(model_dir: Path, result: TrainResult, opts: TrainOptions, *, command: str, data: dict[str, Any],
               digest: str) -> None:
    from spacy import about

    size = size_bytes(model_dir)
    card = {"name": result.out.name, "lang": opts.lang, "labels": result.labels, "hash": digest,
            "architecture": {"tok2vec": "spacy.HashEmbedCNN.v2", "width": opts.width, "depth": opts.depth,
                             "embed_size": opts.embed, "ner": "spacy.TransitionBasedParser.v2", "hidden_width": opts.hidden,
                             "tokenizer": "characters (spacy.zh.ChineseTokenizer, segmenter=char)" if opts.lang == "zh"
                             else "spaCy English rules"},
            "data": data, "seed": opts.seed, "max_epochs": opts.max_epochs, "epochs": result.epochs,
            "held_out": result.scores, "calibration": result.calibration, "size_bytes": size, "training_seconds": round(result.seconds, 1),
            "training_cpu_seconds": round(result.cpu_seconds, 1),
            "command": command, "spacy": about.__version__, "machine": f"{platform.machine()}, {platform.python_version()}"}
    (model_dir / CARD_FILE).write_text(json.dumps(card, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    (model_dir / "README.md").write_text(markdown(card), encoding="utf-8")


def _cell(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def markdown(card: dict[str, Any]) -> str:
    held = card["held_out"]
    rows = "\n".join(f"| {label} | {card['data']['spans'].get(label, 0)} | {_cell(s['p'])} | {_cell(s['r'])} | {_cell(s['f'])} |"
                     for label, s in held["per_label"].items())
    data = card["data"]
    cal = card.get("calibration") or {"labels": {}}
    cal_rows = "\n".join(f"| {label} | {c['gold']} | {c['spans']} | {c['p']:.3f} / {c['r']:.3f} / {c['f1']:.3f} | "
                         f"{' / '.join(f'{x:.2f}' for x in c['precision'])} | {c['why']} |"
                         for label, c in cal["labels"].items())
    edges = " / ".join(f"≥{e:g}" for e in next(iter(cal["labels"].values()), {"edges": []})["edges"])
    return f"""# NER model `{card['name']}` ({card['lang']})

Trained by `context-editor train ner`; labels are kinds of value (docs/ner-training.md).

- **Data:** {data['format']} `{data['path']}`: {data['examples']} examples, {data['train_examples']} for training,
  {data['held_out_examples']} held out (whole dialogues/lines, chosen by hash).
- **Labels:** {', '.join(card['labels'])}
- **Held-out scores** (best epoch {held.get('epoch')}): P {_cell(held['p'])}, R {_cell(held['r'])}, F1 {_cell(held['f'])}
- **Size on disk:** {card['size_bytes'] / 1e6:.1f} MB (weights and vocabulary)
- **Training time:** {card['training_seconds'] / 60:.1f} min wall, {card.get('training_cpu_seconds', 0) / 60:.1f} min CPU on {card['machine']}, {len(card['epochs'])} epochs, seed {card['seed']}
- **Hash (sha256 of the weight files):** `{card['hash']}`
- **Rebuild:** `{card['command']}`

| label | spans in data | P | R | F1 |
|---|---|---|---|---|
{rows}

## Calibration (what the model serves)

Measured on the held-out split with the run-time reader (beam {cal.get('beam_width')}): per label,
the held-out gold spans, the spans served, their P / R / F1, and the precision of the spans per
raw-probability bin ({edges}), which is the confidence a served span carries. Labels with F1 below
{cal.get('min_f1')} are not served; spans whose bin precision is below {cal.get('min_confidence')} are not served.

| label | gold | spans | P / R / F1 | confidence per bin | |
|---|---|---|---|---|---|
{cal_rows}
"""
