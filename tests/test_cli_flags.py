"""CLI global options anywhere on the line; read-only commands never create a store."""

from __future__ import annotations

import json
import sqlite3

import pytest

from conftest import SAMPLE
from context_editor.cli import main


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A SQLite store with one tenant-keyed session of the sample conversation."""
    db = tmp_path_factory.mktemp("flags") / "s.db"
    assert main(["--store", str(db), "--tenant", "acme", "ingest", "ecommerce", str(SAMPLE), "--user", "u1",
                 "--session", "s1", "--now", "2024-05-01T10:00:00+08:00"]) == 0
    return db


@pytest.mark.parametrize("argv", [
    ["--store", "{db}", "--tenant", "acme", "--user", "u1", "state", "--session", "s1", "--json"],
    ["state", "--session", "s1", "--json", "--store", "{db}", "--tenant", "acme", "--user", "u1"],
    ["--tenant", "acme", "state", "--store", "{db}", "--session", "s1", "--user", "u1", "--json"],
    ["--allow-plugins", "state", "--session", "s1", "--json", "--store", "{db}", "--tenant", "acme", "--user", "u1"],
    ["state", "--allow-plugins", "--session", "s1", "--json", "--store", "{db}", "--tenant", "acme", "--user", "u1"],
])
def test_global_options_before_or_after_the_command(stored, capsys, argv):
    assert main([a.format(db=stored) for a in argv]) == 0
    state = json.loads(capsys.readouterr().out)
    assert state["session"] == "acme/u1/s1" and state["fields"]["color"]["value"] == "black"


def test_global_options_reach_nested_subcommands(stored, capsys):
    assert main(["audit", "verify", "--store", str(stored)]) == 0
    assert main(["--store", str(stored), "audit", "export", "--session", "s1", "--tenant", "acme", "--user", "u1"]) == 0
    assert "acme/u1/s1" in capsys.readouterr().out


def test_a_value_before_the_command_is_not_reset_by_the_command(stored, capsys):
    # argparse's subparsers used to overwrite a pre-command --store with their own default (None).
    assert main(["--store", str(stored), "--tenant", "acme", "--user", "u1", "why", "--session", "s1", "color"]) == 0
    assert "color = \"black\"" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["state", "--session", "s1"],
    ["render", "--session", "s1", "--action", "place_order"],
    ["why", "--session", "s1", "color"],
    ["audit", "verify"],
    ["audit", "export", "--session", "s1"],
    ["replay", "--session", "s1"],
])
def test_read_only_commands_never_create_a_store(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CONTEXT_EDITOR_STORE", raising=False)
    missing = tmp_path / "sub" / "absent.db"
    assert main([*argv, "--store", str(missing)]) == 2
    assert main(argv) == 2  # the default ./context_editor.db
    err = capsys.readouterr().err
    assert "[CE504] no store at" in err and "fix:" in err
    assert list(tmp_path.rglob("*")) == []


def test_a_missing_domain_row_is_a_clear_error(tmp_path, capsys):
    db = tmp_path / "s.db"
    assert main(["ingest", "ecommerce", str(SAMPLE), "--session", "s1", "--store", str(db)]) == 0
    with sqlite3.connect(db) as c:
        c.execute("DELETE FROM domains")
    for argv in (["state", "--session", "s1"], ["replay", "--session", "s1"]):
        assert main([*argv, "--store", str(db)]) == 2
        err = capsys.readouterr().err
        assert "[CE503]" in err and "missing from" in err and "fix:" in err and "Traceback" not in err
