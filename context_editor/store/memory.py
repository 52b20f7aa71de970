"""In-memory store: the same contract as the databases, for one-shot runs and tests."""

from __future__ import annotations

import copy
import threading
from bisect import bisect_left, bisect_right
from dataclasses import replace
from typing import Any

from ..model import ERASED, GENESIS_HASH, Edit, Message, SearchDoc, SearchFilter
from .base import (KeyRecord, SessionInfo, Store, StoredSession, TermIndex, Forget, Tombstone, Usage, check_batch, check_records,
                   derived_text, domain_text, new_head, parse_domain_row, records_head)


class MemoryStore(Store):
    url = "memory://"

    def __init__(self) -> None:
        self._domains: dict[str, tuple[str, str, str]] = {}  # version -> (name, text, sha256), as SQL stores them
        self._sessions: dict[str, tuple[str, str, str, str | None]] = {}  # -> (domain, version, head, signature)
        self._messages: dict[str, list[Message]] = {}
        self._edits: dict[str, list[Edit]] = {}
        self._keys: dict[str, KeyRecord] = {}
        self._lock = threading.Lock()  # the service appends from several threads
        self._derived: dict[tuple[str, str], dict[int, bytes]] = {}  # rows as their text's bytes (`derived_text`), as SQL stores them
        self._user_memory: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._usage: dict[str, Usage] = {}
        self._writes = 0  # appends, records appends and erasures so far (`data_version`)
        self._search: dict[str, TermIndex] = {}
        self._erasures: dict[str, dict[tuple[str, int], tuple[str, str | None]]] = {}

    def put_domain(self, version_hash: str, name: str, source: dict[str, Any]) -> None:
        self._domains.setdefault(version_hash, (name, *domain_text(source)))

    def get_domain(self, version_hash: str) -> dict[str, Any] | None:
        entry = self._domains.get(version_hash)
        return parse_domain_row(version_hash, entry[1:] if entry else None)

    def session(self, session: str) -> SessionInfo | None:
        if session not in self._sessions:
            return None
        name, version, _, _ = self._sessions[session]
        return SessionInfo(session, name, version, len(self._messages[session]), len(self._edits[session]),
                           len(self._erasures.get(session, {})))

    def data_version(self) -> tuple[int, ...] | None:
        return (self._writes,)

    def after_own_write(self, mark: tuple[int, ...]) -> tuple[int, ...] | None:
        return (mark[0] + 1,)

    def append(self, domain: str, domain_version: str, message: Message, edits: list[Edit]) -> None:
        with self._lock:
            self._writes += 1
            msgs = self._messages.get(message.session, [])
            log = self._edits.get(message.session, [])
            last_edit = log[-1].hash if log else GENESIS_HASH
            check_batch(message, edits, len(msgs), len(log), last_edit, msgs[-1].hash if msgs else GENESIS_HASH)
            stored = self._domains.get(domain_version)
            head = new_head(domain, domain_version, stored[2] if stored else None, message, edits, len(msgs), len(log),
                            last_edit)
            columns = self.sign(head)
            # All checks are done; nothing below can fail, so the append is all-or-nothing.
            self._messages.setdefault(message.session, msgs).append(message)
            self._edits.setdefault(message.session, log).extend(edits)
            self._sessions[message.session] = (domain, domain_version, *columns)

    def append_records(self, session: str, edits: list[Edit]) -> None:
        with self._lock:
            self._writes += 1
            msgs = self._messages.get(session, [])
            log = self._edits.get(session, [])
            check_records(session, edits, len(msgs), len(log), log[-1].hash if log else GENESIS_HASH)
            if not edits:
                return
            name, version, _, _ = self._sessions[session]
            stored = self._domains.get(version)
            info = SessionInfo(session, name, version, len(msgs), len(log))
            columns = self.sign(records_head(info, stored[2] if stored else None, msgs[-1].hash, edits))
            log.extend(edits)
            self._sessions[session] = (name, version, *columns)

    def messages(self, session: str, since_round: int | None = None) -> list[Message]:
        msgs = self._messages.get(session, [])
        start = 0 if since_round is None else bisect_left(msgs, since_round, key=lambda m: m.round)
        return msgs[start:]

    def edits(self, session: str, since_seq: int | None = None) -> list[Edit]:
        log = self._edits.get(session, [])
        return log[bisect_right(log, since_seq, key=lambda e: e.seq):] if since_seq is not None else list(log)

    def known_message_ids(self, session: str, ids: list[str]) -> set[str]:
        wanted = set(ids)
        return {m.id for m in self._messages.get(session, []) if m.id in wanted}

    def put_key(self, key: KeyRecord) -> None:
        with self._lock:
            self._keys[key.key_id] = key

    def get_key(self, key_hash: str) -> KeyRecord | None:
        return next((k for k in self._keys.values() if k.key_hash == key_hash), None)

    def keys(self) -> list[KeyRecord]:
        return [self._keys[k] for k in sorted(self._keys)]

    def revoke_key(self, key_id: str, when: str) -> bool:
        with self._lock:
            key = self._keys.get(key_id)
            if key is None or key.revoked:
                return False
            self._keys[key_id] = replace(key, revoked=when)
            return True

    def sessions(self) -> list[str]:
        return sorted(self._sessions)

    def session_keys(self, after: str | None = None, upto: str | None = None, limit: int | None = None) -> list[str]:
        keys = sorted(self._sessions)
        chosen = keys[bisect_right(keys, after) if after is not None else 0:
                      bisect_right(keys, upto) if upto is not None else None]
        return chosen[:limit] if limit is not None else chosen

    def read_sessions(self, keys: list[str]) -> list[StoredSession]:
        return [StoredSession(info, tuple(self._messages[k]), tuple(self._edits[k]))
                for k in keys if (info := self.session(k)) is not None]

    def raw_rows(self, session: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        msgs = [(m.index, m.round, m.body_text(), m.hash) for m in self._messages.get(session, [])]
        edits = [(e.seq, e.round, e.message_index, e.body_text(), e.hash) for e in self._edits.get(session, [])]
        return msgs, edits

    def raw_payloads(self, session: str) -> dict[tuple[str, int], tuple[Any, Any]]:
        out: dict[tuple[str, int], tuple[Any, Any]] = {
            ("message", m.index): (m.salt, m.payload_text()) for m in self._messages.get(session, []) if m.salt}
        for e in self._edits.get(session, []):
            if e.salt:
                out[("edit", e.seq)] = (e.salt, e.payload_text())
            if e.before_salt:
                out[("before", e.seq)] = (e.before_salt, e.before_text())
        return out

    def erasures(self, session: str) -> list[tuple[str, int, str, str | None]]:
        found = self._erasures.get(session, {})
        return [(*k, *found[k]) for k in sorted(found)]

    def erase(self, tombstones: list[Tombstone], forget: Forget | None = None) -> None:
        with self._lock:
            self._writes += 1
            for t in tombstones:
                if t.kind == "message":
                    m = self._messages[t.session][t.pos]
                    self._messages[t.session][t.pos] = replace(m, content=ERASED, tool_calls=(), salt=None,
                                                               commitment=m.body()["commitment"])
                else:
                    i = next(i for i, e in enumerate(self._edits[t.session]) if e.seq == t.pos)
                    e = self._edits[t.session][i]
                    if t.kind == "before":
                        self._edits[t.session][i] = replace(e, before=ERASED, before_salt=None,
                                                            before_commitment=e.body()["before_commitment"])
                    else:
                        prov = replace(e.provenance, text=ERASED) if e.provenance else None
                        self._edits[t.session][i] = replace(e, after=ERASED, provenance=prov, salt=None,
                                                            commitment=e.body()["commitment"])
                self._erasures.setdefault(t.session, {})[(t.kind, t.pos)] = (
                    t.text(), self.signer.sign(t.text()) if self.signer else None)
            for session in {t.session for t in tombstones}:
                for key in [k for k in self._derived if k[0] == session]:
                    del self._derived[key]
                self._search.pop(session, None)
            for owner, test in (forget or {}).items():
                if owner in self._user_memory:
                    self._user_memory[owner] = [ev for ev in self._user_memory[owner] if not test(ev)]

    def raw_sessions(self, after: str | None = None, upto: str | None = None) -> dict[str, tuple[Any, ...] | None]:
        chosen = self._sessions if after is None and upto is None else set(self.session_keys(after, upto))
        return {s: (d, v, len(self._messages[s]), len(self._edits[s]), head, sig)
                for s, (d, v, head, sig) in self._sessions.items() if s in chosen}

    def raw_domains(self) -> dict[str, tuple[Any, ...]]:
        return dict(self._domains)

    def put_derived(self, session: str, kind: str, key: int, body: dict[str, Any]) -> None:
        self._derived.setdefault((session, kind), {})[key] = derived_text(body).encode("utf-8", "surrogatepass")

    def add_usage(self, session: str, usage: Usage) -> None:
        with self._lock:
            self._usage[session] = self.usage(session).plus(usage)

    def usage(self, session: str) -> Usage:
        return self._usage.get(session, Usage())

    def raw_derived(self, session: str, kind: str, keys: tuple[int, int] | None = None) -> dict[int, bytes]:
        items = self._derived.get((session, kind), {})
        lo, hi = keys if keys is not None else (-2**63, 2**63 - 1)
        return {k: items[k] for k in sorted(items) if lo <= k <= hi}

    def append_user_memory(self, tenant: str, user: str, events: list[dict[str, Any]]) -> None:
        with self._lock:
            self._user_memory.setdefault((tenant, user), []).extend(copy.deepcopy(events))

    def user_memory(self, tenant: str, user: str) -> list[dict[str, Any]]:
        return copy.deepcopy(self._user_memory.get((tenant, user), []))

    def replace_user_memory(self, tenant: str, user: str, events: list[dict[str, Any]]) -> None:
        with self._lock:
            self._user_memory[(tenant, user)] = copy.deepcopy(events)

    def drop_derived(self, session: str, kind: str) -> None:
        self._derived.pop((session, kind), None)

    def index_search(self, session: str, docs: list[SearchDoc]) -> None:
        with self._lock:
            index = self._search.setdefault(session, TermIndex())
            for doc in docs:
                index.add(doc)

    def search(self, session: str, terms: list[str], where: SearchFilter, limit: int) -> list[tuple[int, float]]:
        with self._lock:
            index = self._search.get(session)
            return index.search(terms, where, limit) if index else []

    def search_indexed(self, session: str) -> int:
        index = self._search.get(session)
        return max(index.docs, default=-1) if index else -1

    def drop_search(self, session: str) -> None:
        with self._lock:
            self._search.pop(session, None)

    def messages_at(self, session: str, indexes: list[int]) -> list[Message]:
        msgs = self._messages.get(session, [])
        return [msgs[i] for i in sorted(set(indexes)) if 0 <= i < len(msgs)]
