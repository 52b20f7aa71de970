"""`context-editor test DOMAIN DIR`: a domain's conversations with the states they must produce.

The format (one YAML file per conversation: messages, `expect` with the complete final state,
phase and open alerts, optional per-round checks and known misses) is documented in
docs/testing-domains.md. Every miss is reported with its `why`; per-field precision and
recall are counted over the final states. The bundled golden sets (tests/golden/<domain>/) are
in this format and the test suite runs them through this module.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from .conversation import normalise_message
from .domain import Domain
from .domain.yamlines import LinedYaml, load_lined_yaml
from .errors import Errors, TestCaseError
from .pipeline import ContextEditor


@dataclass(frozen=True)
class Expectation:
    state: dict[str, Any] | None = None  # None: not checked
    phase: str | None = None
    alerts: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Case:
    id: str
    path: Path
    description: str
    lang: str
    messages: list[dict[str, Any]] = field(repr=False)
    expect: Expectation = Expectation()
    rounds: dict[int, Expectation] = field(default_factory=dict)
    xfail: dict[str, str] = field(default_factory=dict)


def _fail(path: Path, line: int | None, what: str, fix: str) -> TestCaseError:
    return Errors.BAD_TEST_CASE(problem=what, fix=fix, file=str(path), line=line)


def _expectation(raw: Any, path: Path, where: str, doc: LinedYaml) -> Expectation:
    if not isinstance(raw, dict) or set(raw) - {"state", "phase", "alerts"}:
        raise _fail(path, doc.line(where), f"`{where}` must be a mapping with `state`, `phase` and/or `alerts`",
                    "write it like {state: {field: value}, phase: booked, alerts: [CODE]}")
    state = raw.get("state")
    if state is not None and not isinstance(state, dict):
        raise _fail(path, doc.line(f"{where}/state"), "`state` must map field names to values", "write {field: value, …}")
    alerts = raw.get("alerts")
    return Expectation(state, raw.get("phase"), tuple(sorted(map(str, alerts))) if alerts is not None else None)


def _message(raw: Any, path: Path, line: int | None, i: int) -> dict[str, Any]:
    if isinstance(raw, dict) and len(raw) == 1 and "role" not in raw and "content" not in raw:  # `user: text`
        role, content = next(iter(raw.items()))
        raw = {"role": role, "content": content}
    return normalise_message(raw, file=str(path), line=line, where=f"message {i + 1}")


def load_case(path: Path) -> Case:
    """One test case file, checked: a malformed one is a TestCaseError naming file and line."""
    doc = load_lined_yaml(path.read_text(encoding="utf-8"), str(path))
    if doc.data is None or not isinstance(doc.data, dict):
        first = doc.problems[0] if doc.problems else None
        raise _fail(path, first.line if first else 1, first.message if first else "a test case must be a YAML mapping",
                    "see docs/testing-domains.md for the format")
    d = doc.data
    unknown = set(d) - {"id", "description", "lang", "messages", "expect", "rounds", "xfail"}
    if unknown:
        key = sorted(unknown)[0]
        raise _fail(path, doc.line(key), f"unknown key '{key}'", "use id, description, lang, messages, expect, rounds, xfail")
    if not isinstance(d.get("messages"), list) or not d["messages"]:
        raise _fail(path, doc.line("messages"), "a test case needs `messages:`, a list", "list the conversation's messages")
    if "expect" not in d:
        raise _fail(path, 1, "a test case needs `expect:`", "add `expect: {state: {…}}` with the final state")
    messages = [_message(m, path, doc.line(f"messages/{i}"), i) for i, m in enumerate(d["messages"])]
    rounds = {}
    for key, raw in (d.get("rounds") or {}).items():
        if not str(key).isdigit():
            raise _fail(path, doc.line(f"rounds/{key}"), f"round '{key}' is not a number", "key per-round checks by round number")
        rounds[int(key)] = _expectation(raw, path, f"rounds/{key}", doc)
    return Case(str(d.get("id") or path.stem), path, str(d.get("description") or ""), str(d.get("lang") or ""),
                messages, _expectation(d["expect"], path, "expect", doc), rounds,
                {str(k): str(v) for k, v in (d.get("xfail") or {}).items()})


def load_cases(directory: str | Path) -> list[Case]:
    """Every case in a directory (`*.yaml`, `*.yml`), in name order."""
    root = Path(directory)
    if not root.is_dir():
        raise Errors.BAD_TEST_CASE(problem=f"no such directory: {root}", fix="pass the directory holding your test case .yaml files")
    paths = sorted([*root.glob("*.yaml"), *root.glob("*.yml")])
    if not paths:
        raise Errors.BAD_TEST_CASE(problem=f"no test cases (*.yaml) in {root}",
                                   fix="write one YAML file per conversation (docs/testing-domains.md)")
    return [load_case(p) for p in paths]


@dataclass
class Counts:
    tp: int = 0
    fp: int = 0
    fn: int = 0

    def add(self, gold: Any, predicted: Any) -> None:
        if predicted is not None and predicted == gold:
            self.tp += 1
            return
        self.fp += predicted is not None
        self.fn += gold is not None

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None


@dataclass(frozen=True)
class Miss:
    round: int | None  # None: the final state
    what: str  # a field name, "phase" or "alerts"
    expected: Any
    got: Any
    why: str = ""
    known: str = ""  # the xfail reason, for a known miss


@dataclass
class CaseResult:
    case: Case
    values: dict[str, Any]
    misses: list[Miss]
    fixed: list[str]  # xfail fields that are now right (the file should be updated)

    @property
    def failures(self) -> list[Miss]:
        return [m for m in self.misses if not m.known]

    @property
    def passed(self) -> bool:
        return not self.failures and not self.fixed


def _short(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def why_text(editor: ContextEditor, session: str, name: str) -> str:
    """A field's story in one line: what was extracted, from which text, by which rule."""
    info = editor.why(session, name)
    if not info["history"]:
        return "nothing was extracted for it (no rule, value or tool key matched any message)"
    steps = []
    for h in info["history"][-3:]:
        p = h.get("provenance")
        src = f" from {p['text']!r} via {p['extractor']}" if p else ""
        reason = f" [{h['reason']}]" if h["reason"] else ""
        steps.append(f"round {h['round']} {h['status']} {_short(h['value'])}{src}{reason}")
    more = len(info["history"]) - 3
    return ("…; " if more > 0 else "") + "; ".join(steps)


def _check(editor: ContextEditor, case: Case, exp: Expectation, rnd: int | None, complete: bool) -> tuple[list[Miss], dict[str, Any]]:
    state = editor.state(case.id, as_of_round=rnd)
    values = state.values()
    misses = []
    if exp.state is not None:
        names = sorted(set(exp.state) | (set(values) if complete else set()))
        for name in names:
            want, got = exp.state.get(name), values.get(name)
            if want != got:
                known = case.xfail.get(name, "") if rnd is None else ""
                misses.append(Miss(rnd, name, want, got, why_text(editor, case.id, name) if name in editor.domain.fields
                                   else f"'{name}' is not a field of domain {editor.domain.name}", known))
    if exp.phase is not None and state.phase != exp.phase:
        misses.append(Miss(rnd, "phase", exp.phase, state.phase))
    if exp.alerts is not None:
        open_codes = tuple(sorted(a.code for a in state.alerts))
        if open_codes != exp.alerts:
            misses.append(Miss(rnd, "alerts", list(exp.alerts), list(open_codes)))
    return misses, values


def run_case(domain: Domain, case: Case) -> CaseResult:
    """Run one conversation through a fresh in-memory editor and check every expectation."""
    editor = ContextEditor(domain, "memory://")
    editor.ingest(case.id, case.messages)
    misses: list[Miss] = []
    for rnd, exp in sorted(case.rounds.items()):
        misses += _check(editor, case, exp, rnd, complete=False)[0]
    final, values = _check(editor, case, case.expect, None, complete=True)
    misses += final
    missed = {m.what for m in final}
    fixed = [f for f in case.xfail if f not in missed]
    return CaseResult(case, values, misses, fixed)


@dataclass
class SuiteResult:
    domain: Domain
    results: list[CaseResult]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    def counts(self, lang: str | None = None) -> dict[str, Counts]:
        """Field -> precision/recall counts over the final states (known misses count as misses)."""
        table: dict[str, Counts] = defaultdict(Counts)
        for r in self.results:
            if r.case.expect.state is None or (lang and r.case.lang != lang):
                continue
            for name in self.domain.fields:
                table[name].add(r.case.expect.state.get(name), r.values.get(name))
        return dict(table)


def run_suite(domain: Domain, cases: list[Case]) -> SuiteResult:
    return SuiteResult(domain, [run_case(domain, c) for c in cases])


def _fmt(x: float | None) -> str:
    return "  -  " if x is None else f"{x:.2f}"


def _miss_line(m: Miss) -> str:
    where = f"round {m.round}: " if m.round is not None else ""
    text = f"  {where}{m.what}: expected {_short(m.expected)}, got {_short(m.got)}"
    if m.known:
        text += f"  (known miss: {m.known})"
    return text + (f"\n    why: {m.why}" if m.why else "")


def _total(counts: dict[str, Counts]) -> Counts:
    return Counts(sum(c.tp for c in counts.values()), sum(c.fp for c in counts.values()), sum(c.fn for c in counts.values()))


def _language_summary(suite: SuiteResult, lang: str) -> str:
    t = _total(suite.counts(lang))
    n = sum(r.case.lang == lang for r in suite.results)
    return f"{lang} precision {_fmt(t.precision)} recall {_fmt(t.recall)} ({n} conversations)"


def report(suite: SuiteResult) -> str:
    """Per-field precision/recall, then every failed case with each miss and its why."""
    lines = []
    counts = suite.counts()
    used = [n for n in suite.domain.fields if n in counts and (counts[n].tp + counts[n].fp + counts[n].fn)]
    width = max([len(n) for n in used] + [5])
    lines.append(f"{'field':<{width}}  {'tp':>4} {'fp':>4} {'fn':>4}  precision  recall")
    for n in used:
        c = counts[n]
        lines.append(f"{n:<{width}}  {c.tp:>4} {c.fp:>4} {c.fn:>4}  {_fmt(c.precision):>9}  {_fmt(c.recall):>6}")
    total = _total(counts)
    lines.append(f"{'all':<{width}}  {total.tp:>4} {total.fp:>4} {total.fn:>4}  {_fmt(total.precision):>9}  {_fmt(total.recall):>6}")
    langs = sorted({r.case.lang for r in suite.results if r.case.lang})
    if len(langs) > 1:
        lines.append("by language: " + "; ".join(_language_summary(suite, lang) for lang in langs))
    for r in suite.results:
        if r.passed and not r.misses:
            continue
        status = "FAIL" if not r.passed else "ok  "
        lines.append(f"\n{status} {r.case.id} ({r.case.path.name})")
        lines.extend(_miss_line(m) for m in r.misses)
        lines.extend(f"  {f}: now extracted correctly; remove it from `xfail`" for f in r.fixed)
    failed = sum(not r.passed for r in suite.results)
    known = sum(len([m for m in r.misses if m.known]) for r in suite.results)
    lines.append(f"\n{len(suite.results)} conversation(s): {len(suite.results) - failed} passed, {failed} failed"
                 f"{f', {known} known miss(es)' if known else ''} (domain {suite.domain.name} {suite.domain.version_hash})")
    return "\n".join(lines)


def junit(suite: SuiteResult) -> str:
    """JUnit XML: one testcase per conversation, a failure listing its misses."""
    failed = sum(not r.passed for r in suite.results)
    out = [f'<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuite name={quoteattr("context-editor " + suite.domain.name)} tests="{len(suite.results)}" '
           f'failures="{failed}" errors="0">']
    for r in suite.results:
        out.append(f'  <testcase classname={quoteattr(suite.domain.name)} name={quoteattr(r.case.id)} '
                   f'file={quoteattr(str(r.case.path))}>')
        if not r.passed:
            body = "\n".join([_miss_line(m) for m in r.failures] + [f"{f}: remove it from xfail" for f in r.fixed])
            summary = f"{len(r.failures) + len(r.fixed)} failed expectation(s)"
            out.append(f'    <failure message={quoteattr(summary)}>{_escape(body)}</failure>')
        out.append("  </testcase>")
    out.append("</testsuite>")
    return "\n".join(out) + "\n"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def compare(old: SuiteResult, new: SuiteResult) -> str:
    """What changed between two versions of a domain on the same conversations."""
    lines = [f"comparing {old.domain.name} {old.domain.version_hash} (old) -> {new.domain.version_hash} (new)"]
    oc, nc = old.counts(), new.counts()
    for name in sorted(set(oc) | set(nc)):
        a, b = oc.get(name, Counts()), nc.get(name, Counts())
        if (a.precision, a.recall) != (b.precision, b.recall):
            lines.append(f"  {name}: precision {_fmt(a.precision)} -> {_fmt(b.precision)}, recall {_fmt(a.recall)} -> {_fmt(b.recall)}")
    changed = 0
    for ro, rn in zip(old.results, new.results):
        expected = rn.case.expect.state or {}
        for name in sorted(set(ro.values) | set(rn.values)):
            before, after = ro.values.get(name), rn.values.get(name)
            if before == after:
                continue
            changed += 1
            verdict = ("fixed" if after == expected.get(name) else
                       "broken" if before == expected.get(name) else "changed")
            lines.append(f"  {rn.case.id}: {name}: {_short(before)} -> {_short(after)}  [{verdict}]")
    lines.append(f"{changed} value(s) differ; old: {sum(r.passed for r in old.results)}/{len(old.results)} passed, "
                 f"new: {sum(r.passed for r in new.results)}/{len(new.results)} passed")
    return "\n".join(lines)
