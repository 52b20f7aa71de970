"""The whole NER loop on a tiny fixture, offline, in seconds: train -> a domain uses the model ->
extraction with provenance -> replay identical; plus the training input's error contract and the
rule-vs-model policy."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from context_editor import ContextEditor, load_domain
from context_editor.audit import replay
from context_editor.domain import lint_domain
from context_editor.domain.kinds import accepts, served_label, train_label, value_kind, with_subject
from context_editor.domain.nermodel import model_hash, model_info
from context_editor.extract.ner import outrank
from context_editor.model import Candidate, Provenance
from context_editor.store import open_store
from context_editor.train.calibrate import monotone
from context_editor.train.corpus import TrainingDataError, read_examples
from context_editor.train.ner import TrainOptions, train_ner

FIXTURE = Path(__file__).parent / "fixtures" / "ner_tiny.jsonl"
TINY = TrainOptions(max_epochs=20, patience=20, width=32, depth=2, embed=500, hidden=32, seed=7, batch_words=40)
DOMAIN = """\
domain: trip
version: 1
languages: [en]
ner: {model: ./models/tiny}
fields:
  destination:
    type: text
    extract: [slot.place.to, ner.PLACE]
  traveller:
    type: text
    extract: [ner.PERSON]
actions:
  plan: {fields: [destination, traveller]}
"""


def _train(out: Path, opts: TrainOptions = TINY) -> Path:
    examples = read_examples("golden", FIXTURE)
    train_ner(examples, out, opts, command="pytest", data={"format": "golden", "path": str(FIXTURE), "examples": len(examples)})
    return out


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return _train(tmp_path_factory.mktemp("ner") / "tiny")


def _domain(tmp_path: Path, model: Path, text: str = DOMAIN) -> Path:
    (tmp_path / "models").mkdir(exist_ok=True)
    shutil.copytree(model, tmp_path / "models" / "tiny", dirs_exist_ok=True)
    path = tmp_path / "trip.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_training_writes_a_model_with_its_card_and_is_deterministic(tiny_model, tmp_path):
    card = json.loads((tiny_model / "card.json").read_text("utf-8"))
    assert card["labels"] == ["PERSON", "PLACE"] and card["lang"] == "en" and card["seed"] == 7
    assert card["hash"] == model_hash(tiny_model) and card["size_bytes"] > 0 and card["command"] == "pytest"
    assert set(card["held_out"]["per_label"]) <= {"PERSON", "PLACE"} and card["data"]["held_out_examples"] >= 1
    readme = (tiny_model / "README.md").read_text("utf-8")
    assert "Held-out scores" in readme and "Rebuild:** `pytest`" in readme
    assert model_hash(_train(tmp_path / "again")) == card["hash"]  # same data and seed: the same weights


def test_a_domain_uses_the_model_with_provenance_and_replays_identically(tiny_model, tmp_path):
    path = _domain(tmp_path, tiny_model)
    domain = load_domain(path)
    info = model_info(tmp_path / "models" / "tiny")
    assert domain.ner_models["en"].hash == info.hash
    db = tmp_path / "s.db"
    editor = ContextEditor(domain, f"sqlite:///{db}")
    text = "Anna Smith is travelling to Madrid next week"
    state = editor.ingest("s1", [{"role": "user", "content": text, "timestamp": "2024-05-01T10:00:00"}])
    assert state.get("traveller") == "Anna Smith"
    p = state.fields["traveller"].provenance
    assert p.extractor == f"ner:tiny@{info.hash[:12]}:PERSON" and text[p.span[0]:p.span[1]] == "Anna Smith"
    assert 0.5 <= p.confidence <= 1.0 and p.domain_version == domain.version_hash
    assert state.get("destination") == "Madrid"
    store = open_store(f"sqlite:///{db}")
    assert replay(store, "s1").identical


def test_a_retrained_model_is_a_new_domain_version_and_replay_says_so(tiny_model, tmp_path):
    path = _domain(tmp_path, tiny_model)
    before = load_domain(path)
    db = tmp_path / "s.db"
    ContextEditor(before, f"sqlite:///{db}").ingest(
        "s1", [{"role": "user", "content": "Book a hotel in Oslo for Tom Baker", "timestamp": "2024-05-01T10:00:00"}])
    _train(tmp_path / "models" / "tiny", TrainOptions(**{**TINY.__dict__, "seed": 8}))
    after = load_domain(path)
    assert after.ner_models["en"].hash != before.ner_models["en"].hash and after.version_hash != before.version_hash
    report = replay(open_store(f"sqlite:///{db}"), "s1")
    assert not report.identical and report.first_difference


def test_a_span_several_fields_could_take_goes_to_the_asked_one_only(tiny_model, tmp_path):
    """A PERSON span says what it is, not whether it is the traveller or the contact: neither
    field takes it unprompted; after the assistant asks for one, that one does."""
    two = DOMAIN.replace("actions:", "  contact:\n    type: text\n    extract: [ner.PERSON]\nactions:")
    editor = ContextEditor(load_domain(_domain(tmp_path, tiny_model, two)), "memory://")
    said = {"role": "user", "content": "Anna Smith is travelling to Madrid next week", "timestamp": "2024-05-01T10:00:00"}
    state = editor.ingest("s1", [said])
    assert state.get("traveller") is None and state.get("contact") is None and state.get("destination") == "Madrid"
    asked = {"role": "assistant", "content": "Who should we contact?", "asks": ["contact"], "timestamp": "2024-05-01T10:00:00"}
    state = editor.ingest("s2", [asked, {**said, "content": "Anna Smith"}])
    assert state.get("contact") == "Anna Smith" and state.get("traveller") is None
    assert state.fields["contact"].provenance.extractor.startswith("ner:tiny@")


def test_domain_lint_checks_model_and_labels(tiny_model, tmp_path):
    path = _domain(tmp_path, tiny_model, DOMAIN.replace("ner.PERSON", "ner.TITLE"))
    problems = lint_domain(path)[1]
    assert [p.code for p in problems] == ["CE106"] and "ner.TITLE" in problems[0].message and problems[0].line == 11
    path.write_text(DOMAIN.replace("./models/tiny", "./models/missing"), encoding="utf-8")
    problems = lint_domain(path)[1]
    assert [p.code for p in problems] == ["CE601"] and problems[0].line == 4


def test_models_load_lazily(tiny_model, tmp_path):
    import context_editor.extract.ner as ner

    path = _domain(tmp_path, tiny_model)
    ner._trained.pop(model_info(tmp_path / "models" / "tiny").path, None)
    editor = ContextEditor(load_domain(path), "memory://")
    assert model_info(tmp_path / "models" / "tiny").path not in ner._trained  # loading a domain loads no weights
    editor.ingest("s", [{"role": "user", "content": "hello", "timestamp": "2024-05-01T10:00:00"}])
    assert model_info(tmp_path / "models" / "tiny").path in ner._trained


@pytest.mark.parametrize("content, line, words", [
    (None, None, "no such file"),
    ('{"text": "Fly to Paris", "spans": [{"start": 7, "end": 12, "label": "PLACE"}]}\n'
     '{"text": "Fly to Rome", "spans": [{"start": 6, "end": 10, "label": "PLACE", "text": "Rome"}]}\n', 2, "covers"),
    ('{"text": "Fly to Paris", "spans": [{"start": 7, "end": 40, "label": "PLACE"}]}\n', 1, "outside the text"),
    ('{"text": "Fly to Paris", "spans": []}\n\n{"text": "Hello", "spans": []}\n', None, "empty label set"),
    ('{"text": "Fly", "spans": [{"start": 0, "end": 3}]}\n', 1, "label"),
    ('not json\n', 1, "JSON"),
])
def test_bad_training_input_is_a_clear_error_and_writes_nothing(tmp_path, capsys, content, line, words):
    from context_editor.cli import main

    data = tmp_path / "data.jsonl"
    if content is not None:
        data.write_text(content, encoding="utf-8")
    out = tmp_path / "model"
    assert main(["train", "ner", "--format", "golden", str(data), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "[CE900]" in err and words in err and "fix:" in err and "Traceback" not in err
    assert f"{data}:{line}:" in err if line else str(data) in err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == (["data.jsonl"] if content else [])


def test_kinds_are_read_from_names_and_descriptions_without_dataset_names():
    siblings = [("origin", "City of origin"), ("destination", "Destination city"), ("check_in_date", ""), ("check_out_date", "")]
    assert value_kind("origin", "City of origin", siblings) == "PLACE.FROM"
    assert value_kind("destination", "Destination city", [("destination", "")]) == "PLACE"  # no origin: no role
    assert value_kind("check_out_date", "", siblings) == "DATE.END"
    assert value_kind("song_title", "Name of the song") == "TITLE"
    # the subject stays in the label: every domain reads every message, so a plain RATING span would
    # fill the hotel's, the restaurant's and the attraction's rating at once (measured: CrossWOZ 0.132 -> 0.008)
    assert value_kind("hotel_name", "Name of the hotel") == "VENUE.HOTEL" and value_kind("评分", "酒店") == "RATING.HOTEL"
    assert value_kind("目的地", "出租", [("出发地", "出租"), ("目的地", "出租")]) == "PLACE.TO"
    assert value_kind("wibble", "Something else") is None
    assert accepts("PLACE", "PLACE.TO") and not accepts("PLACE.TO", "PLACE") and not accepts("PLACE", "PLACEMENT")
    assert served_label("PLACE.TO", ["PLACE", "TITLE"]) == "PLACE" and served_label("TITLE", ["PLACE"]) is None


def test_a_model_learns_plain_kinds_and_a_span_takes_the_subject_its_message_names():
    assert train_label("RATING.HOTEL") == "RATING" and train_label("PLACE.TO") == "PLACE.TO"
    assert served_label("RATING.HOTEL", ["RATING", "TITLE"]) == "RATING.HOTEL"  # the subject comes from the message
    assert with_subject("RATING", "这家酒店的评分是多少？") == "RATING.HOTEL"
    assert with_subject("MONEY", "the restaurant is cheap") == "MONEY.RESTAURANT"
    assert with_subject("RATING", "评分4分以上的") == "RATING"  # no subject named: no subject field takes it
    assert with_subject("RATING", "酒店和餐馆的评分") == "RATING"  # two named: neither
    assert with_subject("PLACE", "a hotel in Oslo") == "PLACE" and not accepts("RATING.HOTEL", "RATING")


def _cand(extractor: str, conf: float, span: tuple[int, int]) -> Candidate:
    return Candidate("f", "v", Provenance(0, 1, "user", span, "v", extractor, conf, "x", "m"))


def test_a_rule_hit_outranks_a_model_span_unless_the_model_is_surer_by_the_margin():
    rule = _cand("rule:r", 0.9, (0, 5))
    near = _cand("ner:m@h:PLACE", 0.94, (0, 5))
    sure = _cand("ner:m@h:PLACE", 0.99, (2, 8))
    elsewhere_rule = _cand("rule:r", 0.9, (20, 25))
    assert outrank([rule], [near], 0.05) == [rule]  # not surer by more than the margin: the rule stands
    assert outrank([rule, elsewhere_rule], [sure], 0.05) == [elsewhere_rule, sure]  # the overlapped rule hit gives way
    assert outrank([], [near], 0.05) == [near] and outrank([rule], [], 0.05) == [rule]
    exact = _cand("enum:f", 0.9, (30, 35))
    assert outrank([exact], [sure], 0.05) == [exact]  # the field's own vocabulary outranks any model span of it


def test_spans_are_calibrated_on_the_held_out_split_and_poor_labels_are_not_served(tiny_model, tmp_path):
    card = json.loads((tiny_model / "card.json").read_text("utf-8"))
    cal = json.loads((tiny_model / "calibration.json").read_text("utf-8"))
    assert card["calibration"] == cal and cal["min_f1"] == TINY.min_f1
    info = model_info(tiny_model)
    for label, c in cal["labels"].items():
        assert c["served"] == (label in info.served) == (c["gold"] > 0 and c["f1"] >= TINY.min_f1)
        assert c["precision"] == sorted(c["precision"]) and all(0 < x < 1 for x in c["precision"])  # smoothed, monotone
        if c["served"]:  # a span's confidence is its bin's held-out precision, not the beam's probability
            assert info.confidence(label, 0.999) == c["precision"][-1] and info.confidence(label, 0.4) is None
    assert info.confidence("NOT_A_LABEL", 0.999) is None
    # The calibration is part of the model: a model that serves nothing is another model, and finds nothing.
    strict = _train(tmp_path / "strict", TrainOptions(**{**TINY.__dict__, "min_f1": 1.01}))
    assert model_hash(strict) != card["hash"] and model_info(strict).served == ()
    path = _domain(tmp_path, strict)
    state = ContextEditor(load_domain(path), "memory://").ingest(
        "s", [{"role": "user", "content": "Anna Smith is travelling to Madrid", "timestamp": "2024-05-01T10:00:00"}])
    assert state.get("traveller") is None and state.get("destination") == "Madrid"  # the rule still finds the place


@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0.1, 10)), min_size=1, max_size=8))
def test_pool_adjacent_violators_ismonotone_and_keeps_the_weighted_mean(pairs):
    values, weights = [v for v, _ in pairs], [w for _, w in pairs]
    out = monotone(values, weights)
    assert len(out) == len(values) and all(a <= b + 1e-9 for a, b in zip(out, out[1:]))
    assert sum(o * w for o, w in zip(out, weights)) == pytest.approx(sum(v * w for v, w in zip(values, weights)))


SGD_DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "sgd" / "dev"


@pytest.mark.skipif(not SGD_DEV.is_dir(), reason=f"SGD dev split not found at {SGD_DEV}")
def test_bench_with_a_model_runs_the_ablation_in_one_run(tiny_model, tmp_path):
    import argparse

    from context_editor.bench.cli import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bench", "sgd", "--data", str(SGD_DEV), "--limit", "3", "--ner", str(tiny_model),
                              "--out", str(tmp_path), "--scaling-rounds", "150"])
    assert args.func(args) == 0
    results = json.loads((tmp_path / "results.json").read_text("utf-8"))
    modes = results["ablation"]["modes"]
    assert list(modes) == ["rules", "ner", "both"] and all(0 <= m["joint_goal_accuracy"] <= 1 for m in modes.values())
    assert results["ablation"]["model"]["hash"] == model_hash(tiny_model) and results["ablation"]["model"]["load_seconds"] > 0
    both = (tmp_path / "domains-both" / "restaurants_2.yaml").read_text("utf-8")
    assert "ner:" in both and "ner.PLACE" in both  # the model's labels, through the kind mapping
    assert "ner." not in (tmp_path / "domains-rules" / "restaurants_2.yaml").read_text("utf-8")
    assert "slot.name" not in (tmp_path / "domains-ner" / "restaurants_2.yaml").read_text("utf-8")
    assert "Ablation" in (tmp_path / "report.md").read_text("utf-8")


def test_a_domain_loading_its_model_does_not_import_torch(tiny_model):
    """thinc imports PyTorch whenever it is installed (the suite has it, through sentence-transformers):
    1.2 s of a first model load, for a CNN pipeline that never uses it. A fresh process that loads a
    model and reads a message has not imported torch, and can still import it afterwards."""
    pytest.importorskip("torch")
    code = ("import sys; from context_editor.domain.nermodel import model_info; "
            "from context_editor.extract.ner import scored_spans; scored_spans(model_info(sys.argv[1]), 'fly to Boston'); "
            "print('torch' in sys.modules); import torch; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tiny_model)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
