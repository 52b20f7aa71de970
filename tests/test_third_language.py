"""A third language added as data only: Spanish (tests/fixtures/lang_es), registered through an
entry point of a distribution the test installs, passes a golden conversation."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import ROOT
from context_editor import ContextEditor, lang
from context_editor.domain import lint_domain, load_domain
from context_editor.domaintest import load_cases, run_case
from context_editor.extract.dates import find_dates
from context_editor.extract.numbers import find_money

FIXTURE = ROOT / "tests" / "fixtures" / "lang_es"


@pytest.fixture
def spanish(tmp_path: Path) -> Iterator[Path]:
    """Install ce_lang_es the way pip does (package + .dist-info with its entry point) on sys.path."""
    site = tmp_path / "site"
    shutil.copytree(FIXTURE / "ce_lang_es", site / "ce_lang_es")
    info = site / "ce_lang_es-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ce-lang-es\nVersion: 0.1\n", "utf-8")
    (info / "entry_points.txt").write_text("[context_editor.languages]\nes = ce_lang_es\n", "utf-8")
    (info / "RECORD").write_text("", "utf-8")
    sys.path.insert(0, str(site))
    lang.reset()
    try:
        yield site
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("ce_lang_es", None)
        lang.reset()


def test_spanish_golden_conversation(spanish):
    """The conversation runs as `context-editor test viaje.yaml cases/` would run it."""
    (case,) = load_cases(FIXTURE / "cases")
    result = run_case(load_domain(FIXTURE / "viaje.yaml"), case)
    assert not result.failures, [(m.what, m.expected, m.got, m.why) for m in result.failures]
    assert case.expect.state and case.expect.state["budget_max"] == {"amount": 900, "currency": "EUR"}


def test_spanish_from_the_cli(spanish):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(spanish), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "context_editor", "test", str(FIXTURE / "viaje.yaml"), str(FIXTURE / "cases")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_spanish_is_detected_and_asked_in_spanish(spanish):
    assert lang.detect_language("Hola, quiero viajar a Lisboa") == "es"
    assert lang.detect_language("I want to fly to Lisbon") == "en" and lang.detect_language("我想去里斯本") == "zh"
    editor = ContextEditor(str(FIXTURE / "viaje.yaml"), "memory://")
    editor.add("s", {"role": "user", "content": "Hola, quiero viajar a Lisboa", "timestamp": "2024-04-30T10:00:00+02:00"})
    assert "¿Cuál es su presupuesto?" in editor.render("s", "reservar").xml


def test_spanish_words_reach_the_finders(spanish):
    now = dt.datetime(2024, 4, 30, 10, 0)  # a Tuesday
    assert [(d.text, d.value) for d in find_dates("salgo el 10 de mayo de 2025", now)] == [("10 de mayo de 2025", dt.date(2025, 5, 10))]
    assert [d.value for d in find_dates("vuelvo el viernes", now)] == [dt.date(2024, 5, 3)]
    assert [d.value for d in find_dates("pasado mañana", now)] == [dt.date(2024, 5, 2)]
    assert [(m.amount, m.currency, m.bound) for m in find_money("hasta 900 euros")] == [(900, "EUR", "max")]


def test_without_the_package_spanish_is_unknown(tmp_path):
    lang.reset()
    assert "es" not in [x.code for x in lang.languages()]
    assert find_money("hasta 900 euros")[0].bound is None  # "hasta" is no Spanish bound cue without Spanish
    _, problems = lint_domain(FIXTURE / "viaje.yaml")
    assert any("language 'es' is not registered" in p.message for p in problems)
