"""Ed25519 keys for signed session heads and checkpoints.

The private key never lives in the store: it is read from a file (`CONTEXT_EDITOR_SIGNING_KEY_FILE`
or `--key FILE`) or from `CONTEXT_EDITOR_SIGNING_KEY` (the 32-byte seed as 64 hex digits). A
signature is stored with the public key that made it, so a keyless `verify` can still tell a
corrupted signature from a good one; only a public key the verifier trusts (`--pubkey`) turns a
good signature into proof of who wrote the head.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .errors import Errors

KEY_ENV = "CONTEXT_EDITOR_SIGNING_KEY"
KEY_FILE_ENV = "CONTEXT_EDITOR_SIGNING_KEY_FILE"


def _hex32(text: str, what: str, origin: str) -> bytes:
    try:
        raw = bytes.fromhex(text.strip())
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise Errors.SIGNING_KEY(problem=f"{origin} does not hold an Ed25519 {what} (64 hex digits)")
    return raw


@dataclass(frozen=True)
class Signer:
    """Signs heads with one private key."""

    key: Ed25519PrivateKey

    @property
    def public_hex(self) -> str:
        return self.key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()

    def sign(self, data: str) -> str:
        """The signature column: the public key and the signature of `data`, as canonical JSON."""
        sig = self.key.sign(data.encode("utf-8")).hex()
        return json.dumps({"key": self.public_hex, "sig": sig}, sort_keys=True, separators=(",", ":"))

    @classmethod
    def generate(cls) -> Signer:
        return cls(Ed25519PrivateKey.generate())

    def private_hex(self) -> str:
        return self.key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                      serialization.NoEncryption()).hex()

    @cached_property
    def seal_key(self) -> bytes:
        """The secret that keys the seals of derived rows (`store.base.sealed`): derived from the
        private key, so only a holder of it can seal a snapshot or summary row a reopen will take
        (an unkeyed digest can be recomputed by anyone who can write the store)."""
        return hmac.new(bytes.fromhex(self.private_hex()), b"context-editor derived-row seal", hashlib.sha256).digest()

    @classmethod
    def from_hex(cls, text: str, origin: str = "the key") -> Signer:
        return cls(Ed25519PrivateKey.from_private_bytes(_hex32(text, "private key", origin)))

    @classmethod
    def from_file(cls, path: str | Path) -> Signer:
        try:
            text = Path(path).read_text("utf-8")
        except OSError as exc:
            raise Errors.SIGNING_KEY(problem=f"cannot read signing key {path}: {exc.strerror}") from None
        return cls.from_hex(text, str(path))

    @classmethod
    def from_env(cls) -> Signer | None:
        """The key the environment names, or None (heads are then hashed but not signed)."""
        if os.environ.get(KEY_FILE_ENV):
            return cls.from_file(os.environ[KEY_FILE_ENV])
        if os.environ.get(KEY_ENV):
            return cls.from_hex(os.environ[KEY_ENV], f"${KEY_ENV}")
        return None


def public_key_from(text_or_path: str) -> str:
    """A trusted public key given as 64 hex digits or as a file holding them; returns the hex."""
    path = Path(text_or_path)
    text = path.read_text("utf-8") if len(text_or_path) != 64 and path.is_file() else text_or_path
    return _hex32(text, "public key", text_or_path if text is not text_or_path else "--pubkey").hex()


def check_signature(signature: str | None, data: str, trusted: str | None = None) -> str | None:
    """Why `signature` (a signature column) does not sign `data`, or None if it does.

    With `trusted` (a public key in hex) the signature must also be made by that key."""
    if signature is None:
        return "it is not signed" if trusted else None
    try:
        doc = json.loads(signature)
        if json.dumps(doc, sort_keys=True, separators=(",", ":")) != signature:
            return "its signature column was rewritten (not the form it is written in)"
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(doc["key"]))
        key.verify(bytes.fromhex(doc["sig"]), data.encode("utf-8"))
    except (ValueError, KeyError, TypeError, binascii.Error, InvalidSignature):
        return "its signature is not valid"
    if trusted is not None and doc["key"] != trusted:
        return f"it is signed by key {doc['key'][:16]}…, not by the trusted key {trusted[:16]}…"
    return None
