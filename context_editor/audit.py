"""Audit: prove the record is intact (`verify`), anchored (`checkpoint`), reproducible (`replay`)
and hand it over (`export`).

`verify` reads every row exactly as stored, for every session id found in any table (a session
whose `sessions` row was deleted is still checked, and reported). Per session it checks both
hash chains (each row hashes to its stored hash, links to the previous row, sits at the next
dense position and agrees with its key columns: session, index, round, seq), that each edit
points at a stored message of the same round, and the session's head: the canonical record of
its counts, last message hash, last edit hash and domain version, recomputed from the rows. Each
domains row must hash to its stored SHA-256 and rebuild to its version id.

Without a key that is all a hash chain can prove: someone who can write the store can rewrite a
session consistently (recomputed hashes and head) or delete a whole session. With heads signed
(Ed25519, the key outside the store) and a checkpoint (a signed Merkle tree head over every
session head, kept outside the store), `verify --pubkey K --checkpoint FILE` also proves that no
session anchored by the checkpoint was deleted, truncated or rewritten since.

`replay` re-runs the stored raw messages through the domain version recorded with the session,
in memory, and compares the edit log byte for byte (a render's recorded model answers are
re-recorded where they stood, as inputs); a session upgraded to a new domain version
is replayed segment by segment, each under the version it ran with.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Collection, Iterator

from .domain import Domain, domain_from_source
from .errors import AuditError, DomainError, Errors
from .model import GENESIS_HASH, Edit, Message, canonical_json, commitment, session_owner
from .signing import Signer, check_signature
from .store import MemoryStore, Store
from .store.base import Forget, Head, Tombstone

NO_KEY_LIMITS = ("heads were not checked against a trusted public key (no --pubkey): a consistent rewrite of a "
                 "session (every hash and its head recomputed), a truncation with a recomputed head, the "
                 "deletion of a whole session, or a rewritten erasure tombstone (who, when, why) cannot be "
                 "detected. Sign heads and tombstones (CONTEXT_EDITOR_SIGNING_KEY_FILE) "
                 "and verify with --pubkey and --checkpoint for those guarantees.")
NO_CHECKPOINT_LIMITS = ("no --checkpoint: signed heads prove who wrote each head, but not that a session was not "
                        "deleted or rolled back to an older signed head; verify against a checkpoint for that.")


@dataclass
class Verdict:
    session: str
    ok: bool
    messages: int = 0
    edits: int = 0
    broken_at: str | None = None  # "edit 17", "message 3", "head", "domain …", "checkpoint"
    reason: str | None = None
    problems: list[str] = field(default_factory=list)
    erased: list[dict[str, Any]] = field(default_factory=list)  # tombstones: kind, pos, at, actor, reason

    def erasure_summary(self) -> list[str]:
        """"n messages erased (on <date>, by <actor>, <reason>)", one line per erasure event."""
        groups: dict[tuple[str, str, str], dict[str, int]] = {}
        for t in self.erased:
            counts = groups.setdefault((t["at"][:10], t["actor"], t["reason"]), {})
            counts[t["kind"]] = counts.get(t["kind"], 0) + 1
        names = {"message": ("message", "messages"), "edit": ("edit", "edits"),
                 "before": ("replaced value", "replaced values")}  # an edit's `before`: erased with the value it was
        return [", ".join(f"{counts[kind]} {names[kind][counts[kind] != 1]}" for kind in names if kind in counts)
                + f" erased (on {at}, by {actor}, {reason})" for (at, actor, reason), counts in sorted(groups.items())]

    def fail(self, where: str, why: str) -> None:
        if self.ok:
            self.ok, self.broken_at, self.reason = False, where, why
        self.problems.append(f"{where}: {why}")


@dataclass
class AuditReport:
    """What `verify` found: one verdict per session, problems of the store as a whole, and the
    guarantees this run could not give (no trusted key, no checkpoint)."""

    sessions: list[Verdict]
    store_problems: list[str] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)
    checkpoint: str | None = None  # which checkpoint the sessions were checked against

    @property
    def ok(self) -> bool:
        return not self.store_problems and all(v.ok for v in self.sessions)


def _check_chain(kind: str, rows: list[tuple[int, str, str]]) -> tuple[str, str] | None:
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
        if not isinstance(doc, dict) or canonical_json(doc) != body:
            return where, f"{kind} {pos} is not in canonical form (it was rewritten)"
        if doc.get("prev_hash") != prev:
            return where, f"{kind} {pos} does not link to the previous {kind}'s hash"
        prev = stored_hash
    return None


def _check_columns(session: str, msg_rows: list[tuple[Any, ...]], edit_rows: list[tuple[Any, ...]]) -> tuple[str, str] | None:
    """Key columns against the hashed bodies; each edit against the message it cites."""
    rounds = []
    for idx, rnd, body, _ in msg_rows:
        doc = json.loads(body)
        if (doc.get("session"), doc.get("index"), doc.get("round")) != (session, idx, rnd):
            return f"message {idx}", (f"message {idx}'s columns (session, index, round) disagree with its hashed body "
                                      "(a column was changed or the row was moved from another session)")
        rounds.append(rnd)
    last_index = 0
    for seq, rnd, mindex, body, _ in edit_rows:
        doc = json.loads(body)
        if (doc.get("seq"), doc.get("round"), doc.get("message_index"), doc.get("session")) != (seq, rnd, mindex, session):
            return f"edit {seq}", (f"edit {seq}'s columns disagree with its hashed body "
                                   "(a column was changed or the row was moved from another session)")
        if not 0 <= mindex < len(rounds):
            return f"edit {seq}", f"edit {seq} refers to message {mindex}, which does not exist"
        if rounds[mindex] != rnd or mindex < last_index:
            return f"edit {seq}", f"edit {seq} is out of order with message {mindex} (round or position disagree)"
        last_index = mindex
    return None


@lru_cache(maxsize=64)
def _domain_problem(version: str, name: str, text: str, digest: str, allow_plugins: bool) -> tuple[str | None, str | None]:
    """(why a domains row is not the document it claims to be, or None; a note, or None).

    A document that no longer rebuilds to its version id under this package's rule packs is a
    note, not a break: the packs may have changed since (its text still matches its SHA-256 and
    the session heads that name it)."""
    if hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() != digest:
        return "its document does not match its SHA-256 (the document was changed)", None
    try:
        source = json.loads(text)
        rebuilt = domain_from_source(source, f"<stored {version}>", allow_plugins)
    except DomainError as exc:
        if exc.code == Errors.PLUGINS_REFUSED.code:  # plugin code is not run unless allowed: the hash check above still holds
            return None, None
        return f"its document is not a valid domain ({exc.message})", None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        return f"its document is not a valid domain ({type(exc).__name__})", None
    if rebuilt.name != name:
        return f"its name column {name!r} is not the document's domain {rebuilt.name!r}", None
    if rebuilt.version_hash != version:
        return None, (f"domain version {version} rebuilds to {rebuilt.version_hash} under this package's rule packs "
                      "(the packs changed since it was stored; `replay` of its sessions will report the difference)")
    return None, None


def _verify_rows(store: Store, session: str, row: tuple[Any, ...] | None, domains: dict[str, tuple[Any, ...]],
                 domain_problems: dict[str, str | None], trusted: str | None) -> Verdict:
    msg_rows, edit_rows = store.raw_rows(session)
    v = Verdict(session, True, len(msg_rows), len(edit_rows))
    problem = (_check_chain("message", [(idx, body, h) for idx, _, body, h in msg_rows])
               or _check_chain("edit", [(seq, body, h) for seq, _, _, body, h in edit_rows])
               or _check_columns(session, msg_rows, edit_rows))
    if problem:
        v.fail(*problem)
    if row is None:
        v.fail("session", "messages or edits are stored for a session the sessions table does not list "
                          "(its sessions row was deleted or a row's session column was changed)")
        return v
    domain, version, n_msgs, n_edits, head_text, signature = row
    for kind, recorded, stored in (("message", n_msgs, len(msg_rows)), ("edit", n_edits, len(edit_rows))):
        if recorded != stored:
            v.fail(f"{kind} {stored}", f"the session records {recorded} {kind}s but {stored} are stored "
                                       "(a trailing row was deleted or added)")
    if not msg_rows:
        v.fail("session", "the session has no message (a session is created by its first message)")
    domain_row = domains.get(version)
    if domain_row is None:
        v.fail("domain", f"the session's domain version {version} is not in the domains table")
    elif domain_problems.get(version):
        v.fail("domain", f"domain version {version}: {domain_problems[version]}")
    elif domain_row[0] != domain:
        v.fail("domain", f"the session names domain {domain!r} but version {version} is domain {domain_row[0]!r}")
    expected = Head(session, domain, version, domain_row[2] if domain_row else None, len(msg_rows),
                    len(edit_rows), msg_rows[-1][3] if msg_rows else GENESIS_HASH,
                    edit_rows[-1][4] if edit_rows else GENESIS_HASH).text()
    if head_text != expected:
        v.fail("head", "the session head does not match its rows (counts, last hashes or domain were changed)")
    if why := check_signature(signature, head_text, trusted):
        v.fail("head", f"the session head cannot be trusted: {why}")
    _check_payloads(store, session, msg_rows, edit_rows, trusted, v)
    return v


@dataclass(frozen=True)
class DomainChecks:
    """The domains table as stored, and what is wrong with each row (checked once per run)."""

    rows: dict[str, tuple[Any, ...]]
    problems: dict[str, str | None]  # version -> why the row is unusable
    notes: dict[str, str | None]  # version -> why it is only a limit (it rebuilds under other rule packs)


def domain_checks(store: Store, allow_plugins: bool = False) -> DomainChecks:
    rows = store.raw_domains()
    checked = {version: _domain_problem(version, *row, allow_plugins) for version, row in rows.items()}
    return DomainChecks(rows, {v: why for v, (why, _) in checked.items()}, {v: note for v, (_, note) in checked.items()})


def verify_range(store: Store, after: str | None, upto: str | None, checks: DomainChecks,
                 pubkey: str | None = None) -> list[Verdict]:
    """Verdicts for every session id found in any table in the key range (after, upto], in order:
    the unit of work of `audit verify --all` (and, with no bounds, of `verify_store`)."""
    found = store.raw_sessions(after, upto)
    return [_verify_rows(store, s, found[s], checks.rows, checks.problems, pubkey) for s in sorted(found)]


def _store_problems(checks: DomainChecks, used: set[str]) -> tuple[list[str], list[str]]:
    """Problems of the store as a whole and the limits of this run, given the domain versions sessions use."""
    problems = [f"domain version {version}: {why}" for version, why in sorted(checks.problems.items()) if why]
    limits = []
    for version, note in sorted(checks.notes.items()):
        if note and version not in used:  # no session names it: nothing vouches for it
            problems.append(f"domain version {version}: no session uses it and it does not rebuild to its id")
        elif note:
            limits.append(note)
    return problems, limits


def store_checks(store: Store, pubkey: str | None = None, allow_plugins: bool = False,
                 page: int = 1000) -> tuple[list[str], list[str]]:
    """The whole-store part of `verify_store` (domain rows; the limits of a run with or without a
    trusted key), for a run whose sessions are verified elsewhere. Sessions rows are read a page
    of key range at a time, so memory does not grow with the store."""
    used: set[str] = set()
    after: str | None = None
    while keys := store.session_keys(after, None, page):
        used.update(row[1] for row in store.raw_sessions(after, keys[-1]).values() if row is not None)
        after = keys[-1]
    problems, limits = _store_problems(domain_checks(store, allow_plugins), used)
    return problems, limits + ([NO_KEY_LIMITS] if pubkey is None else [NO_CHECKPOINT_LIMITS])


def _check_payloads(store: Store, session: str, msg_rows: list[tuple[Any, ...]], edit_rows: list[tuple[Any, ...]],
                    trusted: str | None, v: Verdict) -> None:
    """Each erasable row: its payload matches the commitment its hash covers, or it was erased
    and a tombstone (signed by the trusted key, when one is given) names that commitment."""
    payloads = store.raw_payloads(session)
    tombstones: dict[tuple[str, int], dict[str, Any]] = {}
    for kind, pos, text, signature in store.erasures(session):
        try:
            t = json.loads(text)
            key = (str(t["kind"]), int(t["pos"]))
        except (ValueError, KeyError, TypeError):
            v.fail(f"{kind} {pos}", "its erasure tombstone is not valid JSON")
            continue
        if why := check_signature(signature, text, trusted):
            v.fail(f"{key[0]} {key[1]}", f"its erasure tombstone cannot be trusted: {why}")
        if t.get("session") != session or canonical_json(t) != text or key != (kind, pos):
            v.fail(f"{key[0]} {key[1]}", "its erasure tombstone was changed or moved from another row or session")
        tombstones[key] = t
    # Each erasable part of a row, with the commitment its hash covers (None: a row written
    # before erasable payloads, which must have no payload).
    parts: list[tuple[str, int, Any]] = []
    for kind, pos, body in ([("message", idx, body) for idx, _, body, _ in msg_rows]
                            + [("edit", seq, body) for seq, _, _, body, _ in edit_rows]):
        try:
            fields = json.loads(body)
        except ValueError:
            continue  # the chain check reported it
        parts.append((kind, pos, fields.get("commitment")))
        if kind == "edit":
            parts.append(("before", pos, fields.get("before_commitment")))
    for kind, pos, committed in parts:
        found = payloads.pop((kind, pos), None)
        if committed is None:
            if found is not None:
                v.fail(f"{kind} {pos}", f"{kind} {pos} has a payload its hash does not commit to (a row was changed)")
            continue
        if found is not None:
            salt, payload = found
            try:
                data = json.loads(payload) if payload is not None else None
                ok = (salt is not None and isinstance(data, dict) and canonical_json(data) == payload
                      and commitment(salt, data) == committed)  # the form it is written in, byte for byte
            except (ValueError, TypeError):
                ok = False
            if not ok:
                v.fail(f"{kind} {pos}", f"{kind} {pos}'s text or values do not match the commitment its hash covers")
            elif (kind, pos) in tombstones:
                v.fail(f"{kind} {pos}", f"{kind} {pos} has a tombstone but still holds its text")
            continue
        t = tombstones.get((kind, pos))
        if t is None:
            v.fail(f"{kind} {pos}", f"{kind} {pos}'s text or values are gone without an erasure tombstone")
        elif t.get("commitment") != committed:
            v.fail(f"{kind} {pos}", f"the tombstone of {kind} {pos} names another commitment")
        else:
            v.erased.append(t)
    for kind, pos in payloads:
        v.fail(f"{kind} {pos}", f"a payload is stored for {kind} {pos}, which is not in the chain")
    for kind, pos in sorted(set(tombstones) - {(t["kind"], int(t["pos"])) for t in v.erased}):
        v.fail(f"{kind} {pos}", f"a tombstone names {kind} {pos}, which is not an erased row of the chain")


def verify_store(store: Store, session: str | None = None, pubkey: str | None = None,
                 checkpoint: str | Path | None = None, allow_plugins: bool = False) -> AuditReport:
    """Check every stored session (or one), every domain it uses, and optionally its signed heads
    (`pubkey`, hex) against the last checkpoint of a checkpoint file."""
    checks = domain_checks(store, allow_plugins)
    if session is not None:
        # The key range (just below the id, the id]: the one session, whatever the store's size.
        below = session[:-1] + chr(ord(session[-1]) - 1) + "\U0010ffff" if session and session[-1] > "\0" else None
        found = store.raw_sessions(below, session)
        if session not in found:
            raise Errors.NO_SESSION(session=session, store=store.url, known=", ".join(store.session_keys(limit=10)) or "none yet")
        report = AuditReport([_verify_rows(store, session, found[session], checks.rows, checks.problems, pubkey)])
        report.limits += [note for v, note in sorted(checks.notes.items()) if note]
    else:
        found = store.raw_sessions()
        report = AuditReport([_verify_rows(store, s, found[s], checks.rows, checks.problems, pubkey) for s in sorted(found)])
        report.store_problems, report.limits = _store_problems(checks, {row[1] for row in found.values() if row is not None})
    if pubkey is None:
        report.limits.append(NO_KEY_LIMITS)
    if checkpoint is None:
        if pubkey is not None:
            report.limits.append(NO_CHECKPOINT_LIMITS)
    else:
        if pubkey is None:
            raise Errors.CHECKPOINT(problem="a checkpoint can only be checked against a trusted public key",
                                  fix="pass --pubkey with the public key of the key that signed the checkpoint")
        _check_against_checkpoint(store, report, Path(checkpoint), pubkey, session)
    return report


def verify(store: Store, session: str | None = None) -> list[Verdict]:
    """Verdicts for one session or all sessions of the store (without a key: see verify_store)."""
    return verify_store(store, session).sessions


# ----------------------------------------------------------------------------- checkpoints
def merkle_root(leaves: list[str]) -> str:
    """RFC 6962 Merkle tree hash over the leaves (distinct prefixes for leaves and nodes)."""
    def tree(items: list[bytes]) -> bytes:
        if len(items) == 1:
            return hashlib.sha256(b"\x00" + items[0]).digest()
        split = 1 << ((len(items) - 1).bit_length() - 1)
        return hashlib.sha256(b"\x01" + tree(items[:split]) + tree(items[split:])).digest()

    return tree([leaf.encode("utf-8") for leaf in leaves]).hex() if leaves else hashlib.sha256(b"").hexdigest()


def checkpoint(store: Store, signer: Signer, out: str | Path | None = None) -> dict[str, Any]:
    """Sign a Merkle tree head over every session head; append it to `out` (one JSON line,
    linked to the previous line) and return it. Refused if the store does not verify now."""
    report = verify_store(store, pubkey=signer.public_hex)
    if not report.ok:
        bad = [f"{v.session}: {v.reason}" for v in report.sessions if not v.ok] + report.store_problems
        raise Errors.CHECKPOINT(problem=f"the store does not verify, so it cannot be anchored: {bad[0]}",
                              fix="run `context-editor audit verify` and restore the damaged sessions first")
    heads = [row[4] for _, row in sorted(store.raw_sessions().items()) if row is not None]
    prev = GENESIS_HASH
    path = Path(out) if out else None
    if path and path.exists():
        lines = [line for line in path.read_text("utf-8").splitlines() if line.strip()]
        if lines:
            prev = hashlib.sha256(lines[-1].encode("utf-8")).hexdigest()
    body = {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "sessions": len(heads),
            "root": merkle_root(heads), "heads": heads, "prev": prev}
    text = canonical_json(body)
    record = {"checkpoint": body, "signature": json.loads(signer.sign(text))}
    if path:
        with path.open("a", encoding="utf-8") as f:  # append-only: earlier checkpoints are never rewritten
            f.write(canonical_json(record) + "\n")
    return record


def _read_checkpoints(path: Path, pubkey: str) -> dict[str, Any]:
    """The last checkpoint of a file, after checking every line's signature and link."""
    try:
        lines = [line for line in path.read_text("utf-8").splitlines() if line.strip()]
    except OSError as exc:
        raise Errors.CHECKPOINT(problem=f"cannot read checkpoint file {path}: {exc.strerror}", fix="pass the file `audit checkpoint --out` wrote") from None
    if not lines:
        raise Errors.CHECKPOINT(problem=f"{path} holds no checkpoint", file=str(path), fix="run `context-editor audit checkpoint --out FILE`")
    prev, body = GENESIS_HASH, None
    for n, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
            body, signature = record["checkpoint"], record["signature"]
            text = canonical_json(body)
            why = check_signature(canonical_json(signature), text, pubkey)
            heads = body["heads"]
        except (ValueError, KeyError, TypeError):
            raise Errors.CHECKPOINT(problem="not a checkpoint record", file=str(path), line=n,
                                  fix="pass the file `audit checkpoint --out` wrote, unedited") from None
        if why:
            raise Errors.CHECKPOINT(problem=f"the checkpoint cannot be trusted: {why}", file=str(path), line=n,
                                  fix="pass the public key of the key that signed the checkpoints")
        if body.get("prev") != prev or merkle_root(heads) != body.get("root") or body.get("sessions") != len(heads):
            raise Errors.CHECKPOINT(problem="the checkpoint file was edited (a link or a tree head does not match)",
                                  file=str(path), line=n, fix="restore the checkpoint file from its witness")
        prev = hashlib.sha256(line.encode("utf-8")).hexdigest()
    assert isinstance(body, dict)
    return body


def _check_against_checkpoint(store: Store, report: AuditReport, path: Path, pubkey: str, only: str | None) -> None:
    """Every session the checkpoint anchors must still exist and still start with the anchored
    prefix: its message and edit at the anchored counts carry the anchored hashes. The chains are
    verified from genesis, so equal hashes there prove that nothing before them changed."""
    body = _read_checkpoints(path, pubkey)
    report.checkpoint = f"{path} ({body['at']}, {body['sessions']} sessions, root {body['root'][:16]}…)"
    verdicts = {v.session: v for v in report.sessions}
    for head_text in body["heads"]:
        head = json.loads(head_text)
        s = head["session"]
        if only not in (None, s):
            continue
        v = verdicts.get(s)
        if v is None:
            v = Verdict(s, True)
            report.sessions.append(v)
            v.fail("checkpoint", f"the session was deleted after the checkpoint of {body['at']}")
            continue
        msg_rows, edit_rows = store.raw_rows(s)
        n_msgs, n_edits = head["messages"], head["edits"]
        if len(msg_rows) < n_msgs or len(edit_rows) < n_edits:
            v.fail("checkpoint", f"the session was truncated after the checkpoint of {body['at']} "
                                 f"({n_msgs} messages and {n_edits} edits then, {len(msg_rows)} and {len(edit_rows)} now)")
        elif ((msg_rows[n_msgs - 1][3] if n_msgs else GENESIS_HASH) != head["last_message_hash"]
              or (edit_rows[n_edits - 1][4] if n_edits else GENESIS_HASH) != head["last_edit_hash"]):
            v.fail("checkpoint", f"the session was rewritten after the checkpoint of {body['at']} "
                                 "(its anchored messages or edits hash differently now)")
    report.sessions.sort(key=lambda v: v.session)


# ----------------------------------------------------------------------------- replay and export
KEEP_OPS = ("transition", "upgrade", "resolve")  # phases and version ids: no personal data, and the fold needs them


@dataclass
class ReplayReport:
    session: str
    identical: bool
    recorded: int
    replayed: int
    first_difference: dict[str, Any] | None = None
    # Edits that can no longer be re-derived: their message or their values were erased. Replay
    # compares every other edit; these it names.
    not_rederivable: list[int] = field(default_factory=list)


def _comparable(e: Edit) -> dict[str, Any]:
    """An edit as replay compares it: everything but its place in the chain and its hashes, which
    change with every fresh salt (the chain itself is `verify`'s business)."""
    d = e.to_dict()
    for key in ("seq", "prev_hash", "hash"):
        del d[key]
    return d


def replay(store: Store, session: str, allow_plugins: bool = False) -> ReplayReport:
    """Re-run the stored messages through the recorded domain version; compare the edit logs,
    message by message. An erased message is fed as its placeholder; the edits it caused, and
    those whose values were erased, are reported as no longer re-derivable instead of compared."""
    from .pipeline import REDERIVE, ContextEditor, stored_domain  # the pipeline depends on audit's neighbours, not the reverse

    info = store.require_session(session)

    def version(v: str) -> Domain:
        return stored_domain(store, replace(info, domain_version=v), allow_plugins)

    edits = store.edits(session)
    # Each segment runs under the version it ran with: the first one, then each `upgrade` edit's.
    # An upgrade that re-derived the state (`backfill --apply`) is replayed as one again.
    upgrades = {e.message_index: (str(e.after), REDERIVE if e.reason == REDERIVE else True) for e in edits if e.op == "upgrade"}
    first = next((str(e.before) if e.op == "upgrade" else e.domain_version for e in edits[:1]), info.domain_version)
    domain = version(first)
    # A render's recorded model answers (`llm` edits) are inputs, like the messages: they are
    # re-recorded where they stood, so the chain after them must come out the same.
    answers: dict[int, list[dict[str, Any]]] = {}
    for e in edits:
        if e.op == "llm":
            answers.setdefault(e.message_index, []).append(e.after)
    # So are the values a user's memory gave the session (the memory may have moved on since).
    editor = ContextEditor(domain, MemoryStore(), recalled=edits)
    messages = store.messages(session)
    for m in messages:
        if m.index in upgrades:
            domain = version(upgrades[m.index][0])
            editor = ContextEditor(domain, editor.store, upgrade=upgrades[m.index][1], recalled=edits)
        editor.add(session, Message.from_dict(m.to_dict()))
        if m.index in answers:
            editor.record(session, answers[m.index])
    erased_messages = {m.index for m in messages if m.erased}
    # An edit whose `before` was erased keeps its value, but replay cannot make it again as it was
    # (without the erased message the field had no value to replace): named too.
    gone = [e for e in edits
            if e.erased or e.before_erased or (e.message_index in erased_messages and e.op not in KEEP_OPS)]
    replayed = editor.store.edits(session)
    report = ReplayReport(session, True, len(edits), len(replayed), not_rederivable=[e.seq for e in gone])
    recorded_by: dict[int, list[Edit]] = {}
    replayed_by: dict[int, list[Edit]] = {}
    for e in edits:
        recorded_by.setdefault(e.message_index, []).append(e)
    for e in replayed:
        replayed_by.setdefault(e.message_index, []).append(e)
    skip = {e.seq for e in gone}
    for index in sorted(set(recorded_by) | set(replayed_by)):
        rec, rep = recorded_by.get(index, []), replayed_by.get(index, [])
        if index in erased_messages:
            rec = [e for e in rec if e.op in KEEP_OPS]
            rep = [e for e in rep if e.op in KEEP_OPS]
        fields = {e.field for e in rec if e.seq in skip}
        a = [_comparable(e) for e in rec if e.field not in fields or e.op in KEEP_OPS]
        b = [_comparable(e) for e in rep if e.field not in fields or e.op in KEEP_OPS]
        if a != b:
            report.identical = False
            i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            x, y = (a[i] if i < len(a) else None), (b[i] if i < len(b) else None)
            keys = sorted(k for k in set(x or {}) | set(y or {}) if (x or {}).get(k) != (y or {}).get(k))
            report.first_difference = {"message": index, "fields": keys, "recorded": x, "replayed": y}
            break
    if domain.version_hash != info.domain_version:
        report.identical = False
        report.first_difference = report.first_difference or {
            "seq": None, "fields": ["domain_version"],
            "recorded": info.domain_version, "replayed": domain.version_hash}
    return report


# ----------------------------------------------------------------------------- erasure
def erasure_targets(store: Store, session: str, messages: Collection[int] | None = None,
                    field_name: str | None = None) -> list[tuple[str, int]]:
    """(kind, position) of everything an erasure removes in one session: the whole session, some
    messages with every edit they caused, or every edit of one field; plus each later edit whose
    `before` still carries an erased value (the next change of that field)."""
    msgs, edits = store.messages(session), store.edits(session)
    for n in messages or ():
        if not 0 <= n < len(msgs):
            raise Errors.ERASE(problem=f"session {session!r} has no message {n} (it has {len(msgs)}, "
                                       f"numbered 0 to {len(msgs) - 1})",
                               fix="pass a message index that `context-editor audit export --session …` lists")
    if field_name is not None and not any(e.field == field_name for e in edits):
        named = sorted({e.field for e in edits if e.field is not None})
        raise Errors.ERASE(problem=f"no edit of session {session!r} names field {field_name!r}",
                           fix=f"pass one of its fields: {', '.join(named) or '(it has none)'}")
    whole = messages is None and field_name is None
    chosen = set(messages or ())
    out = [("message", m.index) for m in msgs if whole or m.index in chosen]
    erased_values: dict[str | None, set[str]] = {}
    for e in edits:
        if e.op in KEEP_OPS:
            continue
        if whole or e.message_index in chosen or e.field == field_name:
            out += [("edit", e.seq)] + [("before", e.seq)] * (e.before is not None)
            erased_values.setdefault(e.field, set()).add(canonical_json(e.after))
        elif e.before is not None and canonical_json(e.before) in erased_values.get(e.field, set()):
            out.append(("before", e.seq))  # the next change names the erased value; its own value stays
    return out


def erase(store: Store, sessions: list[str], actor: str, reason: str, messages: Collection[int] | None = None,
          field_name: str | None = None, at: str | None = None) -> list[Tombstone]:
    """Remove the text and values (and their salts) of some messages, a field or whole sessions,
    keeping each row's commitment, so `verify` still passes; one tombstone per row, signed
    when the store has a key. Refused, before anything changes, for rows written before
    erasable payloads (schema 8): their hash covers the text itself."""
    tombstones, forget = erasure(store, sessions, actor, reason, messages, field_name, at)
    _apply(store, tombstones, [forget])
    return tombstones


def erasure(store: Store, sessions: list[str], actor: str, reason: str, messages: Collection[int] | None = None,
            field_name: str | None = None, at: str | None = None) -> tuple[list[Tombstone], Forget]:
    """What `erase` does, without doing it: the tombstones of every part still holding its text,
    and which user-memory events go."""
    if not actor.strip() or not reason.strip():
        raise Errors.ERASE(problem="an erasure needs an actor and a reason", fix="pass --actor and --reason")
    if messages is not None and field_name is not None:
        raise Errors.ERASE(problem="a message and a field name different things", fix="erase one at a time")
    when = at or datetime.now(timezone.utc).isoformat(timespec="seconds")
    tombstones = []
    for s in sessions:
        store.require_session(s)
        msg_rows, edit_rows = store.raw_rows(s)
        bodies = {("message", idx): body for idx, _, body, _ in msg_rows}
        bodies.update({("edit", seq): body for seq, _, _, body, _ in edit_rows})
        held = store.raw_payloads(s)
        for kind, pos in erasure_targets(store, s, messages, field_name):
            body = json.loads(bodies[("message" if kind == "message" else "edit", pos)])
            committed = body.get("before_commitment" if kind == "before" else "commitment")
            if committed is None:
                raise Errors.ERASE(problem=f"{kind} {pos} of session {s!r} was written before erasable payloads "
                                           "(its hash covers the text itself; erasing it would break the proof)",
                                   fix="nothing was changed; such rows go only with their whole store")
            if (kind, pos) in held:  # an already erased row keeps its first tombstone
                tombstones.append(Tombstone(s, kind, pos, committed, when, actor, reason))
    return tombstones, _forget(store, sessions, tombstones, whole=messages is None and field_name is None)


def _apply(store: Store, tombstones: list[Tombstone], forgets: list[Forget]) -> None:
    """One store transaction for any number of erasures (their memory tests joined per user)."""
    tests: dict[tuple[str, str], list[Callable[[dict[str, Any]], bool]]] = {}
    for forget in forgets:
        for owner, test in forget.items():
            tests.setdefault(owner, []).append(test)
    store.erase(tombstones, {owner: _any_of(ts) for owner, ts in tests.items()})


def _any_of(tests: list[Callable[[dict[str, Any]], bool]]) -> Callable[[dict[str, Any]], bool]:
    return lambda ev: any(t(ev) for t in tests)


def _forget(store: Store, sessions: list[str], tombstones: list[Tombstone], whole: bool) -> Forget:
    """What the users' memories lose with an erasure: every event of a wholly erased session, and
    every event (in any session of that user) that holds an erased value of its field."""
    values: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for s in sessions:
        owner = session_owner(s)
        if owner is None:
            continue
        gone = {t.pos for t in tombstones if t.session == s and t.kind == "edit"}
        found = values.setdefault(owner, set())
        found.update((e.field, canonical_json(e.after)) for e in store.edits(s) if e.seq in gone and e.field is not None)
    erased_sessions = set(sessions) if whole else set()

    def test_for(found: set[tuple[str, str]]) -> Callable[[dict[str, Any]], bool]:
        return lambda ev: ev.get("session") in erased_sessions or (ev.get("field"), canonical_json(ev.get("value"))) in found

    return {owner: test_for(found) for owner, found in values.items()}


@dataclass(frozen=True)
class RetentionStep:
    """What a retention policy takes from one session: its messages older than `days` days before
    `now` that still hold their text, and those too old but written before erasable payloads
    (kept: their hash covers the text)."""

    session: str
    domain: str
    days: int
    cutoff: str
    messages: tuple[int, ...]
    unerasable: tuple[int, ...] = ()
    tombstones: tuple[Tombstone, ...] = ()


def retention_plan(store: Store, now: datetime, domains: dict[str, Domain] | None = None,
                   allow_plugins: bool = False) -> list[RetentionStep]:
    """Every session with messages past its domain's `retention: {messages: Nd}`. The policy is
    the one of `domains[name]` when given (today's file: a policy applies to older data too),
    else that of the domain version the session runs under, as stored."""
    from .pipeline import stored_domain  # as in replay: imported when used

    policies: dict[str, int | None] = {}
    out = []
    for s in store.sessions():
        info = store.require_session(s)
        if domains is not None:
            if info.domain not in domains:
                continue
            days = domains[info.domain].retention_days.get("messages")
        else:
            if info.domain_version not in policies:
                policies[info.domain_version] = stored_domain(store, info, allow_plugins).retention_days.get("messages")
            days = policies[info.domain_version]
        if days is None:
            continue
        cutoff = now - timedelta(days=days)
        expired = [m for m in store.messages(s) if (t := m.time()) is not None and _utc(t) < cutoff]
        erasable = tuple(m.index for m in expired if m.salt is not None)  # (an erased one has no salt left)
        legacy = tuple(m.index for m in expired if m.salt is None and m.commitment is None)
        if erasable or legacy:
            out.append(RetentionStep(s, info.domain, days, cutoff.isoformat(timespec="seconds"), erasable, legacy))
    return out


def apply_retention(store: Store, now: datetime | None = None, domains: dict[str, Domain] | None = None,
                    actor: str = "retention", dry_run: bool = False, allow_plugins: bool = False) -> list[RetentionStep]:
    """Erase (as `erase` does: commitments and a signed tombstone per row stay) every message
    past its domain's retention period, with the edits it caused. `dry_run`: only the plan."""
    now = _utc(now or datetime.now(timezone.utc))
    plan = retention_plan(store, now, domains, allow_plugins)
    if dry_run:
        return plan
    # One store transaction for every session (the clean-up after it runs once). A tombstone
    # says when the erasure happened (the clock), whatever `now` ages were measured from.
    done, forgets = [], []
    for step in plan:
        tombstones: list[Tombstone] = []
        if step.messages:
            tombstones, forget = erasure(store, [step.session], actor,
                                         f"retention: messages {step.days}d (domain {step.domain})", step.messages)
            forgets.append(forget)
        done.append(replace(step, tombstones=tuple(tombstones)))
    _apply(store, [t for step in done for t in step.tombstones], forgets)
    return done


def _utc(t: datetime) -> datetime:
    """A time with its zone; one written without is taken as UTC."""
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def sessions_of_user(store: Store, user: str, tenant: str | None = None) -> list[str]:
    """The stored sessions keyed to `user` (`tenant/user/session`, or `user/session` without a
    tenant): one tenant's user is never another tenant's user of the same name."""
    return [s for s in store.sessions() if session_owner(s) == (tenant or "", user)]


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
