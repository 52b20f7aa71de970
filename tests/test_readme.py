"""Every Python example in the README runs, and its set-up commands are the ones CI uses."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT
from service_server import free_port

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_python_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(blocks) >= 2
    namespace: dict = {}  # later examples build on earlier ones, as a reader's session would
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)


def test_ci_runs_the_readme_test_command():
    setup = re.search(r"```bash\n(.*?)```", README, re.S).group(1).strip().splitlines()
    assert setup[0].endswith("context-editor demo") and setup[1].endswith("python -m pytest")
    assert setup[1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def _bash_block(containing: str) -> str:
    return next(b for b in re.findall(r"```bash\n(.*?)```", README, re.S) if containing in b)


def test_service_examples_run(tmp_path):
    """The two lines that run the service and every curl example, as written (on a free port),
    against the real service; each curl fails the script on an HTTP error (-f)."""
    run, calls = _bash_block("context-editor serve"), _bash_block("curl ")
    assert len(run.strip().splitlines()) == 2 and len(re.findall(r"^curl ", calls, re.M)) >= 10
    port = str(free_port())
    run, calls = run.replace("8300", port), calls.replace("8300", port)
    (tmp_path / "domains").symlink_to(ROOT / "domains")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    keys_line, serve_line = run.strip().splitlines()
    subprocess.run(["bash", "-c", keys_line], cwd=tmp_path, env=env, check=True, capture_output=True)
    server = subprocess.Popen(["bash", "-c", f"exec {serve_line}"], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            if subprocess.run(["curl", "-sf", f"http://127.0.0.1:{port}/healthz"], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        out = subprocess.run(["bash", "-c", "set -euo pipefail\n" + calls], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr + out.stdout
    finally:
        server.terminate()
        server.wait(timeout=10)
    for marker in ('"added":1', '"budget_max"', '<context action=\\"place_order\\"', '"rule:money.budget.zh"',
                   '"type": "edit"', '"ok":true', '"ecommerce"', '"problems":[]', "context_editor_requests_total",
                   '"status":"ok"'):
        assert marker in out.stdout, marker
