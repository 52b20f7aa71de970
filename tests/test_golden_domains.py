"""Golden conversations of every bundled domain, in both languages (tests/golden/<domain>/*.yaml).

They are in the format of `context-editor test` (docs/testing-domains.md) and run through the
same code (context_editor/domaintest.py): one parametrized test per file; the final state must
equal `expect.state`, except for the fields its `xfail` names (known misses, each with its
reason), which must still differ — so a fix shows up as a failure asking for the file to be
updated. Per-field precision and recall over the same files: `context-editor test DOMAIN
tests/golden/DOMAIN` or `python benchmarks/extraction_eval.py`.
"""

from __future__ import annotations

from collections import Counter

import pytest

from context_editor.model import canonical_json
from context_editor import ContextEditor
from context_editor.cli import main
from context_editor.domain import load_domain
from context_editor.domaintest import load_cases, report, run_case, run_suite

from conftest import ROOT

GOLDEN = ROOT / "tests" / "golden"
DOMAINS = ("ecommerce", "travel", "finance")
CASES = [(d, c) for d in DOMAINS for c in load_cases(GOLDEN / d)]
LOADED = {d: load_domain(d) for d in DOMAINS}


@pytest.mark.parametrize("domain,case", CASES, ids=[f"{d}/{c.id}" for d, c in CASES])
def test_golden_final_state(domain, case):
    result = run_case(LOADED[domain], case)
    assert not result.failures, "\n".join(f"{m.what}: expected {m.expected}, got {m.got}; why: {m.why}" for m in result.failures)
    assert not result.fixed, f"{case.path.name}: {result.fixed} now extracted correctly; remove them from `xfail`"


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_domain_has_enough_goldens_in_both_languages(domain):
    mine = [c for d, c in CASES if d == domain]
    langs = Counter(c.lang for c in mine)
    assert len(mine) >= 15 and langs["zh"] >= 5 and langs["en"] >= 5, langs
    long_ones = [c for c in mine if sum(m["role"] == "user" for m in c.messages) >= 30]
    assert {c.lang for c in long_ones} == {"zh", "en"}, "a 30+ round conversation in each language"


def test_golden_replay_is_deterministic():
    """Same domain + messages -> the same edits, byte for byte, on a second editor. Their hashes
    differ: each run commits values under fresh random salts (erasure needs them unguessable)."""
    for domain, case in CASES:
        logs = []
        for _ in range(2):
            editor = ContextEditor(LOADED[domain], "memory://")
            editor.ingest(case.id, case.messages)
            logs.append([canonical_json({k: v for k, v in e.to_dict().items() if k not in ("hash", "prev_hash")})
                         for e in editor.store.edits(case.id)])
        assert logs[0] == logs[1], case.id


def test_the_test_command_reports_precision_recall_and_known_misses(capsys, tmp_path):
    junit = tmp_path / "report.xml"
    assert main(["test", "travel", str(GOLDEN / "travel"), "--junit", str(junit)]) == 0
    out = capsys.readouterr().out
    assert "precision  recall" in out and "passed, 0 failed" in out
    assert "known miss" in out and "why:" in out  # a known miss is shown with its story
    assert "by language: en precision" in out and "; zh precision" in out
    assert 'failures="0"' in junit.read_text("utf-8")
    suite = run_suite(LOADED["travel"], load_cases(GOLDEN / "travel"))
    assert report(suite).splitlines()[-1] == out.strip().splitlines()[-1]
