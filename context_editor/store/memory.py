"""In-memory store: the same contract as the databases, for one-shot runs and tests."""

from __future__ import annotations

import copy
from bisect import bisect_left
from typing import Any

from ..model import GENESIS_HASH, Edit, Message, canonical_json
from .base import SessionInfo, Store, check_batch


class MemoryStore(Store):
    url = "memory://"

    def __init__(self) -> None:
        self._domains: dict[str, tuple[str, dict[str, Any]]] = {}
        self._sessions: dict[str, tuple[str, str]] = {}
        self._messages: dict[str, list[Message]] = {}
        self._edits: dict[str, list[Edit]] = {}
        self._derived: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}

    def put_domain(self, version_hash: str, name: str, source: dict[str, Any]) -> None:
        self._domains.setdefault(version_hash, (name, copy.deepcopy(source)))

    def get_domain(self, version_hash: str) -> dict[str, Any] | None:
        entry = self._domains.get(version_hash)
        return copy.deepcopy(entry[1]) if entry else None

    def session(self, session: str) -> SessionInfo | None:
        if session not in self._sessions:
            return None
        name, version = self._sessions[session]
        return SessionInfo(session, name, version, len(self._messages[session]), len(self._edits[session]))

    def append(self, domain: str, domain_version: str, message: Message, edits: list[Edit]) -> None:
        msgs = self._messages.get(message.session, [])
        log = self._edits.get(message.session, [])
        check_batch(message, edits, len(msgs), len(log), log[-1].hash if log else GENESIS_HASH)
        # All checks are done; nothing below can fail, so the append is all-or-nothing.
        self._messages.setdefault(message.session, msgs).append(message)
        self._edits.setdefault(message.session, log).extend(edits)
        self._sessions[message.session] = (domain, domain_version)

    def messages(self, session: str, since_round: int | None = None) -> list[Message]:
        msgs = self._messages.get(session, [])
        start = 0 if since_round is None else bisect_left(msgs, since_round, key=lambda m: m.round)
        return msgs[start:]

    def edits(self, session: str) -> list[Edit]:
        return list(self._edits.get(session, []))

    def sessions(self) -> list[str]:
        return sorted(self._sessions)

    def raw_rows(self, session: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        msgs = [(m.index, canonical_json(m.body()), m.hash) for m in self._messages.get(session, [])]
        edits = [(e.seq, e.round, e.message_index, canonical_json(e.body()), e.hash) for e in self._edits.get(session, [])]
        return msgs, edits

    def put_derived(self, session: str, kind: str, key: int, body: dict[str, Any]) -> None:
        self._derived.setdefault((session, kind), {})[key] = copy.deepcopy(body)

    def derived(self, session: str, kind: str) -> dict[int, dict[str, Any]]:
        items = self._derived.get((session, kind), {})
        return {k: copy.deepcopy(items[k]) for k in sorted(items)}

    def drop_derived(self, session: str, kind: str) -> None:
        self._derived.pop((session, kind), None)
