"""A non-editable install works: the wheel carries the bundled domains, rule packs, lexicons and
templates, and its entry points register the built-in stores and languages.

The wheel is built from this checkout and installed, without dependencies, into a fresh
virtualenv whose only other path is the dev environment's site-packages (for the third-party
dependencies, so no download happens). The checkout is not on that path: the package, its data
and its entry points can only come from the wheel. `demo` and `lint` then run in an empty
directory outside the checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import ROOT

def run(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """(bin directory of a fresh venv holding only the wheel, environment to run it in)."""
    base = tmp_path_factory.mktemp("wheel")
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", ROOT, "-w", base / "dist", cwd=base)
    assert built.returncode == 0, built.stderr
    wheel = next((base / "dist").glob("context_editor-*.whl"))
    venv = base / "venv"
    made = run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=base)
    assert made.returncode == 0, made.stderr
    bindir = venv / "bin"
    new_site = Path(run(bindir / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                        cwd=base).stdout.strip())
    # The dependencies come from the dev environment; its editable-install hooks (`.pth` files)
    # are not processed from a path added this way, so the checkout stays invisible.
    (new_site / "dev-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", "utf-8")
    got = run(sys.executable, "-m", "pip", "--python", bindir / "python", "install", "--no-deps", "-q", wheel, cwd=base)
    assert got.returncode == 0, got.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CONTEXT_EDITOR_STORE", "VIRTUAL_ENV")}
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    return bindir, env


def test_wheel_ships_the_data_and_runs_outside_the_checkout(installed, tmp_path):
    bindir, env = installed
    where = run(bindir / "python", "-c", "import context_editor, context_editor.resources as r; "
                "print(context_editor.__file__); print(r.rules_dir())", cwd=tmp_path, env=env)
    assert where.returncode == 0, where.stderr
    package, rules = where.stdout.split()
    assert not Path(package).is_relative_to(ROOT) and not Path(rules).is_relative_to(ROOT)
    demo = run(bindir / "context-editor", "demo", cwd=tmp_path, env=env)
    assert demo.returncode == 0, demo.stderr
    assert '<context action="place_order"' in demo.stdout and "budget_max" in demo.stdout
    assert (tmp_path / "context_editor.db").exists()  # the demo's default store, in the working directory
    lint = run(bindir / "context-editor", "lint", "travel", cwd=tmp_path, env=env)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_wheel_runs_test_on_a_domain_with_its_own_rules_outside_the_checkout(installed, tmp_path):
    """`context-editor test` from the wheel, on a domain with a rule pack and a gazetteer beside it."""
    bindir, env = installed
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "ids.yaml").write_text(
        "language: any\nrules:\n  - {id: member.id.any, pattern: '(?P<value>M-[0-9]{4})', parse: upper}\n", "utf-8")
    (tmp_path / "tiers.csv").write_text("gold,金卡|gold card\nsilver,银卡\n", "utf-8")
    (tmp_path / "club.yaml").write_text(
        "domain: club\nversion: 1\nlanguages: [en, zh]\nrule_packs: [./rules]\nfields:\n"
        "  member_id: {type: text, extract: [member.id]}\n  tier: {type: enum, gazetteer: ./tiers.csv}\n"
        "actions:\n  check: {fields: [member_id, tier]}\n", "utf-8")
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "one.yaml").write_text(
        "messages:\n  - user: 我的会员号是m-1234，金卡\nexpect:\n  state: {member_id: M-1234, tier: gold}\n", "utf-8")
    lint = run(bindir / "context-editor", "lint", "club.yaml", "--strict", cwd=tmp_path, env=env)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    tested = run(bindir / "context-editor", "test", "club.yaml", "cases", cwd=tmp_path, env=env)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "1 passed, 0 failed" in tested.stdout
