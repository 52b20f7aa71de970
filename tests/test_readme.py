"""Every Python example in the README runs, and its set-up commands are the ones CI uses."""

from __future__ import annotations

import re

from conftest import ROOT

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
