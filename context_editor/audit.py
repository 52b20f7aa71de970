"""Audit: prove the record is intact (`verify`), reproducible (`replay`) and hand it over (`export`).

`verify` reads the rows exactly as stored and checks both hash chains: raw messages and edits.
Each row must hash to its stored hash, link to the previous row's hash, sit at the next dense
index, and agree with its indexed columns; the session's counters must match, so a deleted last
row is caught too. `replay` re-runs the stored raw messages through the domain version recorded
with the session, in memory, and compares the edit log byte for byte; a session upgraded to a
new domain version is replayed segment by segment, each under the version it ran with.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any, Iterator

from .domain import Domain
from .model import GENESIS_HASH, Edit, Message, canonical_json
from .store import MemoryStore, Store


@dataclass
class Verdict:
    session: str
    ok: bool
    messages: int = 0
    edits: int = 0
    broken_at: str | None = None  # "edit 17" or "message 3"
    reason: str | None = None
    problems: list[str] = field(default_factory=list)


def _check_chain(kind: str, rows: list[tuple[int, str, str]], expected: int) -> tuple[str, str] | None:
    """rows: (position column, stored body, stored hash). First problem as (where, why)."""
    prev = GENESIS_HASH
    for pos, (column, body, stored_hash) in enumerate(rows):
        where = f"{kind} {pos}"
        if column != pos:
            return where, f"{kind} at position {pos} has index {column} (a row was deleted, inserted or reordered)"
        if hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest() != stored_hash:
            return where, f"{kind} {pos} does not match its hash (its content was changed)"
        try:
            doc = json.loads(body)
        except ValueError:
            return where, f"{kind} {pos} is not valid JSON"
        if canonical_json(doc) != body:
            return where, f"{kind} {pos} is not in canonical form (it was rewritten)"
        if doc.get("prev_hash") != prev:
            return where, f"{kind} {pos} does not link to the previous {kind}'s hash"
        prev = stored_hash
    if len(rows) != expected:
        return f"{kind} {len(rows)}", f"the session records {expected} {kind}s but {len(rows)} are stored (a trailing row was deleted or added)"
    return None


def verify_session(store: Store, session: str) -> Verdict:
    info = store.require_session(session)
    msg_rows, edit_rows = store.raw_rows(session)
    verdict = Verdict(session, True, len(msg_rows), len(edit_rows))
    problem = (_check_chain("message", msg_rows, info.messages)
               or _check_chain("edit", [(seq, body, h) for seq, _, _, body, h in edit_rows], info.edits))
    if problem is None:
        for seq, rnd, mindex, body, _ in edit_rows:
            doc = json.loads(body)
            if (doc["seq"], doc["round"], doc["message_index"], doc["session"]) != (seq, rnd, mindex, session):
                problem = (f"edit {seq}", f"edit {seq}'s columns disagree with its signed body (a column was changed)")
                break
            if not 0 <= mindex < len(msg_rows):
                problem = (f"edit {seq}", f"edit {seq} refers to message {mindex}, which does not exist")
                break
    if problem:
        verdict.ok, (verdict.broken_at, verdict.reason) = False, problem
    return verdict


def verify(store: Store, session: str | None = None) -> list[Verdict]:
    """Verdicts for one session or all sessions of the store."""
    return [verify_session(store, s) for s in ([session] if session else store.sessions())]


@dataclass
class ReplayReport:
    session: str
    identical: bool
    recorded: int
    replayed: int
    first_difference: dict[str, Any] | None = None


def replay(store: Store, session: str, allow_plugins: bool = False) -> ReplayReport:
    """Re-run the stored messages through the recorded domain version; compare the edit logs."""
    from .pipeline import ContextEditor, stored_domain  # the pipeline depends on audit's neighbours, not the reverse

    info = store.require_session(session)

    def version(v: str) -> Domain:
        return stored_domain(store, replace(info, domain_version=v), allow_plugins)

    edits = store.edits(session)
    # Each segment runs under the version it ran with: the first one, then each `upgrade` edit's.
    upgrades = {e.message_index: str(e.after) for e in edits if e.op == "upgrade"}
    first = next((str(e.before) if e.op == "upgrade" else e.domain_version for e in edits[:1]), info.domain_version)
    domain = version(first)
    editor = ContextEditor(domain, MemoryStore())
    for m in store.messages(session):
        if m.index in upgrades:
            domain = version(upgrades[m.index])
            editor = ContextEditor(domain, editor.store, upgrade=True)
        editor.add(session, Message.from_dict(m.to_dict()))
    recorded = [e.to_dict() for e in edits]
    replayed = [e.to_dict() for e in editor.store.edits(session)]
    report = ReplayReport(session, recorded == replayed, len(recorded), len(replayed))
    if not report.identical:
        for i in range(max(len(recorded), len(replayed))):
            a = recorded[i] if i < len(recorded) else None
            b = replayed[i] if i < len(replayed) else None
            if a != b:
                keys = sorted(k for k in set(a or {}) | set(b or {}) if (a or {}).get(k) != (b or {}).get(k))
                report.first_difference = {"seq": i, "fields": keys, "recorded": a, "replayed": b}
                break
    if domain.version_hash != info.domain_version:
        report.identical = False
        report.first_difference = report.first_difference or {
            "seq": None, "fields": ["domain_version"],
            "recorded": info.domain_version, "replayed": domain.version_hash}
    return report


def export(store: Store, session: str) -> Iterator[dict[str, Any]]:
    """The session for auditors: a header, then messages and edits interleaved in commit order."""
    info = store.require_session(session)
    yield {"type": "session", "session": session, "domain": info.domain, "domain_version": info.domain_version,
           "domain_source": store.get_domain(info.domain_version), "messages": info.messages, "edits": info.edits}
    edits: list[Edit] = store.edits(session)
    j = 0
    for m in store.messages(session):
        yield {"type": "message", **m.to_dict()}
        while j < len(edits) and edits[j].message_index == m.index:
            yield {"type": "edit", **edits[j].to_dict()}
            j += 1
