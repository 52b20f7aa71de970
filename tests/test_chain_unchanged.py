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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from context_editor import ContextEditor  # noqa: E402
from context_editor.audit import replay  # noqa: E402
from context_editor.domaintest import load_cases  # noqa: E402
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


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(heads(f"sqlite:///{tmp}/chains.db"), indent=1, sort_keys=True))
