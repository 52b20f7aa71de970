"""Lint on a corpus of broken domain files (tests/lint_corpus/*.yaml): each file ends with the
findings lint must report (`# expect: CODE LINE words`), and no message or fix may contain the
schema library's wording: an author reads plain words about their file, never validator jargon."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from context_editor.cli import main
from context_editor.domain import lint_domain

CORPUS = sorted((Path(__file__).parent / "lint_corpus").glob("*.yaml"))
EXPECT = re.compile(r"^# expect: (CE\d{3}) (\d+) (.+)$", re.M)
# Phrases of jsonschema's messages (and of its error repr); none may reach an author.
SCHEMA_WORDING = ("is not valid under any of the given schemas", "is not of type", "is a required property",
                  "Additional properties", "was unexpected", "does not match", "is too short", "non-unique elements",
                  "is not one of", "should be non-empty", "is less than the minimum", "is valid under each of",
                  "Failed validating", "On instance", "$defs", "$ref", "jsonschema", "additionalProperties",
                  "oneOf", "anyOf", "minItems", "propertyNames")


def test_the_corpus_is_big_enough():
    assert len(CORPUS) >= 25


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_lint_says_what_the_file_expects(path):
    expected = EXPECT.findall(path.read_text("utf-8"))
    assert expected, f"{path.name} states no expectation"
    problems = lint_domain(path)[1]
    for code, line, words in expected:
        hits = [p for p in problems if p.code == code and p.line == int(line) and words in f"{p.message} {p.fix}"]
        assert hits, f"{path.name}: expected {code} on line {line} saying {words!r}; got " + "; ".join(
            f"{p.code}@{p.line}: {p.message} / fix: {p.fix}" for p in problems)
    for p in problems:
        assert p.fix, f"{path.name}: {p.message} has no fix"
        text = f"{p.message} {p.fix}"
        assert not [w for w in SCHEMA_WORDING if w in text], f"{path.name}: schema wording in {text!r}"


def test_strict_turns_warnings_into_errors(capsys):
    warned = next(p for p in CORPUS if p.stem == "unknown_key_typo")
    assert main(["lint", str(warned)]) == 0
    out = capsys.readouterr().out
    assert "warning [CE120]" in out and "1 warning(s)" in out
    assert main(["lint", str(warned), "--strict"]) == 1
    assert "--strict" in capsys.readouterr().err


def test_structure_and_reference_problems_come_in_one_pass():
    path = next(p for p in CORPUS if p.stem == "structure_and_references_together")
    codes = {p.code for p in lint_domain(path)[1]}
    assert {"CE104", "CE105"} <= codes
