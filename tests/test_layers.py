"""The import layers of DESIGN §4.1, checked by scripts/check_layers.py on every test run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "check_layers.py"
spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
assert spec and spec.loader
check_layers = sys.modules["check_layers"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_layers)


def test_the_package_keeps_its_layers():
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stdout


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")


def test_each_kind_of_violation_is_found(tmp_path):
    write(tmp_path, {
        "context_editor/__init__.py": "",
        "context_editor/model.py": "from .pipeline import ContextEditor\n",  # base -> pipeline: up
        "context_editor/domain/__init__.py": "from ..store import open_store\n",  # domain -> store: up
        "context_editor/extract/__init__.py": "def f():\n    from ..inject import render\n",  # stage -> stage, lazily
        "context_editor/inject/__init__.py": "from context_editor.lang import detect_language\n",  # fine
        "context_editor/lang/__init__.py": "",
        "context_editor/store/__init__.py": "",
        "context_editor/pipeline.py": "from . import cli\n",  # pipeline -> face: up
        "context_editor/cli.py": "from .bench.cli import register\n",  # refused: bench at start-up
        "context_editor/bench/__init__.py": "",
        "context_editor/gizmo.py": "",  # no layer
        "benchmarks/eval.py": "import sys\nsys.path.insert(0, 'tests/golden')\n",
    })
    found = {(v.importer, v.imported) for v in check_layers.violations(tmp_path)}
    assert found == {("model", "pipeline"), ("domain", "store"), ("extract", "inject"), ("pipeline", "cli"),
                     ("cli", "bench"), ("gizmo", "-"), ("eval", "tests/golden")}
