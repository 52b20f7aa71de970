"""API keys: tenants and roles for the service. A key is shown once; the store keeps its SHA-256.

A key looks like `ce_<key id>_<secret>`. The key id is public (listed, used to revoke); the
secret is 32 random bytes, so a plain SHA-256 is enough to store it (nothing to brute-force,
unlike a password). The tenant and role of a request come from the key record and nowhere else.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone

from ..errors import Errors
from ..model import session_key
from ..store import KeyRecord, Store

ROLES = ("writer", "reader", "auditor")
# What each role may do. Every role reads its tenant's sessions; only writers add messages;
# auditors (and writers, who own the data) verify and export.
PERMISSIONS = {"writer": {"read", "write", "audit"}, "reader": {"read"}, "auditor": {"read", "audit"}}
PREFIX = "ce_"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the tenant and role of a valid key."""

    key_id: str
    tenant: str
    role: str

    def require(self, permission: str) -> None:
        if permission not in PERMISSIONS[self.role]:
            allowed = ", ".join(r for r in ROLES if permission in PERMISSIONS[r])
            raise Errors.ROLE_FORBIDDEN(key_id=self.key_id, role=self.role, permission=permission, allowed=allowed)


def hash_secret(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def create_key(store: Store, tenant: str, role: str = "writer") -> tuple[str, KeyRecord]:
    """A new key for `tenant`: (the key, shown once; the stored record)."""
    if role not in ROLES:
        raise Errors.BAD_KEY_REQUEST(problem=f"unknown role {role!r}", fix=f"use one of: {', '.join(ROLES)}")
    session_key("s", tenant=tenant)  # the tenant must be a valid session-key part (no '/')
    key_id = secrets.token_hex(6)
    key = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    record = KeyRecord(key_id, hash_secret(key), tenant, role, datetime.now(timezone.utc).isoformat(timespec="seconds"))
    store.put_key(record)
    return key, record


def authenticate(store: Store, key: str | None) -> Principal:
    """The principal of a presented key; AuthError if it is missing, unknown or revoked."""
    if not key:
        raise Errors.NO_KEY(problem="no API key")
    record = store.get_key(hash_secret(key))
    if record is None:
        raise Errors.NO_KEY(problem="unknown API key")
    if record.revoked:
        raise Errors.KEY_REVOKED(key_id=record.key_id, when=record.revoked)
    return Principal(record.key_id, record.tenant, record.role)


def revoke_key(store: Store, key_id: str) -> None:
    if not store.revoke_key(key_id, datetime.now(timezone.utc).isoformat(timespec="seconds")):
        known = ", ".join(k.key_id for k in store.keys() if not k.revoked) or "none"
        raise Errors.NO_ACTIVE_KEY(key_id=key_id, known=known)
