"""`context-editor backfill`, and the `--all --engine` fan-out of `audit verify` and `replay`.

Everything that can be refused is checked before any work starts: the domain (lint), the store
(reachable, schema), the engine (Ray installed, the cluster reachable) and the --out directory.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .. import audit, registry
from ..domain import load_domain
from ..errors import Errors
from ..store import SQLiteStore, Store, open_store
from . import driver, report
from .engines import Engine
from .options import add_engine_options
from .jobs import Batch, Job

def _shared_url(store: Store) -> str:
    """The store's URL as every worker can open it (an absolute SQLite path)."""
    if isinstance(store, SQLiteStore):
        return f"sqlite:///{Path(store.path).resolve()}"
    if store.url.startswith("memory:"):
        raise Errors.BAD_ENGINE_OPTION(problem="a memory:// store cannot be shared with workers",
                                       fix="pass --store with an SQLite file or a postgresql:// URL")
    return store.url


def _engine(args: argparse.Namespace) -> Engine:
    if args.batch_size < 1:
        raise Errors.BAD_ENGINE_OPTION(problem=f"--batch-size {args.batch_size}", fix="pass a positive number")
    engine: Engine = registry.engines.get(args.engine)(args.address, args.workers)
    return engine


def _plugins(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "allow_plugins", False))


def _finish(engine: Engine, stats: driver.RunStats, what: str) -> None:
    rate = (stats.sessions / stats.seconds) if stats.seconds and not stats.skipped_batches else None
    resumed = f", {stats.skipped_batches} of {stats.batches} batches done by an earlier run" if stats.skipped_batches else ""
    print(f"{what}: {stats.sessions:,} sessions in {stats.batches:,} batches on {engine.name} "
          f"({stats.workers} workers) in {stats.seconds:.1f} s" + (f" ({rate:,.1f} sessions/s)" if rate else "") + resumed)


def cmd_backfill(args: argparse.Namespace) -> int:
    if args.sessions and args.tenant:
        raise Errors.BAD_ENGINE_OPTION(problem="--sessions and --tenant both select sessions",
                                       fix="pass one of them (a glob such as 'acme/*' selects a tenant too)")
    domain = load_domain(args.domain, allow_plugins=_plugins(args))
    store = open_store(args.store, create=False)
    url = _shared_url(store)
    engine = _engine(args)
    try:
        job = Job("backfill", url, domain.source, args.sessions, _plugins(args))
        out = driver.OutDir(Path(args.out), job)
        out.plan(store, *driver.selection_range(args.sessions, args.tenant), args.batch_size)
        stats = driver.run(job, engine, out, sys.stderr)
        title = f"Backfill of domain {domain.name} version {domain.version} ({domain.version_hash[:12]})"
        s = report.write_backfill(out, title, stats)
        _finish(engine, stats, "backfill")
        print(f"{s.changed:,} of {s.sessions:,} sessions would end in a different state; {s.failures} failed; "
              f"{s.critical_lost} critical field(s) lost; report: {out.path / 'report.md'}")
        if s.critical_lost and not args.allow_critical_loss:
            print(f"critical fields would be lost: nothing applied (pass --allow-critical-loss to accept it)",
                  file=sys.stderr)
            return 1
        if args.apply:
            moved, failed = _apply(args, engine, out, domain.source, url)
            print(f"applied: {moved:,} sessions moved to version {domain.version_hash[:12]} with re-derived state"
                  f" ({failed} failed); {out.path / 'apply' / 'applied.jsonl'}")
            if failed:
                return 1
        return 1 if s.failures or stats.failed_batches else 0
    finally:
        engine.close()


def _apply(args: argparse.Namespace, engine: Engine, out: driver.OutDir, source: dict[str, Any], url: str) -> tuple[int, int]:
    """Move every changed session (not on the new version yet) to it: a resumable job of its own."""
    job = Job("apply", url, source, None, _plugins(args))
    applied = driver.OutDir(out.path / "apply", job)

    def changed() -> Any:
        for batch, _ in out.planned():
            keys = [r["session"] for r in out.batch_records(batch)
                    if r["type"] == "session" and r["changed"] and not r["on_version"]]
            if keys:
                yield Batch(batch.index, batch.after, batch.upto, tuple(keys)), len(keys)

    applied.plan_batches(changed())
    stats = driver.run(job, engine, applied, sys.stderr, "sessions applied")
    moved, failed = report.write_applied(applied)
    return moved, failed + sum(len(b.only or ()) for b, _ in stats.failed_batches)


def run_checks(kind: str, args: argparse.Namespace) -> int:
    """`audit verify --all` / `replay --all`: every selected session, fanned out on an engine."""
    if not args.out:
        raise Errors.BAD_ENGINE_OPTION(problem="--all needs --out DIR",
                                       fix="pass --out DIR: the results go there, and a rerun with it resumes the run")
    if getattr(args, "checkpoint", None):
        raise Errors.BAD_ENGINE_OPTION(problem="--checkpoint is checked by `audit verify` without --all",
                                       fix="run `audit verify --pubkey K --checkpoint FILE` in one process")
    store = open_store(args.store, create=False)
    url = _shared_url(store)
    pubkey = None
    if kind == "verify" and args.pubkey:
        from ..signing import public_key_from

        pubkey = public_key_from(args.pubkey)
    engine = _engine(args)
    try:
        job = Job(kind, url, None, args.sessions, _plugins(args), pubkey)
        out = driver.OutDir(Path(args.out), job)
        out.plan(store, *driver.selection_range(args.sessions, args.tenant), args.batch_size)
        problems: list[str] = []
        limits: list[str] = []
        if kind == "verify":
            problems, limits = audit.store_checks(store, pubkey, _plugins(args))
        stats = driver.run(job, engine, out, sys.stderr)
        title = ("Audit verify" if kind == "verify" else "Replay") + " of every selected session"
        s = report.write_checks(out, kind, title, stats, problems, limits)
        _finish(engine, stats, f"audit verify" if kind == "verify" else "replay")
        word = "broken" if kind == "verify" else "replaying differently"
        print(f"{s.sessions:,} sessions checked: {s.bad:,} {word}, {s.failures} failed"
              + (f", {len(problems)} store problem(s)" if problems else "") + f"; report: {out.path / 'report.md'}")
        return 1 if s.bad or s.failures or problems or stats.failed_batches else 0
    finally:
        engine.close()


def register(sub: Any) -> None:
    """`context-editor backfill` (entry point in the context_editor.commands group)."""
    help_ = registry.OWN_COMMANDS["backfill"]
    p = sub.add_parser("backfill", help=help_, description=help_)
    p.set_defaults(func=cmd_backfill)
    p.add_argument("--domain", required=True, metavar="NEW.yaml", help="the new version of the sessions' domain")
    p.add_argument("--sessions", metavar="GLOB", help="only session ids matching this glob (default: all)")
    add_engine_options(p, out_required=True)
    p.add_argument("--apply", action="store_true",
                   help="then move every changed session to the new version: an `upgrade` edit that re-derives its "
                        "state, recorded in its log (replay reproduces it)")
    p.add_argument("--allow-critical-loss", action="store_true",
                   help="exit 0 (and apply) even if a critical field would lose its value")
