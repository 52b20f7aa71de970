"""The event-sourced data model shared by every stage.

Messages are the raw, never-deleted input; Extract turns them into Candidates; Transform and
Validate turn candidates into Edits; State is nothing but a fold of the edit log. Keeping these
types plain (frozen dataclasses, JSON-friendly values) is what makes the log hashable, storable
in any backend and replayable byte for byte.
"""

from __future__ import annotations

import base64
import hashlib
from array import array
import json
import math
import re
import dataclasses
import os
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Iterator, Literal, TypeVar

from .errors import Errors

Role = Literal["user", "assistant", "tool", "system"]
ROLES: tuple[str, ...] = ("user", "assistant", "tool", "system")

# Operations of the edit log. `set`/`clear`/`expire` change a field; `reject` records a candidate
# that validation refused (the accepted value stays); `transition` moves the machine's phase;
# `alert` raises a business-rule or guard failure so the model can be told about it.
# `resolve` closes an open alert (a guard that failed now held); `upgrade` moves the session to
# a new version of its domain (before: the old version hash, after: the new one).
# `llm` records a model's answer used by a render (after: kind, model, prompt hash, result or the
# failure that sent it to the rules): it changes no field, it makes the render reproducible.
Op = Literal["set", "clear", "expire", "reject", "transition", "alert", "resolve", "upgrade", "llm"]
# Where a change came from. `initial` is a first value, `correction` replaces it, `reversion`
# returns to a value the field held before, `machine` is a state-machine effect, `tool` a tool
# result, `expiry` a TTL; `proposal` is an assistant's suggestion for a user-owned field (logged
# as rejected) and `confirmation` the user's "yes" that turns it into a value.
# `answer` is a value read from the user's reply to the assistant's question about that field;
# `carry` a value carried over from another domain of the same conversation (see group.py);
# `llm` a model's answer recorded by a render; `user_memory` a value the same user gave in an
# earlier session (a `scope: user` field, see memory/user.py).
Source = Literal["initial", "correction", "reversion", "machine", "tool", "expiry", "proposal", "confirmation",
                 "answer", "carry", "llm", "user_memory"]

# The value of a field the user has no preference about ("any date will do", "I don't care about the
# price", "价格无所谓", "随便" to the field's question): any value of the field's type is fine. It is
# a value like any other (present, rendered as "any", replaced by the next value the user states),
# which a field of every type can hold, and not one a user could say by accident, so a dict that
# no other value uses. Business rules reading the field skip it: there is nothing to check.
NO_PREFERENCE: dict[str, Any] = {"any": True}


def is_no_preference(value: Any) -> bool:
    return isinstance(value, dict) and value == NO_PREFERENCE


GENESIS_HASH = "0" * 64
# What an erased message's text or an erased value reads as (`context-editor erase`): the row keeps
# its commitment, so the chain still verifies, but the text and the salt are gone.
ERASED = "[erased]"


def commitment(salt: str, payload: dict[str, Any]) -> str:
    """The salted hash a row's hash covers instead of its erasable payload (text, values). The
    salt is random and stored beside the payload; erasing both leaves a hash that cannot be
    reversed by trying likely values (a phone number, "yes")."""
    return committed(salt, canonical_json(payload))


def committed(salt: str, payload_text: str) -> str:
    """`commitment` of a payload already serialised (canonical JSON, as stored)."""
    return hashlib.sha256((salt + payload_text).encode("utf-8", "surrogatepass")).hexdigest()


def new_salt() -> str:
    return os.urandom(16).hex()  # what secrets.token_hex(16) returns, without its three calls per salt


_KEY_PART = re.compile(r"[^/\x00-\x1f\ud800-\udfff]{1,200}")


def session_key(session: str, tenant: str | None = None, user: str | None = None) -> str:
    """The store key of a session: `tenant/user/session` when a tenant or user is given.

    Every read and write is by this exact key, so two tenants' "s1" never meet. Parts may not
    contain '/' (it would let one tenant's key reach into another's)."""
    parts = [p for p in (tenant, user) if p is not None] + [session]
    for part in parts:
        if not _KEY_PART.fullmatch(part):
            raise Errors.BAD_SESSION_KEY(part=part)
    if tenant is not None and user is None:
        parts.insert(1, "-")
    return "/".join(parts)


def session_owner(key: str) -> tuple[str, str] | None:
    """(tenant, user) of a store key built by `session_key` with a user ("" for no tenant), or
    None when the session has no user (`s`, `tenant/-/s`): whose cross-session memory it uses."""
    parts = key.split("/")
    if len(parts) == 3 and parts[1] != "-":
        return parts[0], parts[1]
    if len(parts) == 2:
        return "", parts[0]
    return None


# What json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False) builds at every
# call, built once (the encoder keeps only its settings: safe to share between threads).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
# The C encoder `_CANONICAL.encode` makes anew at each call, made once: the same bytes (it is the
# encoder that call uses), without building it and its circular-reference table every time. It
# keeps no table (markers None: shared by threads, nothing left over after an error); a value
# that contains itself raises RecursionError rather than ValueError, and none reaches here
# (`conversation.check_value` refuses input nested deeper than 64 levels).
_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODE = (_make_encoder(None, _CANONICAL.default, json.encoder.encode_basestring, None, ":", ",", True, False, True)
             if _make_encoder is not None else None)


def canonical_json(obj: Any) -> str:
    """One serialisation for hashing and storage: sorted keys, no whitespace, UTF-8 kept."""
    return "".join(_C_ENCODE(obj, 0)) if _C_ENCODE is not None else _CANONICAL.encode(obj)


_STRING = json.encoder.encode_basestring  # the string encoder canonical_json's C encoder uses (ensure_ascii=False)


def canonical_part(value: Any) -> str:
    """canonical_json(value), with the scalars every record holds written without the encoder's
    set-up: a str as the encoder quotes it, an int or a finite float as its repr, None as null
    (the same bytes). For records written out key by key (`Message._seal`, `Edit.sealed`)."""
    kind = type(value)
    if kind is str:
        return _STRING(value)
    if value is None:
        return "null"
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    return canonical_json(value)


_j = canonical_part  # short, inside the written-out records below

_R = TypeVar("_R", "Message", "Edit")


def _fresh_copy(record: _R, **changes: Any) -> _R:
    """What `dataclasses.replace(record, **changes)` makes of a Message or an Edit (its kept
    serialisations, the init=False fields, left empty), set slot by slot instead of through the
    generated __init__ again: a sealing copy is made for every message and edit ingested."""
    cls = type(record)
    new = object.__new__(cls)
    copied, kept = _SLOTS[cls]
    for name in copied:
        object.__setattr__(new, name, changes[name] if name in changes else getattr(record, name))
    for name in kept:
        object.__setattr__(new, name, "")
    return new


@dataclass(frozen=True, slots=True)
class Message:
    """One raw message. `index` orders messages in a session; `round` counts user turns."""

    session: str
    index: int
    round: int
    role: Role
    content: str
    timestamp: str | None = None  # ISO 8601, as given by the caller
    id: str | None = None
    name: str | None = None  # tool name for tool messages
    tool_call_id: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    prev_hash: str = GENESIS_HASH  # raw messages form their own hash chain, so they are tamper-evident too
    hash: str = ""
    asks: tuple[str, ...] = ()  # app metadata of an assistant message: the fields it asks for
    # App metadata: the domains of a conversation this message speaks for (empty: all of them).
    # A domain not named keeps the message in its history but reads no value from it.
    domains: tuple[str, ...] = ()
    # Erasable messages (written since schema 8): the hash covers commitment(salt, payload), not
    # the text; an erased message has no salt left and keeps only `commitment`.
    salt: str | None = None
    commitment: str | None = None
    # The canonical JSON of body() as sealed: hashed once and stored as is (one serialisation per
    # body), and likewise of payload(). Not fields of the record: `replace` drops them, so a
    # changed copy is serialised anew.
    _text: str = field(default="", init=False, repr=False, compare=False)
    _payload: str = field(default="", init=False, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The message as read (its text in place, ERASED once erased) with its hash."""
        d = self.plain()
        d["hash"] = self.hash
        return d

    def payload(self) -> dict[str, Any]:
        """What erasure removes: the text and the tool calls (their arguments are text too)."""
        return {"content": self.content, "tool_calls": list(self.tool_calls)}

    @property
    def erased(self) -> bool:
        return self.commitment is not None and self.salt is None

    def body(self) -> dict[str, Any]:
        """Everything the hash covers (all but the hash itself); for an erasable message, the
        commitment to its payload in place of the payload."""
        d = self.plain()
        if self.salt is not None or self.commitment is not None:
            d.update(content="", tool_calls=[],
                     commitment=committed(self.salt, self.payload_text()) if self.salt is not None else self.commitment)
        return d

    def payload_text(self) -> str:
        """The canonical JSON of payload(): what the commitment covers and the store keeps."""
        return self._payload or canonical_json(self.payload())

    def plain(self) -> dict[str, Any]:
        """The message's fields without its hash, text in place. Built field by field: no deep
        copy (the tool calls are shared, never modified)."""
        d: dict[str, Any] = {
            "session": self.session, "index": self.index, "round": self.round, "role": self.role,
            "content": self.content, "timestamp": self.timestamp, "id": self.id, "name": self.name,
            "tool_call_id": self.tool_call_id, "tool_calls": list(self.tool_calls), "prev_hash": self.prev_hash,
        }
        if self.asks:  # absent when empty, so messages stored before it existed hash the same
            d["asks"] = list(self.asks)
        if self.domains:  # likewise
            d["domains"] = list(self.domains)
        return d

    def body_text(self) -> str:
        """The canonical JSON of body(): what is hashed and stored."""
        return self._text or canonical_json(self.body())

    def compute_hash(self) -> str:
        return hashlib.sha256(canonical_json(self.body()).encode("utf-8")).hexdigest()

    def sealed(self, prev_hash: str, salt: str | None = None) -> Message:
        """Placed after `prev_hash` with `salt` (default: fresh random bits): its text is committed,
        hence erasable."""
        return _fresh_copy(self, prev_hash=prev_hash, hash="", salt=salt or new_salt(), commitment=None)._seal()

    @classmethod
    def new(cls, prev_hash: str, salt: str | None = None, **fields: Any) -> Message:
        """A new message sealed after `prev_hash` (as `Message(**fields).sealed(prev_hash, salt)`,
        built once)."""
        return cls(**fields, prev_hash=prev_hash, salt=salt or new_salt())._seal()

    def _seal(self) -> Message:
        """Fill in the kept serialisations and the hash of a message just made (not yet shared)."""
        assert self.salt is not None  # both callers give it one
        # canonical_json(payload()) and canonical_json(body()), written out
        payload = f'{{"content":{_j(self.content)},"tool_calls":{canonical_json(list(self.tool_calls)) if self.tool_calls else "[]"}}}'
        object.__setattr__(self, "_payload", payload)
        text = self._committed_text(committed(self.salt, payload))
        object.__setattr__(self, "hash", hashlib.sha256(text.encode("utf-8")).hexdigest())
        object.__setattr__(self, "_text", text)
        return self

    def _committed_text(self, commitment: str) -> str:
        """canonical_json(body()) of an erasable message, its keys in sorted order, without the
        dicts (`test_a_sealed_message_is_written_as_canonical_json` compares the two)."""
        asks = f'"asks":{canonical_json(list(self.asks))},' if self.asks else ""
        domains = f',"domains":{canonical_json(list(self.domains))}' if self.domains else ""
        return (f'{{{asks}"commitment":{_j(commitment)},"content":""{domains},"id":{_j(self.id)},"index":{_j(self.index)},'
                f'"name":{_j(self.name)},"prev_hash":{_j(self.prev_hash)},"role":{_j(self.role)},"round":{_j(self.round)},'
                f'"session":{_j(self.session)},"timestamp":{_j(self.timestamp)},"tool_call_id":{_j(self.tool_call_id)},'
                f'"tool_calls":[]}}')

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Message:
        return cls._made(d, d["content"], d.get("tool_calls"), d.get("hash", ""), d.get("salt"), d.get("commitment"))

    @classmethod
    def from_stored(cls, body: dict[str, Any], hash_: str, payload: tuple[str, dict[str, Any]] | None) -> Message:
        """A message from its stored body and, for an erasable one, its (salt, payload) row, or
        None once erased (its text then reads as ERASED)."""
        if "commitment" not in body:
            return cls._made(body, body["content"], body.get("tool_calls"), hash_, body.get("salt"), None)
        salt, data = payload if payload is not None else (None, _ERASED_PAYLOAD)
        return cls._made(body, data["content"], data["tool_calls"], hash_, salt,
                         None if salt is not None else body["commitment"])

    @classmethod
    def _made(cls, d: dict[str, Any], content: str, tool_calls: Any, hash_: str, salt: str | None,
              commitment: str | None) -> Message:
        """The one place a message is read from a dict of its fields by name (the arguments: what
        the caller took from elsewhere, an erasable body's payload row); keys it lacks take the
        field's default, lists become tuples. A key that names no field is refused: a body written
        by a newer version, or altered, is not read as a message without it. Written out keyword by
        keyword, not merged into one dict: every message of a reopened window is read here
        (`test_every_message_field_is_read_from_a_dict` fails when a field is left out)."""
        if not _MESSAGE_FIELDS.issuperset(d):
            raise Errors.STORE(problem=f"message {d.get('index')!r} of session {d.get('session')!r} has keys no message "
                                       f"field has: {', '.join(sorted(map(str, d.keys() - _MESSAGE_FIELDS)))}",
                               fix="it was written by a newer context-editor, or altered: read it with the version that "
                                   "wrote it, or check the log with `context-editor audit verify`")
        get = d.get
        asks, domains = get("asks"), get("domains")
        return cls(session=d["session"], index=d["index"], round=d["round"], role=d["role"], content=content,
                   timestamp=get("timestamp"), id=get("id"), name=get("name"), tool_call_id=get("tool_call_id"),
                   tool_calls=tuple(tool_calls) if tool_calls else (), prev_hash=get("prev_hash", GENESIS_HASH),
                   hash=hash_, asks=tuple(asks) if asks else (), domains=tuple(domains) if domains else (), salt=salt,
                   commitment=commitment)

    def time(self) -> datetime | None:
        return datetime.fromisoformat(self.timestamp) if self.timestamp else None


# What an erased message reads as (its payload row is gone).
_ERASED_PAYLOAD: dict[str, Any] = {"content": ERASED, "tool_calls": []}
# The keys a message dict or stored body may hold: its init fields (`Message._made`).
_MESSAGE_FIELDS = frozenset(f.name for f in dataclasses.fields(Message) if f.init)


@dataclass(frozen=True, slots=True)
class SearchDoc:
    """One message as the search index holds it (derived data, rebuilt from the log): its
    metadata, and its text as space-separated terms (Latin words, CJK character bigrams), so
    every store indexes the same terms whatever its own tokenizer does with Chinese."""

    message_index: int
    round: int
    role: str
    tool: str | None  # the tool's name for a tool result
    fields: tuple[str, ...]  # the fields this message set or changed
    terms: str


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Which messages a search may return; None means any. `fields`: messages that set any of them."""

    roles: tuple[str, ...] | None = None
    rounds: tuple[int, int] | None = None  # inclusive
    tools: tuple[str, ...] | None = None
    fields: tuple[str, ...] | None = None

    def admits(self, doc: SearchDoc) -> bool:
        return ((self.roles is None or doc.role in self.roles)
                and (self.rounds is None or self.rounds[0] <= doc.round <= self.rounds[1])
                and (self.tools is None or doc.tool in self.tools)
                and (self.fields is None or any(f in self.fields for f in doc.fields)))


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a value came from, down to the character span and the rule that matched it."""

    message_index: int
    round: int
    role: str
    span: tuple[int, int]
    text: str
    extractor: str
    confidence: float
    domain_version: str
    message_id: str | None = None

    def given_from(self) -> tuple[str, int]:
        """Where a value given from outside its session was read (a carry, a user memory: message
        index -1): the session and the index of the message, from `message_id` "<session>#<index>"."""
        assert self.message_id is not None, "a value given from outside its session names its message"
        session, _, index = self.message_id.rpartition("#")
        return session, int(index)

    def to_dict(self) -> dict[str, Any]:
        return {"message_index": self.message_index, "round": self.round, "role": self.role, "span": list(self.span),
                "text": self.text, "extractor": self.extractor, "confidence": self.confidence,
                "domain_version": self.domain_version, "message_id": self.message_id}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Provenance | None:
        if d is None:
            return None
        return cls(**{**d, "span": tuple(d["span"])})


@dataclass(frozen=True, slots=True)
class Candidate:
    """A value Extract found in one message for one field, not yet accepted."""

    field: str
    value: Any  # normalised, JSON-compatible
    provenance: Provenance
    negated: bool = False  # "不要红色": the value is excluded, not chosen
    # "value"; "answer" (a value in reply to the assistant's question about its field); "proposal"
    # (the assistant offers it); replies to an offer, which name no field: "confirmation" (yes),
    # "decline" (no), "pick" (value: the n-th option, -1 the last)
    kind: str = "value"
    asked_round: int | None = None  # for an answer: the round of the question
    option: int | None = None  # for a proposal from a list of options: its number (1-based)


@dataclass(frozen=True, slots=True)
class Edit:
    """One entry of the append-only log. `hash` chains it to the previous edit of its session."""

    session: str
    seq: int
    message_index: int
    round: int
    stage: str  # extract | transform | validate | machine | expiry
    op: Op
    field: str | None
    before: Any
    after: Any
    source: Source
    reason: str | None
    provenance: Provenance | None
    domain_version: str
    at: str | None = None  # the message's timestamp: TTLs in days are measured on it
    prev_hash: str = GENESIS_HASH
    hash: str = ""
    # As for messages: an erasable edit's hash covers commitment(salt, payload()) in place of its
    # new value and the text it was read from, and commitment(before_salt, before_payload()) in
    # place of the value it replaced. The two go separately: erasing a value also erases it where
    # the next change of its field names it as `before`, and that change's own value stays. An
    # erased part keeps only its commitment and reads as ERASED.
    salt: str | None = None
    commitment: str | None = None
    before_salt: str | None = None
    before_commitment: str | None = None
    # As in Message: body(), payload() and before_payload() as sealed. (`field` is a column of
    # this class, hence the long name.)
    _text: str = dataclasses.field(default="", init=False, repr=False, compare=False)
    _payload: str = dataclasses.field(default="", init=False, repr=False, compare=False)
    _before: str = dataclasses.field(default="", init=False, repr=False, compare=False)

    def payload(self) -> dict[str, Any]:
        """What erasing the edit removes: its value and the text it was read from."""
        return {"after": self.after, "text": self.provenance.text if self.provenance else None}

    def before_payload(self) -> dict[str, Any]:
        """What erasing the value it replaced removes."""
        return {"before": self.before}

    def payload_text(self) -> str:
        """The canonical JSON of payload(): what its commitment covers and the store keeps."""
        return self._payload or canonical_json(self.payload())

    def before_text(self) -> str:
        """The canonical JSON of before_payload()."""
        return self._before or canonical_json(self.before_payload())

    @property
    def erased(self) -> bool:
        return self.commitment is not None and self.salt is None

    @property
    def before_erased(self) -> bool:
        return self.before_commitment is not None and self.before_salt is None

    def body(self) -> dict[str, Any]:
        """Everything the hash covers (all but the hash itself); for an erasable edit, the
        commitments to its payloads in place of them."""
        d = self.plain()
        if self.salt is not None or self.commitment is not None:
            prov = d["provenance"]
            d.update(before=None, after=None, provenance={**prov, "text": ""} if prov else None,
                     commitment=committed(self.salt, self.payload_text()) if self.salt is not None else self.commitment,
                     before_commitment=(committed(self.before_salt, self.before_text())
                                        if self.before_salt is not None else self.before_commitment))
        return d

    def plain(self) -> dict[str, Any]:
        """The edit as read: values in place (ERASED once erased), without its hash."""
        d = {
            "session": self.session,
            "seq": self.seq,
            "message_index": self.message_index,
            "round": self.round,
            "stage": self.stage,
            "op": self.op,
            "field": self.field,
            "before": self.before,
            "after": self.after,
            "source": self.source,
            "reason": self.reason,
            "provenance": self.provenance.to_dict() if self.provenance else None,
            "domain_version": self.domain_version,
            "at": self.at,
            "prev_hash": self.prev_hash,
        }
        return d

    def compute_hash(self) -> str:
        return hashlib.sha256(canonical_json(self.body()).encode("utf-8")).hexdigest()

    def body_text(self) -> str:
        """The canonical JSON of body(): what is hashed and stored."""
        return self._text or canonical_json(self.body())

    def sealed(self, seq: int, prev_hash: str, salts: tuple[str, str] | None = None) -> Edit:
        """This edit placed at `seq` after `prev_hash`, with the salts of its two commitments
        (default: fresh random bits) and its own hash filled in."""
        salt, before_salt = salts or (new_salt(), new_salt())
        e = _fresh_copy(self, seq=seq, prev_hash=prev_hash, hash="", salt=salt, commitment=None, before_salt=before_salt,
                        before_commitment=None)
        payload, before = e._payload_texts()
        object.__setattr__(e, "_payload", payload)  # not yet shared
        object.__setattr__(e, "_before", before)
        text = e._committed_text(committed(salt, payload), committed(before_salt, before))
        object.__setattr__(e, "hash", hashlib.sha256(text.encode("utf-8")).hexdigest())
        object.__setattr__(e, "_text", text)
        return e

    # canonical_json of payload(), before_payload() and an erasable edit's body(), written out with
    # their keys in sorted order and no dicts in between (`test_a_sealed_edit_is_written_as_canonical_json`).
    def _payload_texts(self) -> tuple[str, str]:
        prov = self.provenance
        return f'{{"after":{_j(self.after)},"text":{_j(prov.text) if prov else "null"}}}', f'{{"before":{_j(self.before)}}}'

    def _committed_text(self, commitment: str, before_commitment: str) -> str:
        prov = self.provenance
        where = "null" if prov is None else (
            f'{{"confidence":{_j(prov.confidence)},"domain_version":{_j(prov.domain_version)},'
            f'"extractor":{_j(prov.extractor)},"message_id":{_j(prov.message_id)},"message_index":{_j(prov.message_index)},'
            f'"role":{_j(prov.role)},"round":{_j(prov.round)},"span":[{",".join(map(_j, prov.span))}],"text":""}}')
        return (f'{{"after":null,"at":{_j(self.at)},"before":null,"before_commitment":{_j(before_commitment)},'
                f'"commitment":{_j(commitment)},"domain_version":{_j(self.domain_version)},"field":{_j(self.field)},'
                f'"message_index":{_j(self.message_index)},"op":{_j(self.op)},"prev_hash":{_j(self.prev_hash)},'
                f'"provenance":{where},"reason":{_j(self.reason)},"round":{_j(self.round)},"seq":{_j(self.seq)},'
                f'"session":{_j(self.session)},"source":{_j(self.source)},"stage":{_j(self.stage)}}}')

    def to_dict(self) -> dict[str, Any]:
        return {**self.plain(), "hash": self.hash}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Edit:
        return cls(**{**d, "provenance": Provenance.from_dict(d.get("provenance"))})

    @classmethod
    def from_stored(cls, body: dict[str, Any], hash_: str, payload: tuple[str, dict[str, Any]] | None,
                    before: tuple[str, dict[str, Any]] | None = None) -> Edit:
        """An edit from its stored body and, for an erasable one, its (salt, payload) and its
        (before salt, before payload), each None once erased."""
        if "commitment" not in body:
            return cls.from_dict({**body, "hash": hash_})
        salt, data = payload if payload is not None else (None, {"after": ERASED, "text": ERASED})
        before_salt, old = before if before is not None else (None, {"before": ERASED})
        prov = body.get("provenance")
        return cls.from_dict({**body, "before": old["before"], "after": data["after"], "hash": hash_,
                              "provenance": {**prov, "text": data["text"]} if prov else None,
                              "salt": salt, "commitment": None if salt is not None else body["commitment"],
                              "before_salt": before_salt,
                              "before_commitment": None if before_salt is not None else body["before_commitment"]})


@dataclass(slots=True)
class HistoryEntry:
    value: Any
    round: int
    status: str  # accepted | rejected | cleared | expired
    source: str
    reason: str | None
    provenance: Provenance | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "round": self.round,
            "status": self.status,
            "source": self.source,
            "reason": self.reason,
        }


_INT32 = next(t for t in ("i", "l") if array(t).itemsize == 4)


def pack_ints(values: Iterable[int]) -> str | list[int]:
    """Integers as derived rows store them: base64 of 32-bit little-endian ones, which a reopen
    reads ~4× faster than a JSON list (a long session's snapshot holds thousands); the list when
    one does not fit in 32 bits."""
    try:
        packed = array(_INT32, values)
    except OverflowError:
        return list(values)
    if sys.byteorder == "big":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def unpack_ints(stored: str | list[int]) -> array[int]:
    """The integers `pack_ints` stored (or a plain list of them). ValueError/TypeError: not such a form.
    Packed ones come back as the 32-bit array they were (widening them costs 3× the decoding):
    extend it with `extended`, which widens it first when a value does not fit."""
    if not isinstance(stored, str):
        return array("q", stored)
    packed = array(_INT32)
    packed.frombytes(base64.b64decode(stored, validate=True))
    if sys.byteorder == "big":
        packed.byteswap()
    return packed


def extended(flat: array[int], values: tuple[int, ...]) -> array[int]:
    """`flat` with `values` appended (the same array, or a 64-bit copy when it held 32-bit
    integers and one of `values` does not fit: an array's extend stops part way on overflow)."""
    if flat.itemsize < 8 and not all(-2**31 <= v < 2**31 for v in values):
        flat = array("q", flat)
    flat.extend(values)
    return flat


@dataclass(slots=True, eq=False)
class Earlier:
    """What the history entries a state no longer holds in memory (`State.history_cap`) leave
    behind: what the renderer reads of every entry, in compact form (spans as flat integer arrays,
    values once each). The entries themselves stay in the store's edit log (`ContextEditor.why`,
    `ContextEditor.history_state`)."""

    dropped: int = 0  # entries dropped, oldest first
    accepted: array[int] = field(default_factory=lambda: array("q"))  # (message, start, end) of accepted values' provenance
    # (message, start, end) of every non-empty provenance span (`spans`). As a snapshot stored them
    # (`pack_ints`) until first read: only a render that hides the field reads them.
    _spans: array[int] | str | list[int] = field(default_factory=lambda: array("q"))
    texts: dict[str, None] = field(default_factory=dict)  # every scalar value and provenance text of 4+ characters, first seen first

    @property
    def spans(self) -> array[int]:
        if not isinstance(self._spans, array):
            self._spans = unpack_ints(self._spans)
        return self._spans

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Earlier) and (self.dropped, self.accepted, self.spans, self.texts) == (
            other.dropped, other.accepted, other.spans, other.texts)

    __hash__ = None  # type: ignore[assignment]  # (mutable, compared by value: as the generated __eq__ left it)

    def add(self, h: HistoryEntry) -> None:
        self.dropped += 1
        p = h.provenance
        if p is not None:
            if h.status == "accepted":
                self.accepted = extended(self.accepted, (p.message_index, *p.span))
            if p.span[1] > p.span[0]:
                self._spans = extended(self.spans, (p.message_index, *p.span))
        for v in (h.value, p.text if p else None):
            if not isinstance(v, bool) and isinstance(v, (str, int, float)) and len(str(v)) >= 4:
                self.texts.setdefault(str(v), None)

    @staticmethod
    def triples(flat: array[int]) -> Iterator[tuple[int, int, int]]:
        """(message, start, end) of a flat span array, in the order the entries came."""
        it = iter(flat)
        return zip(it, it, it)

    def to_json(self) -> dict[str, Any]:
        spans = self._spans if isinstance(self._spans, str) else pack_ints(self._spans)  # (as read, if never read)
        return {"dropped": self.dropped, "accepted": pack_ints(self.accepted), "spans": spans, "texts": list(self.texts)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Earlier:
        spans = d["spans"]
        if not isinstance(spans, (str, list)):
            raise TypeError(f"Earlier spans: {type(spans).__name__}")
        return cls(d["dropped"], unpack_ints(d["accepted"]), spans, dict.fromkeys(d["texts"]))


@dataclass(slots=True)
class FieldState:
    value: Any = None
    provenance: Provenance | None = None
    set_round: int | None = None
    set_at: str | None = None
    source: str | None = None
    history: list[HistoryEntry] = field(default_factory=list)  # the newest entries (all, unless the state is capped)
    # How often each value (canonical JSON) was accepted, and the last one: tells a reversion
    # from a correction in O(1), however long the history.
    accepted: dict[str, int] = field(default_factory=dict)
    last_accepted: str | None = None
    earlier: Earlier | None = None  # what the entries dropped from `history` left behind (a capped state)

    def keep(self, cap: int) -> None:
        """Drop all but the newest `cap` history entries, leaving what renders read of them in `earlier`."""
        if len(self.history) > cap:
            if self.earlier is None:
                self.earlier = Earlier()
            for h in self.history[: len(self.history) - cap]:
                self.earlier.add(h)
            del self.history[: len(self.history) - cap]

    @property
    def entries(self) -> int:
        """How many history entries the field has had, those dropped from memory included."""
        return len(self.history) + (self.earlier.dropped if self.earlier else 0)

    def was_accepted_before(self, value: Any) -> bool:
        """True if `value` was accepted earlier than the latest acceptance (or the field is now empty)."""
        key = canonical_json(value)
        earlier = self.accepted.get(key, 0) - (1 if key == self.last_accepted and self.value is not None else 0)
        return earlier > 0

    @property
    def present(self) -> bool:
        return self.value is not None


SNAPSHOT_FORMAT = 4  # `State.snapshot`'s form; a stored snapshot of another is not read (the log is folded instead)


class SnapshotFormatError(ValueError):
    """A stored snapshot written in another `SNAPSHOT_FORMAT` (by another version: not a fault)."""


def _prov_row(p: Provenance | None, dv: str) -> list[Any] | None:
    """A provenance in a snapshot: a list, without the domain version when it is the state's (`dv`)."""
    if p is None:
        return None
    return [p.message_index, p.round, p.role, p.span[0], p.span[1], p.text, p.extractor, p.confidence, p.message_id,
            None if p.domain_version == dv else p.domain_version]


# Provenance's slots, set straight through their descriptors: the frozen class's __init__ sets each
# through object.__setattr__ by name, 2x the time, and a reopen makes one per history entry held.
_MI, _RD, _RO, _SP, _TX, _EX, _CO, _DV, _ID = (getattr(Provenance, f.name).__set__ for f in dataclasses.fields(Provenance))


def _provenance(message_index: int, round_: int, role: str, span: tuple[int, int], text: str, extractor: str,
                confidence: float, domain_version: str, message_id: str | None) -> Provenance:
    """Provenance(...) of these fields, made as its __init__ makes it."""
    p = object.__new__(Provenance)
    _MI(p, message_index)
    _RD(p, round_)
    _RO(p, role)
    _SP(p, span)
    _TX(p, text)
    _EX(p, extractor)
    _CO(p, confidence)
    _DV(p, domain_version)
    _ID(p, message_id)
    return p


def _prov_of(row: list[Any], dv: str) -> Provenance:
    """The provenance `_prov_row` stored."""
    message_index, round_, role, start, end, text, extractor, confidence, message_id, version = row
    return _provenance(message_index, round_, role, (start, end), text, extractor, confidence, dv if version is None else version,
                       message_id)


def _history_columns(history: list[HistoryEntry], dv: str) -> dict[str, Any]:
    """A field's history entries in a snapshot, column by column: a reopen parses a long
    session's 64 newest entries of a field as a few packed arrays and lists, not as ~1,100 JSON
    values. `shapes`: the distinct (status, source, reason[, role, extractor, confidence,
    version]) of the entries (the last four: of its provenance, when it has one), `shape` each
    entry's, `ints` each entry's round (and its provenance's message, round, start and end),
    `texts` and `ids` its provenance's text and message id (`ids` left out when none has one)."""
    shapes: dict[tuple[Any, ...], int] = {}
    shape, ints, values, texts, ids = [], [], [], [], []
    for h in history:
        p = h.provenance
        key = (h.status, h.source, h.reason) if p is None else (
            h.status, h.source, h.reason, p.role, p.extractor, p.confidence, None if p.domain_version == dv else p.domain_version)
        shape.append(shapes.setdefault(key, len(shapes)))
        values.append(h.value)
        ints.append(h.round)
        if p is not None:
            ints.extend((p.message_index, p.round, p.span[0], p.span[1]))
            texts.append(p.text)
            ids.append(p.message_id)
    out = {"values": values, "shapes": [list(k) for k in shapes], "shape": pack_ints(shape), "ints": pack_ints(ints), "texts": texts}
    return {**out, "ids": ids} if any(i is not None for i in ids) else out


def _history_of(columns: dict[str, Any], dv: str) -> list[HistoryEntry]:
    """The history entries `_history_columns` stored. ValueError: columns that do not agree."""
    shapes, values, texts = columns["shapes"], columns["values"], columns["texts"]
    ints, shape = unpack_ints(columns["ints"]), unpack_ints(columns["shape"])
    ids = columns.get("ids") or [None] * len(texts)
    if len(shape) != len(values) or len(ids) != len(texts):
        raise ValueError("snapshot history: columns of different lengths")
    out, at, k = [], 0, 0
    for value, i in zip(values, shape):
        status, source, reason, *where = shapes[i]
        round_ = ints[at]
        if where:
            role, extractor, confidence, version = where
            p: Provenance | None = _provenance(ints[at + 1], ints[at + 2], role, (ints[at + 3], ints[at + 4]), texts[k], extractor,
                                               confidence, dv if version is None else version, ids[k])
            at, k = at + 5, k + 1
        else:
            p, at = None, at + 1
        out.append(HistoryEntry(value, round_, status, source, reason, p))
    if at != len(ints) or k != len(texts):
        raise ValueError("snapshot history: columns of different lengths")
    return out


@dataclass(frozen=True, slots=True)
class Alert:
    code: str
    round: int
    message: str
    field: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "round": self.round, "message": self.message}


@dataclass(slots=True)
class State:
    """The fold of a session's edit log. Apply edits in order; never mutate them."""

    domain: str
    domain_version: str
    session: str
    phase: str | None = None
    round: int = 0
    message_index: int = -1
    fields: dict[str, FieldState] = field(default_factory=dict)
    alerts: list[Alert] = field(default_factory=list)
    last_seq: int = -1
    last_hash: str = GENESIS_HASH
    last_message_hash: str = GENESIS_HASH
    llm: dict[str, dict[str, Any]] = field(default_factory=dict)  # prompt hash -> recorded model answer
    # The newest entries of each field's history kept in memory (None: all). Older ones leave
    # what the renderer reads of them in `FieldState.earlier`; the full history is in the log.
    history_cap: int | None = field(default=None, compare=False)

    def get(self, name: str) -> Any:
        fs = self.fields.get(name)
        return fs.value if fs else None

    def values(self) -> dict[str, Any]:
        return {k: f.value for k, f in self.fields.items() if f.present}

    def apply(self, e: Edit) -> None:
        """Fold one edit into the state."""
        self.last_seq, self.last_hash = e.seq, e.hash
        self.round = max(self.round, e.round)
        self.message_index = max(self.message_index, e.message_index)
        if e.op == "transition":
            self.phase = e.after
            return
        if e.op == "alert":
            # One alert per code and field: a guard that keeps failing updates its alert, it does not pile up.
            code = e.reason or "ALERT"
            self.alerts = [a for a in self.alerts if (a.code, a.field) != (code, e.field)]
            self.alerts.append(Alert(code, e.round, str(e.after), e.field))
            return
        if e.op == "resolve":
            self.alerts = [a for a in self.alerts if (a.code, a.field) != (e.reason, e.field)]
            return
        if e.op == "upgrade":
            self.domain_version = e.after
            return
        if e.op == "llm":
            self.llm[e.after["prompt_hash"]] = e.after
            return
        if e.field is None:  # only an altered log has a field edit without a field
            raise Errors.EDIT_WITHOUT_FIELD(seq=e.seq, session=e.session, op=e.op)
        fs = self.fields.setdefault(e.field, FieldState())
        if e.op == "set":
            fs.value, fs.provenance, fs.set_round, fs.set_at, fs.source = e.after, e.provenance, e.round, e.at, e.source
            status = "accepted"
            key = canonical_json(e.after)
            fs.accepted[key] = fs.accepted.get(key, 0) + 1
            fs.last_accepted = key
            # An alert about a field stays open until the field gets an accepted value.
            self.alerts = [a for a in self.alerts if a.field != e.field]
        elif e.op in ("clear", "expire"):
            fs.value, fs.provenance, fs.set_round, fs.set_at, fs.source = None, None, None, None, None
            status = "cleared" if e.op == "clear" else "expired"
        else:  # reject
            status = "rejected"
        fs.history.append(HistoryEntry(e.after, e.round, status, e.source, e.reason, e.provenance))
        if self.history_cap is not None and len(fs.history) > self.history_cap:
            fs.keep(self.history_cap)

    def capped(self, cap: int | None) -> State:
        """This state holding at most `cap` history entries per field in memory from now on (None: all)."""
        self.history_cap = cap
        if cap is not None:
            for fs in self.fields.values():
                fs.keep(cap)
        return self

    def snapshot(self) -> dict[str, Any]:
        """The whole fold as JSON (derived data: a reopened session folds only the edits after it).
        Compact (`SNAPSHOT_FORMAT`): a provenance is a list, without the domain version when it is
        the state's; the span arrays of the entries held in compact form (`Earlier`) packed
        (`pack_ints`); each field's history entries column by column (`_history_columns`)."""
        dv = self.domain_version
        return {
            "v": SNAPSHOT_FORMAT, "domain": self.domain, "domain_version": dv, "session": self.session, "phase": self.phase,
            "round": self.round, "message_index": self.message_index, "last_seq": self.last_seq,
            "last_hash": self.last_hash, "last_message_hash": self.last_message_hash,
            "alerts": [[a.code, a.round, a.message, a.field] for a in self.alerts],
            "fields": {name: {"value": fs.value, "provenance": _prov_row(fs.provenance, dv), "set_round": fs.set_round,
                              "set_at": fs.set_at, "source": fs.source, "accepted": fs.accepted,
                              "last_accepted": fs.last_accepted, "history": _history_columns(fs.history, dv),
                              **({"earlier": fs.earlier.to_json()} if fs.earlier else {})}
                       for name, fs in self.fields.items()},
        }

    @classmethod
    def from_snapshot(cls, d: dict[str, Any]) -> State:
        """The state a `snapshot` holds. SnapshotFormatError: a snapshot of another format (an
        older row is not read: the log is folded instead, and the snapshot stored again)."""
        if d.get("v") != SNAPSHOT_FORMAT:
            raise SnapshotFormatError(f"it was written in another format ({d.get('v')!r}, not {SNAPSHOT_FORMAT})")
        st = cls(d["domain"], d["domain_version"], d["session"], d["phase"], d["round"], d["message_index"],
                 last_seq=d["last_seq"], last_hash=d["last_hash"], last_message_hash=d["last_message_hash"])
        st.alerts = [Alert(*a) for a in d["alerts"]]
        dv = d["domain_version"]
        for name, f in d["fields"].items():
            p = f["provenance"]
            st.fields[name] = FieldState(f["value"], None if p is None else _prov_of(p, dv), f["set_round"], f["set_at"],
                                         f["source"], _history_of(f["history"], dv), dict(f["accepted"]), f["last_accepted"],
                                         Earlier.from_json(f["earlier"]) if "earlier" in f else None)
        return st

    @classmethod
    def fold(
        cls, domain: str, domain_version: str, session: str, edits: Iterable[Edit], as_of_round: int | None = None
    ) -> State:
        st = cls(domain=domain, domain_version=domain_version, session=session)
        for e in edits:
            if as_of_round is not None and e.round > as_of_round:
                break
            st.apply(e)
        return st

    def to_json(self) -> dict[str, Any]:
        """The documented state JSON: only fields with a value appear under `fields`."""
        fields = {}
        for name in sorted(self.fields):
            fs = self.fields[name]
            if not fs.present:
                continue
            p = fs.provenance
            fields[name] = {
                "value": fs.value,
                "provenance": (
                    {
                        "round": p.round,
                        "message_index": p.message_index,
                        "role": p.role,
                        "span": list(p.span),
                        "text": p.text,
                        "extractor": p.extractor,
                        "confidence": p.confidence,
                    }
                    if p
                    else None
                ),
                "history": [h.to_dict() for h in fs.history],
            }
        return {
            "domain": self.domain,
            "domain_version": self.domain_version,
            "session": self.session,
            "round": self.round,
            "phase": self.phase,
            "fields": fields,
            "alerts": [a.to_dict() for a in self.alerts],
        }


# The fields `_fresh_copy` copies, and those it leaves empty.
_SLOTS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {
    cls: (tuple(f.name for f in dataclasses.fields(cls) if f.init), tuple(f.name for f in dataclasses.fields(cls) if not f.init))
    for cls in (Message, Edit)}
