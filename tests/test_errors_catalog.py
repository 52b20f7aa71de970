"""The error catalog: every code comes from `Errors`, the docs table is generated from it, and the
same situation reads the same way wherever it is met."""

from __future__ import annotations

import re
import string
import subprocess
import sys

import pytest

from conftest import ROOT, SAMPLE
from context_editor.cli import main
from context_editor.errors import ContextEditorError, Errors


def test_docs_table_is_current():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "errors_table.py"), "--check"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_no_code_is_written_outside_the_catalog():
    stray = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "context_editor").rglob("*.py")) if p.name != "errors.py"
             for n, line in enumerate(p.read_text("utf-8").splitlines(), 1) if re.search(r"CE\d{3}", line)]
    assert stray == []


@pytest.mark.parametrize("name", sorted(Errors.entries()))
def test_every_entry_formats_with_its_own_fields(name):
    entry = Errors.entries()[name]
    assert re.fullmatch(r"CE\d{3}", entry.code)
    fields = {f for text in (entry.message, entry.fix) for _, f, _, _ in string.Formatter().parse(text) if f}
    error = entry(**{f: f"<{f}>" for f in fields})
    assert isinstance(error, ContextEditorError) and error.code == entry.code
    assert str(error).startswith(f"[{entry.code}] ") and "\n  fix: " in str(error)


def test_one_no_session_error_everywhere(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    assert main(["ingest", "ecommerce", str(SAMPLE), "--session", "real", "--store", db]) == 0
    capsys.readouterr()
    seen = set()
    for command in (["state"], ["why", "budget_max"], ["render", "--action", "place_order"], ["replay"],
                    ["audit", "export"], ["audit", "verify"]):
        assert main([*command, "--session", "nope", "--store", db]) == 2, command
        err = capsys.readouterr().err
        seen.add(err.split("error: ", 1)[1])
    assert len(seen) == 1, seen
    message = seen.pop()
    assert "[CE501] no session 'nope'" in message and "known sessions: real" in message
    assert "context-editor sessions" not in message  # no such command
