"""The work of one batch: a key range of sessions, read from the store and processed here.

Every engine runs batches through `run_batch` (local: in the driver's process; Ray: in a task on
any node), so what is computed cannot depend on the engine. A worker process opens the store
and rebuilds the domain once per job (`_worker`) and reuses them for every batch it is given.
A session that fails is tried again, then reported with its traceback; the batch goes on.
"""

from __future__ import annotations

import traceback
from functools import partial
from dataclasses import asdict, dataclass
from fnmatch import fnmatchcase
from typing import Any, Callable

from .. import audit
from ..domain import Domain, domain_from_source
from ..model import State, canonical_json
from ..pipeline import REDERIVE, ContextEditor, rerun
from ..store import MemoryStore, Store, open_store
from ..store.base import redacted
from .diff import session_changes

KINDS = ("backfill", "apply", "verify", "replay")
ATTEMPTS = 2  # a session that fails is tried once more (a transient store error), then reported
APPLY_NOTE = {"role": "system", "name": "backfill", "content": "backfill"}  # the message an applied upgrade rides on


@dataclass(frozen=True, slots=True)
class Job:
    """What to do to every selected session. `domain`: the new version's document (backfill,
    apply), shipped to the workers so they need no file. `select`: a glob on session ids."""

    kind: str
    store: str
    domain: dict[str, Any] | None = None
    select: str | None = None
    allow_plugins: bool = False
    pubkey: str | None = None

    def key(self) -> str:
        """What identifies the job (in DIR/job.json): the store URL without its password."""
        return canonical_json({**asdict(self), "store": redacted(self.store)})


@dataclass(frozen=True, slots=True)
class Batch:
    """Sessions in the key range (after, upto]; `only`: just these of them (apply)."""

    index: int
    after: str | None
    upto: str | None
    only: tuple[str, ...] | None = None


class _Worker:
    """What a worker process keeps between batches of one job."""

    def __init__(self, job: Job):
        self.store: Store = open_store(job.store, create=False)
        self.domain: Domain | None = None
        if job.domain is not None:
            self.domain = domain_from_source(job.domain, "<backfill domain>", job.allow_plugins)
        self.applier = (ContextEditor(self.domain, self.store, allow_plugins=job.allow_plugins, upgrade=REDERIVE)
                        if job.kind == "apply" and self.domain else None)
        self.domain_checks = audit.domain_checks(self.store, job.allow_plugins) if job.kind == "verify" else None


_WORKERS: dict[str, _Worker] = {}


def _worker(job: Job) -> _Worker:
    key = job.key()
    if key not in _WORKERS:
        _WORKERS.clear()  # one job at a time per process: a finished job's store is not kept open
        _WORKERS[key] = _Worker(job)
    return _WORKERS[key]


def forget_workers() -> None:
    """Close what this process kept (the driver calls it when a local run ends)."""
    for w in _WORKERS.values():
        w.store.close()
    _WORKERS.clear()


def _attempt(session: str, work: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return work()
        except Exception as exc:  # any failure of one session is reported, never lets the batch fall
            if attempt == ATTEMPTS:
                return [{"type": "failure", "session": session, "error": f"{type(exc).__name__}: {exc}",
                         "traceback": traceback.format_exc(), "attempts": attempt}]
    raise AssertionError("unreachable")


def run_batch(job: Job, batch: Batch) -> list[dict[str, Any]]:
    """Every record of one batch, in session order: results, failures, skipped sessions."""
    w = _worker(job)
    if job.kind == "verify":
        return _verify(job, w, batch)
    keys = [k for k in (batch.only if batch.only is not None else w.store.session_keys(batch.after, batch.upto))
            if job.select is None or fnmatchcase(k, job.select)]
    out: list[dict[str, Any]] = []
    if job.kind in ("replay", "apply"):
        for s in keys:
            out += _attempt(s, partial(_replayed if job.kind == "replay" else _applied, w, job, s))
        return out
    assert w.domain is not None
    domain = w.domain
    editor = ContextEditor(domain, MemoryStore(), cache_sessions=1, recalled=())  # one replay editor per batch
    for stored in w.store.read_sessions(keys):
        info = stored.info
        if info.domain != domain.name:
            out.append({"type": "skipped", "session": info.session, "why": f"session of domain {info.domain!r}"})
            continue

        def compare(stored: Any = stored, info: Any = info) -> list[dict[str, Any]]:
            before = State.fold(info.domain, info.domain_version, info.session, stored.edits)
            after = rerun(domain, info.session, stored.messages, editor, recorded=stored.edits)
            changes = [{"type": "change", **c} for c in session_changes(before, after, domain)]
            return [*changes, {"type": "session", "session": info.session, "changed": bool(changes),
                               "messages": len(stored.messages), "on_version": info.domain_version == domain.version_hash}]

        out += _attempt(info.session, compare)
    return out


def _replayed(w: _Worker, job: Job, session: str) -> list[dict[str, Any]]:
    r = audit.replay(w.store, session, job.allow_plugins)
    return [{"type": "replay", "session": session, "identical": r.identical, "recorded": r.recorded,
             "replayed": r.replayed, "first_difference": r.first_difference}]


def _applied(w: _Worker, job: Job, session: str) -> list[dict[str, Any]]:
    """Move a changed session to the new version: an `upgrade` edit that re-derives its state,
    with a system message dated like its last message (no time passes for TTLs)."""
    assert w.applier is not None and w.domain is not None
    last = w.store.messages(session)[-1]
    before = w.store.require_session(session).edits
    w.applier.add(session, {**APPLY_NOTE, "timestamp": last.timestamp})
    return [{"type": "applied", "session": session, "edits": w.store.require_session(session).edits - before,
             "version": w.domain.version_hash}]


def _verify(job: Job, w: _Worker, batch: Batch) -> list[dict[str, Any]]:
    assert w.domain_checks is not None
    out = []
    for v in audit.verify_range(w.store, batch.after, batch.upto, w.domain_checks, job.pubkey):
        if job.select is None or fnmatchcase(v.session, job.select):
            out.append({"type": "verify", "session": v.session, "ok": v.ok, "messages": v.messages, "edits": v.edits,
                        "broken_at": v.broken_at, "reason": v.reason, "problems": v.problems})
    return out
