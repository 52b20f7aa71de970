"""mypy --strict over the package (configured in pyproject.toml), as part of the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_is_strictly_typed():
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, f"mypy --strict found errors:\n{out.stdout}{out.stderr}"
