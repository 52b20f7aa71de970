"""Extension points: a package installed next to context-editor adds a store reachable from the
CLI by its URL scheme, or an extractor a domain names in `extract:`, with no change to
context-editor (entry points, as a pip install writes them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAMPLE
from context_editor import ContextEditor, registry
from context_editor.domain import lint_domain
from context_editor.errors import ContextEditorError, StoreError
from context_editor.store import open_store

STORE_PACKAGE = '''
"""A third-party store: SQLite files addressed as lite://<path>."""
from context_editor.store.sqlite import SQLiteStore


class LiteStore(SQLiteStore):
    pass


def from_url(url, create=True):
    return LiteStore(url.split("://", 1)[1], create=create)
'''


def install_package(site: Path, name: str, module: str, entry_points: str) -> None:
    """What `pip install` leaves behind: the module and a .dist-info with its entry points."""
    (site / f"{name}.py").write_text(module, "utf-8")
    info = site / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", "utf-8")
    (info / "entry_points.txt").write_text(entry_points, "utf-8")
    (info / "RECORD").write_text("", "utf-8")


@pytest.fixture
def lite_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    install_package(site, "ce_lite_store", STORE_PACKAGE, "[context_editor.stores]\nlite = ce_lite_store:from_url\n")
    return site


def test_builtin_stores_are_registered_like_any_other():
    assert {"memory", "sqlite", "file", "postgresql", "postgres"} <= set(registry.stores.names())
    assert type(open_store("memory://")).__name__ == "MemoryStore"


def test_unknown_scheme_names_the_registered_ones():
    with pytest.raises(StoreError) as err:
        open_store("nosuch://x")
    assert "registered: " in str(err.value) and "memory" in str(err.value) and "fix:" in str(err.value)


def test_unknown_registry_name_is_a_coded_error():
    with pytest.raises(ContextEditorError, match=r"\[CE010\] no tokenizer 'nope' is registered"):
        registry.tokenizers.get("nope")


def test_third_party_store_from_the_cli(lite_site: Path, tmp_path: Path):
    db = tmp_path / "lite.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(lite_site), os.environ.get("PYTHONPATH", "")])}
    env.pop("CONTEXT_EDITOR_STORE", None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "context_editor", *args, "--store", f"lite://{db}"],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)

    ingest = cli("ingest", "ecommerce", str(SAMPLE), "--session", "s1")
    assert ingest.returncode == 0, ingest.stderr
    assert db.exists()  # the third-party store wrote its own file
    state = cli("state", "--session", "s1", "--json")
    assert state.returncode == 0, state.stderr
    assert '"budget_max"' in state.stdout
    verify = cli("audit", "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr


EXTRACTOR_PACKAGE = '''
"""A third-party extractor: words written in capitals (NYC, SFO) labelled WORD."""
import re

confidence = 0.6


def spans(text):
    return [(m.start(), m.end(), m.group(), "WORD") for m in re.finditer(r"\\b[A-Z]{2,}\\b", text)]


spans.confidence = confidence
'''

CAPS_DOMAIN = """domain: caps
version: 1
languages: [en]
fields:
  office:
    type: text
    extract: [caps.WORD]
actions:
  ship: {fields: [office]}
"""


@pytest.fixture
def caps_extractor(tmp_path: Path):
    site = tmp_path / "site"
    site.mkdir()
    install_package(site, "ce_caps", EXTRACTOR_PACKAGE, "[context_editor.extractors]\ncaps = ce_caps:spans\n")
    sys.path.insert(0, str(site))
    try:
        yield site
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("ce_caps", None)
        registry.extractors.unregister("caps")


def test_third_party_extractor_named_in_a_domain(caps_extractor, tmp_path: Path):
    domain = tmp_path / "caps.yaml"
    domain.write_text(CAPS_DOMAIN, "utf-8")
    assert lint_domain(domain)[1] == []
    editor = ContextEditor(str(domain), "memory://")
    editor.add("s", {"role": "user", "content": "please ship it to the NYC office", "timestamp": "2024-05-01T10:00:00+00:00"})
    assert editor.state("s").get("office") == "NYC"
    provenance = editor.why("s", "office")["provenance"]
    assert provenance["extractor"] == "caps:WORD" and provenance["confidence"] == 0.6 and provenance["text"] == "NYC"


def test_without_the_extractor_its_refs_are_unknown(tmp_path: Path):
    domain = tmp_path / "caps.yaml"
    domain.write_text(CAPS_DOMAIN, "utf-8")
    problems = lint_domain(domain)[1]
    assert [p.code for p in problems] == ["CE106"] and "caps.WORD" in problems[0].message


COMMAND_PACKAGE = '''
"""A third-party CLI command: `context-editor hello NAME`."""


def register(sub):
    p = sub.add_parser("hello", help="Greet someone.")
    p.add_argument("name")
    p.set_defaults(func=lambda args: print(f"hello {args.name}") or 0)
'''


def test_third_party_command_from_the_cli(tmp_path: Path):
    # Built-in commands and `--help` never scan the installed packages' entry points (start-up);
    # a command line naming another command does, and runs it.
    site = tmp_path / "site"
    site.mkdir()
    install_package(site, "ce_hello", COMMAND_PACKAGE, "[context_editor.commands]\nhello = ce_hello:register\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "context_editor", "hello", "world"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert run.returncode == 0 and run.stdout == "hello world\n", run.stderr
    typo = subprocess.run([sys.executable, "-m", "context_editor", "helo"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert typo.returncode == 2 and "'hello'" in typo.stderr  # argparse lists every command, the third party's too


def test_own_commands_table_matches_the_entry_points():
    # `registry.OWN_COMMANDS` lists this package's commands for `--help` without reading metadata:
    # it must say what pyproject.toml registers, with the help each command's parser carries.
    import argparse
    from importlib.metadata import entry_points

    ours = {ep.name for ep in entry_points(group="context_editor.commands") if ep.value.startswith("context_editor.")}
    assert ours == set(registry.OWN_COMMANDS)
    for name, help_ in registry.OWN_COMMANDS.items():
        sub = argparse.ArgumentParser().add_subparsers()
        registry.commands.get(name)(sub)
        assert {a.dest: a.help for a in sub._choices_actions}[name] == help_
