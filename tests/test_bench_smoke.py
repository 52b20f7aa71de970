"""The benchmark runners on a few real dialogues, so CI notices a broken benchmark; plus the
metrics they rest on. Full runs are `context-editor bench …` (benchmarks/README.md), not tests.

The datasets are read from ../shared/data relative to the repository; the runner tests skip,
saying where they looked, when it is absent.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from context_editor.bench.cli import register
from context_editor.bench.contexts import HistoryMeter
from context_editor.bench.metrics import DomainScore, Gold, Predicted, contained, norm, percentile, slot_score, token_sort_ratio
from context_editor.bench.progress import Progress
from context_editor.inject.tokens import count_tokens

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SGD_DIR = DATA / "sgd" / "dev"
CROSSWOZ_ZIP = DATA / "crosswoz" / "val.json.zip"
KEYS = {"dataset", "dialogues", "turns", "joint_goal_accuracy", "slot_precision", "slot_recall", "slot_f1", "per_domain",
        "tokens_median", "coverage", "ingest_ms_p50", "ingest_ms_p99", "render_ms_p50", "messages_per_s", "peak_rss_mb",
        "scaling_ratio"}
CONTEXTS = {"full_history", "window_5", "window_10", "editor"}


def _bench(tmp_path: Path, *argv: str) -> dict:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bench", *argv, "--out", str(tmp_path), "--scaling-rounds", "150"])
    assert args.func(args) == 0
    return json.loads((tmp_path / "results.json").read_text("utf-8"))


def _check(results: dict, tmp_path: Path) -> None:
    assert KEYS <= set(results)
    assert set(results["tokens_median"]) == set(results["coverage"]) == CONTEXTS
    assert 0 < results["joint_goal_accuracy"] <= 1 and 0 < results["slot_f1"] <= 1
    assert results["tokens_median"]["full_history"] > 0 and results["tokens_median"]["editor"] > 0
    assert results["ingest_ms_p50"] > 0 and results["messages_per_s"] > 0 and results["scaling_ratio"] > 0
    assert "| joint goal accuracy" in (tmp_path / "report.md").read_text("utf-8")


@pytest.mark.skipif(not SGD_DIR.exists(), reason=f"SGD dev split not found at {SGD_DIR}")
def test_sgd_runner_smoke(tmp_path):
    results = _bench(tmp_path, "sgd", "--data", str(SGD_DIR), "--limit", "3")
    _check(results, tmp_path)
    assert results["dataset"] == "sgd" and results["dialogues"] == 3
    assert "restaurants_2" in results["per_domain"]


@pytest.mark.skipif(not CROSSWOZ_ZIP.exists(), reason=f"CrossWOZ validation split not found at {CROSSWOZ_ZIP}")
def test_crosswoz_runner_smoke(tmp_path):
    results = _bench(tmp_path, "crosswoz", "--data", str(CROSSWOZ_ZIP), "--limit", "2")
    _check(results, tmp_path)
    assert results["dataset"] == "crosswoz" and results["dialogues"] == 2


def test_token_sort_ratio_follows_fuzzywuzzy():
    assert token_sort_ratio("San Jose", "san jose") == 1.0
    assert token_sort_ratio("New York City", "City New York") == 1.0  # token order does not matter
    assert token_sort_ratio("11:30 am", "11:30 pm") == 0.88
    assert token_sort_ratio("", "x") == 0.0


def test_slot_scores_by_kind():
    assert slot_score(Gold(("2",), "exact"), Predicted("2")) == 1.0
    assert slot_score(Gold(("today", "2019-03-01"), "fuzzy"), Predicted("2019-03-01", text="today")) == 1.0
    assert slot_score(Gold(("早餐服务 吹风机",), "set"), Predicted("吹风机, 早餐服务", items=("吹风机", "早餐服务"))) == 1.0
    assert slot_score(Gold(("１００-１５０元",), "exact"), Predicted("100-150元")) == 1.0  # full-width folds


def test_joint_goal_is_the_product_and_extras_count():
    score = DomainScore()
    assert score.add({"a": Gold(("x",))}, {"a": Predicted("x")}) == 1.0
    assert score.add({"a": Gold(("x",))}, {"a": Predicted("x"), "b": Predicted("y")}) == 0.0  # an extra slot
    assert score.add({"a": Gold(("x",)), "c": Gold(("z",))}, {"a": Predicted("x")}) == 0.0  # a missed slot
    s = score.summary()
    assert s["frames"] == 3 and s["joint_goal_accuracy"] == pytest.approx(1 / 3, abs=1e-4)
    assert s["slot_precision"] == pytest.approx(3 / 4) and s["slot_recall"] == pytest.approx(3 / 4)
    assert score.errors == {"b:extra": 1, "c:missed": 1}


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


def test_percentile_interpolates():
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([5], 99) == 5 and percentile([], 50) == 0.0


def test_progress_writes_deciles_when_not_a_terminal():
    out = io.StringIO()
    with Progress("run", 20, "dialogues", stream=out) as bar:
        for _ in range(20):
            bar.advance()
    lines = out.getvalue().splitlines()
    assert len(lines) == 10 and lines[-1].startswith("run [") and "20/20 100%" in lines[-1]
