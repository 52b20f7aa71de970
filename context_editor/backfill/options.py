"""The options of a job over many sessions, shared by `backfill`, `audit verify --all` and
`replay --all` (kept apart so building the CLI's parser imports nothing heavy)."""

from __future__ import annotations

import argparse

DEFAULT_BATCH = 200  # sessions per task: ~1 s of work, few enough store round trips per session


def add_engine_options(p: argparse.ArgumentParser, out_required: bool) -> None:
    """--engine, --address, --workers, --batch-size, --out: how a job over many sessions runs."""
    p.add_argument("--engine", default="local", help="local (one process) or ray (default local); others may be "
                   "registered in the context_editor.engines entry-point group")
    p.add_argument("--address", metavar="ADDR", help="the Ray cluster (ray://HOST:10001 or HOST:6379); "
                   "default: start Ray on this machine")
    p.add_argument("--workers", type=int, metavar="N", help="CPUs of a Ray runtime started here (default: all)")
    p.add_argument("--batch-size", type=int, default=DEFAULT_BATCH, metavar="N",
                   help=f"sessions per task, read from the store as one key range (default {DEFAULT_BATCH})")
    p.add_argument("--out", metavar="DIR", required=out_required,
                   help="where the results go; a rerun with the same DIR skips the batches already finished")
