"""The CLI contract of issue 2, run as a user runs it (a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import SAMPLE


def cli(*args: str, cwd=None, stdin: str | None = None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "context_editor", *args], capture_output=True, text=True,
                          cwd=cwd, input=stdin, env={**os.environ, **(env or {})}, timeout=120)


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("demo")
    out = cli("demo", cwd=d, env={"CONTEXT_EDITOR_STORE": ""})
    assert out.returncode == 0, out.stderr
    return d, out.stdout


def test_demo_uses_the_default_sqlite_file(demo_dir):
    d, stdout = demo_dir
    assert (d / "context_editor.db").exists()
    assert "budget_max" in stdout and "2000 CNY" in stdout
    for action in ("recommend_product", "place_order", "handle_complaint"):
        assert f'<context action="{action}"' in stdout


def test_stored_session_commands(demo_dir):
    d, _ = demo_dir
    state = json.loads(cli("state", "--session", "demo-1", "--json", cwd=d).stdout)
    assert state["fields"]["color"]["value"] == "black" and state["session"] == "demo-1"
    early = json.loads(cli("state", "--session", "demo-1", "--json", "--as-of-round", "3", cwd=d).stdout)
    assert "color" not in early["fields"] and early["fields"]["budget_max"]["value"]["amount"] == 2000
    xml = cli("render", "--session", "demo-1", "--action", "place_order", cwd=d).stdout
    assert ET.fromstring(xml).get("action") == "place_order"
    why = cli("why", "--session", "demo-1", "budget_max", cwd=d)
    assert why.returncode == 0 and "rule:money.budget.zh" in why.stdout and "round   3" in why.stdout


def test_demo_again_makes_a_new_session(demo_dir):
    d, _ = demo_dir
    out = cli("demo", cwd=d)
    assert out.returncode == 0 and "session demo-2" in out.stdout


def test_why_of_a_field_never_extracted_says_no_candidate(demo_dir):
    d, _ = demo_dir
    out = cli("why", "--session", "demo-1", "quantity", cwd=d)
    assert out.returncode == 0 and "no candidate" in out.stdout


def test_run_prints_state_json_and_context(tmp_path):
    out = cli("run", "ecommerce", str(SAMPLE), "--json")
    doc = json.loads(out.stdout)
    assert set(doc) == {"domain", "domain_version", "session", "round", "phase", "fields", "alerts"}
    bud = doc["fields"]["budget_max"]
    assert bud["value"] == {"amount": 2000, "currency": "CNY"}
    assert set(bud["provenance"]) == {"round", "message_index", "role", "span", "text", "extractor", "confidence"}
    assert set(bud["history"][0]) == {"value", "round", "status", "source", "reason"}
    xml = cli("run", "ecommerce", str(SAMPLE), "--action", "place_order", "--budget", "180").stdout
    root = ET.fromstring(xml)
    assert int(root.get("tokens")) <= 180 and root.find("truncated_context") is not None


def test_run_reads_stdin_and_openai_json():
    chat = json.dumps([{"role": "user", "content": "I want to buy headphones, black, budget is $300"}])
    out = cli("run", "ecommerce", "-", "--json", "--now", "2024-05-01T10:00:00", stdin=chat)
    assert out.returncode == 0, out.stderr
    fields = json.loads(out.stdout)["fields"]
    assert fields["budget_max"]["value"] == {"amount": 300, "currency": "USD"}
    assert fields["color"]["value"] == "black"


@pytest.mark.parametrize("args,needle", [
    (["run", "ecommerce", "missing.jsonl"], "file not found"),
    (["run", "nosuchdomain", str(SAMPLE)], "no domain file"),
    (["run", "ecommerce", str(SAMPLE), "--action", "fly"], "unknown action 'fly'"),
    (["run", "ecommerce", str(SAMPLE), "--action", "place_order", "--budget", "20"], "raise --budget"),
    (["state", "--session", "nope", "--store", "memory://"], "no session 'nope'"),
])
def test_errors_are_clear_and_exit_2(args, needle):
    out = cli(*args)
    assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr


def test_lint_reports_every_problem_with_lines(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "domain: shop\n"
        "version: 1\n"
        "fields:\n"
        "  budget:\n"
        "    type: money\n"
        "    extract: [money.nope]\n"
        "  colour:\n"
        "    type: enum\n"
        "    values: {red: [红色]}\n"
        "actions:\n"
        "  buy:\n"
        "    fields: [budget, color]\n"
        "    required: [size]\n", encoding="utf-8")
    out = cli("lint", str(bad))
    assert out.returncode == 1
    lines = out.stdout
    assert f"{bad}:6:" in lines and "unknown extraction rule 'money.nope'" in lines
    assert f"{bad}:12:" in lines and "unknown field 'color'" in lines
    assert f"{bad}:13:" in lines and "required field 'size'" in lines
    assert lines.count("\n  fix: ") == 3
    assert "did you mean 'colour'?" in lines


def test_lint_accepts_bundled_domain():
    out = cli("lint", "ecommerce")
    assert out.returncode == 0 and "ok" in out.stdout


def test_help_teaches():
    out = cli("--help")
    assert out.returncode == 0 and "examples:" in out.stdout and "demo" in out.stdout


def test_help_imports_no_pipeline_dependencies():
    # `--help` and usage errors must answer at once: the pipeline's dependencies (each 20-130 ms
    # to import), the data model and the registries' entry-point scan (importlib.metadata, with
    # the email package) load only inside the command that runs. A fresh process, as the console
    # script runs it.
    code = ("import sys; from context_editor.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = {'jsonschema', 'cn2an', 'jinja2', 'cryptography', 'tiktoken', 'pydantic', 'yaml', 'sqlite3',"
            " 'psycopg', 'regex', 'spacy', 'fastapi', 'email', 'dataclasses', 'importlib.metadata',"
            " 'context_editor.model', 'context_editor.pipeline', 'context_editor.store', 'context_editor.domain'}\n"
            "print(sorted(m for m in sys.modules if m in heavy or m.split('.')[0] in heavy), file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "usage: context-editor" in out.stdout and "Train a model" in out.stdout  # it printed the help
    assert out.stderr.strip().splitlines()[-1] == "[]"
