"""The hash chain and byte-identical replay do not change when ingest, the stores or the live
state get faster (issue 15): every golden conversation is ingested into SQLite and the heads of
both chains (its last message hash and last edit hash, which cover every byte before them) must
equal those recorded before that work, in tests/fixtures/chain_heads.json; replay must reproduce
each session's log exactly.

The fixture is the record of what the code produced: regenerate it only for a change that is
meant to change hashes (say so in the commit), with
`python tests/test_chain_unchanged.py > tests/fixtures/chain_heads.json`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from context_editor import ContextEditor  # noqa: E402
from context_editor.audit import replay  # noqa: E402
from context_editor.domaintest import load_cases  # noqa: E402
from context_editor.model import Edit, Message, Provenance, canonical_json  # noqa: E402
from context_editor.store.base import Head  # noqa: E402
from conftest import seeded_salts  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "chain_heads.json"
DOMAINS = ("ecommerce", "travel", "finance")
NOW = "2024-05-01T10:00:00+00:00"  # messages without a timestamp get this one: hashes are reproducible


def heads(store_url: str, check_replay: bool = False) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for domain in DOMAINS:
        editor = ContextEditor(domain, store_url, salts=seeded_salts(domain))
        for case in load_cases(ROOT / "tests" / "golden" / domain):
            session = f"{domain}/{case.id}"
            state = editor.ingest(session, case.messages, now=NOW)
            out[session] = {"message": state.last_message_hash, "edit": state.last_hash,
                            "edits": str(state.last_seq + 1)}
            if check_replay:
                assert replay(editor.store, session).identical, session
    return out


def test_every_golden_conversation_keeps_its_hash_chain_and_replays(tmp_path):
    recorded = json.loads(FIXTURE.read_text(encoding="utf-8"))
    now = heads(f"sqlite:///{tmp_path}/chains.db", check_replay=True)
    assert len(now) >= 40 and set(now) == set(recorded)
    changed = [s for s in now if now[s] != recorded[s]]
    assert not changed, f"hash chains changed for {len(changed)} conversations, e.g. {changed[:3]}"


# What the sealing path writes out by hand (model.Message._seal, Edit.sealed) must be the bytes
# canonical_json writes of the same records' dicts: any text, number, value or missing part.
_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_maybe = st.none() | _text
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3), max_leaves=8)
_provenance = st.builds(Provenance, message_index=st.integers(), round=st.integers(), role=_text,
                        span=st.tuples(st.integers(), st.integers()), text=_text, extractor=_text,
                        confidence=st.floats(allow_nan=False) | st.integers(0, 1), domain_version=_text, message_id=_maybe)


@settings(max_examples=400, deadline=None)
@given(session=_text, index=st.integers(0, 10**12), rnd=st.integers(-1, 10**6), role=_text, content=_text,
       timestamp=_maybe, id_=_maybe, name=_maybe, call=_maybe, calls=st.lists(st.dictionaries(_text, _json, max_size=3), max_size=2),
       asks=st.lists(_text, max_size=2), domains=st.lists(_text, max_size=2), salt=_text.filter(bool))
def test_a_sealed_message_is_written_as_canonical_json(session, index, rnd, role, content, timestamp, id_, name, call, calls,
                                                       asks, domains, salt):
    m = Message.new("p" * 64, salt, session=session, index=index, round=rnd, role=role, content=content, timestamp=timestamp,
                    id=id_, name=name, tool_call_id=call, tool_calls=tuple(calls), asks=tuple(asks), domains=tuple(domains))
    assert m.payload_text() == canonical_json(m.payload())
    assert m.body_text() == canonical_json(m.body())
    assert m.hash == m.compute_hash()


@settings(max_examples=400, deadline=None)
@given(session=_text, seq=st.integers(0, 10**9), index=st.integers(0, 10**9), rnd=st.integers(0, 10**6), stage=_text, op=_text,
       field=_maybe, before=_json, after=_json, source=_text, reason=_maybe, provenance=st.none() | _provenance, version=_text,
       at=_maybe, salts=st.tuples(_text, _text))
def test_a_sealed_edit_is_written_as_canonical_json(session, seq, index, rnd, stage, op, field, before, after, source, reason,
                                                    provenance, version, at, salts):
    e = Edit(session, -1, index, rnd, stage, op, field, before, after, source, reason, provenance, version, at).sealed(seq, "p" * 64, salts)
    assert e.payload_text() == canonical_json(e.payload())
    assert e.before_text() == canonical_json(e.before_payload())
    assert e.body_text() == canonical_json(e.body())
    assert e.hash == e.compute_hash()


@settings(max_examples=200, deadline=None)
@given(session=_text, domain=_text, version=_text, sha=_maybe, messages=st.integers(0, 10**12), edits=st.integers(0, 10**12),
       last_message=_text, last_edit=_text)
def test_a_head_is_written_as_canonical_json(session, domain, version, sha, messages, edits, last_message, last_edit):
    head = Head(session, domain, version, sha, messages, edits, last_message, last_edit)
    assert head.text() == canonical_json({"session": session, "domain": domain, "domain_version": version, "domain_sha256": sha,
                                          "messages": messages, "edits": edits, "last_message_hash": last_message,
                                          "last_edit_hash": last_edit})


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(heads(f"sqlite:///{tmp}/chains.db"), indent=1, sort_keys=True))
