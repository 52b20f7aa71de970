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

from ..errors import ContextEditorError
from ..model import session_key
from ..store import KeyRecord, Store

ROLES = ("writer", "reader", "auditor")
# What each role may do. Every role reads its tenant's sessions; only writers add messages;
# auditors (and writers, who own the data) verify and export.
PERMISSIONS = {"writer": {"read", "write", "audit"}, "reader": {"read"}, "auditor": {"read", "audit"}}
PREFIX = "ce_"


class AuthError(ContextEditorError):
    """No key, an unknown key or a revoked key (HTTP 401)."""

    code = "CE801"


class ForbiddenError(ContextEditorError):
    """The key's role does not allow this (HTTP 403)."""

    code = "CE802"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the tenant and role of a valid key."""

    key_id: str
    tenant: str
    role: str

    def require(self, permission: str) -> None:
        if permission not in PERMISSIONS[self.role]:
            allowed = ", ".join(r for r in ROLES if permission in PERMISSIONS[r])
            raise ForbiddenError(f"key {self.key_id} has role {self.role!r}, which may not {permission}",
                                 fix=f"use a key with role {allowed} (context-editor keys create --tenant T --role ...)")


def hash_secret(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def create_key(store: Store, tenant: str, role: str = "writer") -> tuple[str, KeyRecord]:
    """A new key for `tenant`: (the key, shown once; the stored record)."""
    if role not in ROLES:
        raise ContextEditorError(f"unknown role {role!r}", code="CE803", fix=f"use one of: {', '.join(ROLES)}")
    session_key("s", tenant=tenant)  # the tenant must be a valid session-key part (no '/')
    key_id = secrets.token_hex(6)
    key = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    record = KeyRecord(key_id, hash_secret(key), tenant, role, datetime.now(timezone.utc).isoformat(timespec="seconds"))
    store.put_key(record)
    return key, record


def authenticate(store: Store, key: str | None) -> Principal:
    """The principal of a presented key; AuthError if it is missing, unknown or revoked."""
    fix = "send `Authorization: Bearer KEY` with a key from `context-editor keys create --tenant T`"
    if not key:
        raise AuthError("no API key", fix=fix)
    record = store.get_key(hash_secret(key))
    if record is None:
        raise AuthError("unknown API key", fix=fix)
    if record.revoked:
        raise AuthError(f"key {record.key_id} was revoked at {record.revoked}", fix="create a new key")
    return Principal(record.key_id, record.tenant, record.role)


def revoke_key(store: Store, key_id: str) -> None:
    if not store.revoke_key(key_id, datetime.now(timezone.utc).isoformat(timespec="seconds")):
        known = ", ".join(k.key_id for k in store.keys() if not k.revoked) or "none"
        raise ContextEditorError(f"no active key {key_id!r}", code="CE804",
                                 fix=f"pass the key id printed by `keys create` (active: {known})")
