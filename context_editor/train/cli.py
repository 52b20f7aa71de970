"""`context-editor train ner`: train the small NER model of a domain (added to the main CLI by `register`).

    context-editor train ner --format golden|sgd|crosswoz DATA --out DIR [--lang en|zh] [--seed N] [--max-epochs N] [--min-f1 F]
        [--width N] [--depth N] [--embed-size N]

DATA is a golden JSONL file or directory (docs/ner-training.md), an SGD split directory, or a
CrossWOZ split file. The model directory gets the weights plus a card (card.json, README.md).
Progress goes to stderr, the model directory to stdout.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from ..registry import OWN_COMMANDS
from .corpus import FORMATS, read_examples
from .ner import TrainOptions, train_ner

_DEFAULT_LANG = {"crosswoz": "zh"}


def cmd_train_ner(args: Any) -> int:
    examples = read_examples(args.format, args.data)  # validates everything before anything is written
    lang = args.lang or _DEFAULT_LANG.get(args.format, "en")
    defaults = TrainOptions()
    opts = TrainOptions(lang=lang, seed=args.seed, max_epochs=args.max_epochs, patience=args.patience,
                        max_examples=args.max_examples, min_f1=args.min_f1, width=args.width, depth=args.depth,
                        embed=args.embed_size or (8000 if lang == "zh" else defaults.embed))
    command = "context-editor " + " ".join(shlex.quote(a) for a in args.argv)
    data = {"format": args.format, "path": str(args.data), "examples": len(examples)}
    result = train_ner(examples, args.out, opts, command=command, data=data,
                       log=lambda s: print(f"train ner: {s}", file=sys.stderr, flush=True))
    print(result.out)
    return 0


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """The `train` command (registered in the `context_editor.commands` entry-point group)."""
    p = subparsers.add_parser("train", help=OWN_COMMANDS["train"], description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    kinds = p.add_subparsers(dest="model", required=True, metavar="MODEL")
    k = kinds.add_parser("ner", help="a small spaCy NER model whose labels are kinds of value")
    k.add_argument("data", metavar="DATA", help="golden JSONL file/dir, SGD split dir, or CrossWOZ split file")
    k.add_argument("--format", required=True, choices=FORMATS)
    k.add_argument("--out", required=True, metavar="DIR", help="the model directory (replaced only when training succeeds)")
    k.add_argument("--lang", choices=("en", "zh"), help="tokenizer language (default: zh for crosswoz, else en)")
    k.add_argument("--seed", type=int, default=0)
    k.add_argument("--max-epochs", type=int, default=TrainOptions.max_epochs, metavar="N")
    k.add_argument("--patience", type=int, default=TrainOptions.patience, metavar="N",
                   help="stop after N epochs without a better held-out F1")
    k.add_argument("--max-examples", type=int, metavar="N", help="train on a deterministic subset of N examples")
    k.add_argument("--min-f1", type=float, default=TrainOptions.min_f1, metavar="F",
                   help="serve only labels whose held-out F1 is at least F (default 0.5)")
    k.add_argument("--embed-size", type=int, metavar="N", help="hash-embedding rows per feature (default 4000, zh 8000)")
    k.add_argument("--width", type=int, default=TrainOptions.width, metavar="N",
                   help=f"tok2vec width (default {TrainOptions.width}; narrower is cheaper per message)")
    k.add_argument("--depth", type=int, default=TrainOptions.depth, metavar="N",
                   help=f"tok2vec CNN layers (default {TrainOptions.depth}; fewer is cheaper per message)")
    k.set_defaults(func=cmd_train_ner, argv=None)
