"""Golden conversations of every bundled domain, in both languages (tests/golden/<domain>/*.jsonl).

One parametrized test per file: the final state must equal the header's `expect`, except for the
fields its `xfail` names (known misses, each with its reason), which must still differ — so a fix
shows up as a failure asking for the file to be updated. Per-field precision and recall over the
same files: `python benchmarks/extraction_eval.py`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from context_editor import ContextEditor

from context_editor.bench.golden import all_goldens, final_state

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
GOLDENS = all_goldens(GOLDEN_DIR)
DOMAINS = ("ecommerce", "travel", "finance")


@pytest.mark.parametrize("g", GOLDENS, ids=[f"{g.domain}/{g.id}" for g in GOLDENS])
def test_golden_final_state(g):
    state = final_state(g)
    fields = sorted(set(state) | set(g.expect))
    wrong = {f: (g.expect.get(f), state.get(f)) for f in fields if f not in g.xfail and g.expect.get(f) != state.get(f)}
    assert not wrong, f"{g.path.name}: field: (expected, got) {wrong}"
    fixed = [f for f in g.xfail if g.expect.get(f) == state.get(f)]
    assert not fixed, f"{g.path.name}: {fixed} now extracted correctly; remove them from `xfail`"


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_domain_has_enough_goldens_in_both_languages(domain):
    mine = [g for g in GOLDENS if g.domain == domain]
    langs = Counter(g.lang for g in mine)
    assert len(mine) >= 15 and langs["zh"] >= 5 and langs["en"] >= 5, langs
    long_ones = [g for g in mine if sum(m["role"] == "user" for m in g.messages) >= 30]
    assert {g.lang for g in long_ones} == {"zh", "en"}, "a 30+ round conversation in each language"


def test_golden_replay_is_deterministic():
    """Same domain + messages -> the same edits, byte for byte, on a second editor."""
    for g in GOLDENS:
        logs = []
        for _ in range(2):
            editor = ContextEditor(g.domain, "memory://")
            editor.ingest(g.id, g.messages)
            logs.append([e.hash for e in editor.store.edits(g.id)])
        assert logs[0] == logs[1], g.id
