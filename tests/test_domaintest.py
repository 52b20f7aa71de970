"""`context-editor test`: failed expectations, per-round checks, junit, --compare and bad case files."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from context_editor.cli import main
from conftest import ROOT

ECOMMERCE = (ROOT / "domains" / "ecommerce.yaml").read_text("utf-8")
CASE = """\
id: black_then_red
lang: zh
messages:
  - user: 我想买耳机，要黑色
  - assistant: 好的
  - user: 改成红色吧
rounds:
  1: {state: {color: black}}
expect:
  state: {product: 耳机, color: red, user_intent: inquiry}
  phase: browsing
  alerts: []
"""


def write(tmp_path, case: str = CASE):
    d = tmp_path / "cases"
    d.mkdir(exist_ok=True)
    (d / "one.yaml").write_text(case, "utf-8")
    return d


def test_passing_case_with_round_phase_and_alert_checks(tmp_path, capsys):
    assert main(["test", "ecommerce", str(write(tmp_path))]) == 0
    assert "1 passed, 0 failed" in capsys.readouterr().out


def test_a_failed_expectation_exits_1_with_its_why_and_junit(tmp_path, capsys):
    cases = write(tmp_path, CASE.replace("color: red,", "color: blue,").replace("{color: black}", "{color: white}"))
    junit = tmp_path / "junit.xml"
    assert main(["test", "ecommerce", str(cases), "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    assert 'color: expected "blue", got "red"' in out
    assert "round 1: color: expected \"white\", got \"black\"" in out
    assert "via enum:color" in out  # the why names the extractor and the text
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "1" and suite.find("testcase/failure") is not None


def test_compare_shows_what_a_new_version_changes(tmp_path, capsys):
    old = tmp_path / "old.yaml"
    old.write_text(ECOMMERCE, "utf-8")
    new = tmp_path / "new.yaml"
    new.write_text(ECOMMERCE.replace("red: [", "red: [绯红, ", 1), "utf-8")
    cases = write(tmp_path, CASE.replace("改成红色吧", "改成绯红吧"))
    assert main(["test", str(new), str(cases), "--compare", str(old)]) == 0
    out = capsys.readouterr().out
    assert 'black_then_red: color: "black" -> "red"  [fixed]' in out
    assert "old: 0/1 passed, new: 1/1 passed" in out


def test_a_malformed_case_file_is_a_clear_error(tmp_path, capsys):
    cases = write(tmp_path, CASE.replace("  - assistant: 好的\n", "  - robot: 好的\n"))
    assert main(["test", "ecommerce", str(cases)]) == 2
    err = capsys.readouterr().err
    assert "one.yaml:5" in err and "unknown role 'robot'" in err and "fix:" in err
    assert main(["test", "ecommerce", str(tmp_path / "nowhere")]) == 2
    assert "no such directory" in capsys.readouterr().err
