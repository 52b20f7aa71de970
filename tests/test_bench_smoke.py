"""The benchmark runners on a few real dialogues, so CI notices a broken benchmark; plus the
metrics they rest on. Each dataset's fixed slice (the first 50 dialogues) must hold the accuracy
recorded in tests/bench_slices.json. Full runs are `context-editor bench …` (benchmarks/README.md).

The datasets are read from ../shared/data relative to the repository (CI has it); the runner
tests skip, saying where they looked, when it is absent.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
from pathlib import Path

import pytest

from context_editor.bench.cli import register
from context_editor.bench.contexts import HistoryMeter
from context_editor.bench.metrics import (DomainScore, Gold, Predicted, contained, norm, percentile, scored_value, slot_score,
                                         token_sort_ratio)
from context_editor.bench.progress import Progress
from context_editor.inject.tokens import count_tokens

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
SGD_DIR = DATA / "sgd" / "dev"
CROSSWOZ_ZIP = DATA / "crosswoz" / "val.json.zip"
KEYS = {"dataset", "dialogues", "turns", "joint_goal_accuracy", "slot_precision", "slot_recall", "slot_f1", "per_domain",
        "tokens_median", "coverage", "ingest_ms_p50", "ingest_ms_p99", "render_ms_p50", "messages_per_s", "peak_rss_mb",
        "scaling_ratio"}
CONTEXTS = {"full_history", "window_5", "window_10", "window_equal_tokens", "editor"}


RECORDED = json.loads((Path(__file__).with_name("bench_slices.json")).read_text("utf-8"))


def _bench(tmp_path: Path, *argv: str) -> dict:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bench", *argv, "--out", str(tmp_path), "--scaling-rounds", "150"])
    assert args.func(args) == 0
    return json.loads((tmp_path / "results.json").read_text("utf-8"))


def _holds_its_record(name: str, tmp_path: Path) -> dict:
    """Run the recorded slice through the whole `bench` command; its accuracy must not fall more
    than the tolerance below the record (a regression test, not a range that always passes)."""
    rec = RECORDED[name]
    results = _bench(tmp_path, name, "--data", str(DATA / rec["data"]), "--limit", str(rec["limit"]))
    assert KEYS <= set(results)
    assert set(results["tokens_median"]) == set(results["coverage"]) == CONTEXTS
    assert results["dataset"] == name and results["dialogues"] == rec["limit"] and results["turns"] == rec["turns"]
    for metric in ("joint_goal_accuracy", "slot_f1"):
        assert results[metric] >= rec[metric] - RECORDED["tolerance"], (
            f"{name} {metric} fell to {results[metric]} (recorded {rec[metric]}, tolerance {RECORDED['tolerance']})")
    # Value-only scoring: crediting the source text can only add, and is reported apart.
    assert results["joint_goal_accuracy_text_credited"] >= results["joint_goal_accuracy"]
    # The editor's context holds more of the gold than a window of the same order of size.
    assert results["coverage"]["editor"] > results["coverage"]["window_5"]
    assert results["config"]["split"] == rec["split"] and results["config"]["limit"] == rec["limit"]
    assert results["config"]["cpu_affinity"] and results["scaling"]["rounds"] == 150
    assert "| joint goal accuracy" in (tmp_path / "report.md").read_text("utf-8")
    return results


@pytest.mark.skipif(not SGD_DIR.exists(), reason=f"SGD dev split not found at {SGD_DIR}")
def test_sgd_dev_slice_holds_its_recorded_accuracy(tmp_path):
    results = _holds_its_record("sgd", tmp_path)
    assert "restaurants_2" in results["per_domain"]


@pytest.mark.skipif(not CROSSWOZ_ZIP.exists(), reason=f"CrossWOZ validation split not found at {CROSSWOZ_ZIP}")
def test_crosswoz_val_slice_holds_its_recorded_accuracy(tmp_path):
    results = _holds_its_record("crosswoz", tmp_path)
    assert set(results["per_domain"]) >= {"attraction", "restaurant", "hotel"}


@pytest.mark.skipif(not CROSSWOZ_ZIP.exists(), reason=f"CrossWOZ validation split not found at {CROSSWOZ_ZIP}")
def test_one_envelope_per_turn_against_the_frame_contexts_added_up(tmp_path):
    """The bench renders the frame domains of a turn as one context (`render_together`);
    `--without envelope` adds up each domain's own context, as before issue 10's envelope."""
    from context_editor.bench.crosswoz import load_crosswoz
    from context_editor.bench.runner import Harness

    ds = load_crosswoz(CROSSWOZ_ZIP, None, tmp_path / "domains", 4)
    rows = {}
    for envelope in (True, False):
        harness = Harness(ds, envelope=envelope)
        harness.run(f"envelope {envelope}")
        rows[envelope] = harness.rows
    one, added = rows[True], rows[False]
    assert len(one) == len(added) and any(len(d.domains) > 1 for d in ds.dialogues)
    assert sum(r.tokens["editor"] for r in one) < 0.6 * sum(r.tokens["editor"] for r in added)
    assert sum(r.covered["editor"] for r in one) >= 0.9 * sum(r.covered["editor"] for r in added)


def test_the_readme_prose_comes_from_the_run_config():
    """benchmarks/readme_results.py says what a run measured: split, --limit, pinning."""
    spec = importlib.util.spec_from_file_location("readme_results", ROOT / "benchmarks" / "readme_results.py")
    assert spec and spec.loader
    readme_results = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(readme_results)
    run = {"dialogues": 50, "config": {"split": "dev", "limit": 50, "cpu_affinity": [0, 1], "date": "2026-11-30",
                                       "data": "../shared/data/sgd/dev"}}
    assert readme_results.measured("SGD", run) == (
        "SGD: the first 50 dialogues of the dev split (--limit 50), not pinned (cores 0, 1), on 2026-11-30")
    full = {"dialogues": 2098, "config": {**run["config"], "limit": None, "cpu_affinity": [0]}}
    assert readme_results.measured("SGD", full) == "SGD: the full dev split (2,098 dialogues), pinned to core 0, on 2026-11-30"
    assert "not a like-for-like comparison" in readme_results.reference("SGD", full)
    assert readme_results.reproduce("SGD", "sgd", full) == (
        "taskset -c 0 context-editor bench sgd --data ../shared/data/sgd/dev --out benchmarks/out/sgd")


def test_token_sort_ratio_follows_fuzzywuzzy():
    assert token_sort_ratio("San Jose", "san jose") == 1.0
    assert token_sort_ratio("New York City", "City New York") == 1.0  # token order does not matter
    assert token_sort_ratio("11:30 am", "11:30 pm") == 0.88
    assert token_sort_ratio("", "x") == 0.0


def test_slot_scores_by_kind():
    assert slot_score(Gold(("2",), "exact"), Predicted("2")) == 1.0
    assert slot_score(Gold(("today", "2019-03-01"), "fuzzy"), Predicted("2019-03-01", text="today")) == 1.0
    # The value is scored, not the text it came from; that credit is only reported apart.
    assert slot_score(Gold(("the 11th",), "exact"), Predicted("2019-03-11", text="the 11th")) == 0.0
    assert slot_score(Gold(("the 11th",), "exact"), Predicted("2019-03-11", text="the 11th"), credit_text=True) == 1.0
    assert slot_score(Gold(("早餐服务 吹风机",), "set"), Predicted("吹风机, 早餐服务", items=("吹风机", "早餐服务"))) == 1.0
    assert slot_score(Gold(("１００-１５０元",), "exact"), Predicted("100-150元")) == 1.0  # full-width folds


def test_values_are_scored_in_the_datasets_own_notation():
    # An amount in the dataset's currency is the bare amount SGD writes; another currency is not.
    gold = Gold(("$1,520", "1520"), "fuzzy")
    assert slot_score(gold, Predicted(scored_value({"amount": 1520.0, "currency": "USD"}, "USD"))) == 1.0
    assert slot_score(gold, Predicted(scored_value({"amount": 1520.0, "currency": "EUR"}, "USD"))) < 1.0
    assert slot_score(gold, Predicted(scored_value({"amount": 1520.0, "currency": "USD"}))) < 1.0  # no dataset currency
    # No preference is the dataset's word for it, and is no value gold has.
    assert scored_value({"any": True}, "USD", "dontcare") == "dontcare" and scored_value({"any": True}) == "any"
    assert slot_score(Gold(("dontcare",), "fuzzy"), Predicted(scored_value({"any": True}, None, "dontcare"))) == 1.0
    assert slot_score(Gold(("2019-03-11",), "fuzzy"), Predicted(scored_value({"any": True}, None, "dontcare"))) < 0.5


def test_joint_goal_is_the_product_and_extras_count():
    score = DomainScore()
    assert score.add({"a": Gold(("x",))}, {"a": Predicted("x")}) == 1.0
    assert score.add({"a": Gold(("x",))}, {"a": Predicted("x"), "b": Predicted("y")}) == 0.0  # an extra slot
    assert score.add({"a": Gold(("x",)), "c": Gold(("z",))}, {"a": Predicted("x")}) == 0.0  # a missed slot
    s = score.summary()
    assert s["frames"] == 3 and s["joint_goal_accuracy"] == pytest.approx(1 / 3, abs=1e-4)
    assert s["slot_precision"] == pytest.approx(3 / 4) and s["slot_recall"] == pytest.approx(3 / 4)
    assert score.errors == {"b:extra": 1, "c:missed": 1}
    assert score.add({"d": Gold(("the 11th",))}, {"d": Predicted("2019-03-11", text="the 11th")}) == 0.0
    assert score.summary()["joint_goal_accuracy_text_credited"] == pytest.approx(2 / 4)


def test_history_tokens_are_exact_line_sums():
    meter = HistoryMeter()
    lines = [("user", "I want a table for 2 at half past 11.\n"), ("assistant", "Which city?"), ("user", "你好，我想找家人均消费在100-150元的餐馆"),
             ("assistant", "  Sure!  "), ("user", "<context>not a tag</context> ok")]
    for role, text in lines:
        meter.add(role, text)
    assert meter.total == count_tokens("".join(meter.lines))
    assert meter.sizes()["window_5"] == meter.total
    assert contained(meter.texts()["window_5"], Gold(("100-150元",)))
    assert norm("San  Jose") == "sanjose"
    # The equal-token window: the newest whole lines within the given tokens, never more.
    last_two = meter.tokens[-1] + meter.tokens[-2]
    assert meter.equal_window(last_two) == (last_two, "".join(meter.normed[-2:]))
    assert meter.equal_window(last_two - 1)[0] == meter.tokens[-1]
    assert meter.equal_window(0) == (0, "") and meter.equal_window(10**6)[0] == meter.total


def test_percentile_interpolates():
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([5], 99) == 5 and percentile([], 50) == 0.0


def test_progress_writes_deciles_when_not_a_terminal():
    out = io.StringIO()
    with Progress("run", 20, "dialogues", stream=out) as bar:
        for _ in range(20):
            bar.advance()
    lines = out.getvalue().splitlines()
    assert len(lines) == 10 and lines[-1].startswith("run [") and "20/20 100%" in lines[-1]
