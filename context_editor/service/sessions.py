"""The service's editors over one store: one ContextEditor per domain version, shared by all
tenants, and the mapping from a tenant's session id to the store key.

A session id in a URL is always read as `tenant/-/session` with the tenant of the caller's key
(`tenant/user/session` with `?user=` or a body's `user`: whose cross-session memory it uses), so
one tenant can never name another's session: it simply does not exist for them (404).
Work on one session is serialised in this process by a striped lock (the cached state is
mutable); other processes over the same store are handled by the editor's head check and retry.
"""

from __future__ import annotations

import threading
import zlib

from ..domain import load_domain
from ..resources import domains_dir
from ..errors import DomainError, Errors
from ..model import session_key
from ..pipeline import ContextEditor, stored_domain
from ..store import SessionInfo, Store

LOCK_STRIPES = 64


def bundled_domains() -> list[str]:
    return sorted(p.stem for p in domains_dir().glob("*.yaml"))


class Sessions:
    def __init__(self, store: Store, cache_sessions: int = 1024):
        self.store, self.cache_sessions = store, cache_sessions
        self._editors: dict[str, ContextEditor] = {}  # by domain version hash
        self._bundled: dict[str, str] = {}  # bundled domain name -> its version hash
        self._lock = threading.Lock()
        self._stripes = [threading.Lock() for _ in range(LOCK_STRIPES)]

    @staticmethod
    def key(tenant: str, session: str, user: str | None = None) -> str:
        """`tenant/user/session` (`tenant/-/session` without a user): the user's memory is keyed by both."""
        return session_key(session, tenant=tenant, user=user)

    @staticmethod
    def external(tenant: str, key: str) -> tuple[str, str | None] | None:
        """The tenant's own (session id, user or None) of a store key, or None if the key is not theirs."""
        parts = key.split("/")
        if len(parts) != 3 or parts[0] != tenant:
            return None
        return parts[2], (None if parts[1] == "-" else parts[1])

    def lock(self, key: str) -> threading.Lock:
        return self._stripes[zlib.crc32(key.encode("utf-8")) % LOCK_STRIPES]

    def tenant_sessions(self, tenant: str) -> list[tuple[str, str | None]]:
        """(session id, user) of every session of the tenant."""
        return [s for s in (self.external(tenant, k) for k in self.store.sessions()) if s is not None]

    def info(self, tenant: str, session: str, user: str | None = None) -> SessionInfo:
        info = self.store.session(self.key(tenant, session, user))
        if info is None:
            known = ", ".join(s if u is None else f"{s} (user {u})" for s, u in self.tenant_sessions(tenant)[:10])
            raise Errors.NO_SESSION(session=session, store="this tenant's sessions", known=known or "none yet")
        return info

    def editor_of(self, info: SessionInfo) -> ContextEditor:
        """The editor of an existing session, with the domain version it was processed with."""
        with self._lock:
            editor = self._editors.get(info.domain_version)
            if editor is None:
                editor = self._editors[info.domain_version] = ContextEditor(
                    stored_domain(self.store, info), self.store, cache_sessions=self.cache_sessions)
            return editor

    def forget(self, key: str) -> None:
        """Drop a session from every editor's cache (after an erasure)."""
        with self._lock:
            editors = list(self._editors.values())
        for editor in editors:
            editor.forget(key)

    def editor_for_write(self, tenant: str, session: str, domain: str, user: str | None = None) -> ContextEditor:
        """The editor to add messages with: the session's own domain version, or the bundled
        `domain` for a new session."""
        info = self.store.session(self.key(tenant, session, user))
        if info is not None:
            if info.domain != domain:
                raise Errors.SESSION_OTHER_DOMAIN(session=session, stored=info.domain, domain=domain)
            return self.editor_of(info)
        with self._lock:
            version = self._bundled.get(domain)
            if version is None:
                loaded = load_domain(self._bundled_name(domain))
                version = self._bundled[domain] = loaded.version_hash
                self._editors.setdefault(version, ContextEditor(loaded, self.store, cache_sessions=self.cache_sessions))
            return self._editors[version]

    @staticmethod
    def _bundled_name(domain: str) -> str:
        """Only bundled domains by name: a client must never make the server open a path."""
        if domain in bundled_domains():
            return domain
        problem = Errors.NO_DOMAIN.problem(line=None, domain=domain, names=", ".join(bundled_domains()))
        raise DomainError([problem], None)
