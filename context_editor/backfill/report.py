"""The outputs of a run, rebuilt from its batch files in session order (streamed: what is kept in
memory is counts, a few samples and the first failures, whatever the number of sessions).

They hold no timing and no engine name, so a run on Ray and one in a single process give the
same bytes; how long it took is printed, not written.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .diff import KINDS, critical_loss
from .driver import OutDir, RunStats

SAMPLES = 3  # per change kind, the first in session order
LISTED = 50  # critical losses and failures listed in full in report.md (all of them are in the JSONL files)


@dataclass
class Summary:
    """What a run found, for the exit code and the printed summary."""

    sessions: int = 0
    changed: int = 0
    skipped: int = 0
    failures: int = 0
    critical_lost: int = 0
    bad: int = 0  # verify: broken sessions; replay: sessions that replay differently
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _cut(text: Any, n: int = 80) -> str:
    s = str(text).replace("\n", " ")
    return s if len(s) <= n else s[: n - 1] + "…"


def _failures_md(failures: list[dict[str, Any]], total: int, batches: list[tuple[Any, str]]) -> list[str]:
    lines = [f"## Failures ({total} sessions, {len(batches)} batches)", ""]
    if not total and not batches:
        return lines + ["None.", ""]
    for f in failures[:LISTED]:
        lines += [f"### `{f['session']}`: {f['error']}", "", "```", f["traceback"].rstrip(), "```", ""]
    if total > LISTED:
        lines += [f"… and {total - LISTED} more in failures.jsonl.", ""]
    for batch, error in batches:
        lines += [f"### batch {batch.index}: sessions after {batch.after!r} up to {batch.upto!r} were not read",
                  "", "```", error.rstrip(), "```", "", "Run the same command again: it runs only unfinished batches.", ""]
    return lines


def _open(out: OutDir, name: str) -> TextIO:
    return (out.path / name).open("w", encoding="utf-8")


def write_backfill(out: OutDir, title: str, stats: RunStats) -> Summary:
    """diff.jsonl, failures.jsonl and report.md of a backfill."""
    s = Summary()
    samples: dict[str, list[dict[str, Any]]] = {k: [] for k in KINDS}
    critical: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    kind_sessions: Counter[str] = Counter()
    with _open(out, "diff.jsonl") as diff, _open(out, "failures.jsonl") as failed:
        last: dict[str, str] = {}
        for r in out.records():
            kind = r.pop("type")
            if kind == "change":
                diff.write(_json(r) + "\n")
                s.counts[(r["field"], r["kind"])] += 1
                if last.get(r["kind"]) != r["session"]:  # records of a session are consecutive
                    kind_sessions[r["kind"]] += 1
                    last[r["kind"]] = r["session"]
                if len(samples[r["kind"]]) < SAMPLES:
                    samples[r["kind"]].append(r)
                if critical_loss(r):
                    s.critical_lost += 1
                    if len(critical) < LISTED:
                        critical.append(r)
            elif kind == "session":
                s.sessions += 1
                s.changed += r["changed"]
            elif kind == "skipped":
                s.skipped += 1
            elif kind == "failure":
                failed.write(_json(r) + "\n")
                s.failures += 1
                if len(failures) < LISTED:
                    failures.append(r)
    lines = [f"# {title}", "",
             f"Sessions re-run: {s.sessions:,}; ending in a different state: {s.changed:,}"
             f" ({s.changed / s.sessions:.1%})" if s.sessions else "Sessions re-run: 0",
             "",
             f"Skipped (another domain): {s.skipped:,}; failed: {s.failures:,}; "
             f"critical fields lost: {s.critical_lost:,}.", "",
             "## Changes by field", "",
             "| field | " + " | ".join(k.replace("_", " ") for k in KINDS) + " | total |",
             "|---|" + "---:|" * (len(KINDS) + 1)]
    for name in sorted({f for f, _ in s.counts}):
        row = [s.counts[(name, k)] for k in KINDS]
        lines.append(f"| {name} | " + " | ".join(f"{n:,}" for n in row) + f" | {sum(row):,} |")
    lines += ["", "## Changes by kind", "", "| kind | field changes | sessions |", "|---|---:|---:|"]
    for k in KINDS:
        lines.append(f"| {k.replace('_', ' ')} | {sum(n for (_, kk), n in s.counts.items() if kk == k):,} | "
                     f"{kind_sessions[k]:,} |")
    lines += ["", f"## Critical fields lost ({s.critical_lost:,})", ""]
    if not critical:
        lines.append("None.")
    for r in critical:
        lines.append(f"- `{r['session']}` **{r['field']}**: {_cut(_json(r['before']))} → nothing "
                     f"(round {r['round']}, {r['reason'] or 'no reason recorded'})")
    if s.critical_lost > LISTED:
        lines.append(f"- … and {s.critical_lost - LISTED:,} more in diff.jsonl (`critical: true`, `after: null`).")
    lines += ["", "## Samples", ""]
    for k in KINDS:
        lines += [f"### {k.replace('_', ' ')}", ""]
        if not samples[k]:
            lines += ["None.", ""]
        for r in samples[k]:
            ext, why = r["extractor"], r["why"]
            lines.append(f"- `{r['session']}` **{r['field']}** round {r['round']}: {_cut(_json(r['before']))} → "
                         f"{_cut(_json(r['after']))}; reason {r['reason']}; extractor {ext['before']} → {ext['after']}")
            if why["before"] or why["after"]:
                lines.append(f"  - why: before {_cut(_json(why['before']), 60)}, after {_cut(_json(why['after']), 60)}")
        lines.append("")
    lines += _failures_md(failures, s.failures, stats.failed_batches)
    (out.path / "report.md").write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return s


def write_checks(out: OutDir, kind: str, title: str, stats: RunStats, store_problems: list[str],
                 limits: list[str]) -> Summary:
    """verify.jsonl / replay.jsonl and report.md of `audit verify --all` or `replay --all`."""
    s = Summary()
    bad: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    with _open(out, f"{kind}.jsonl") as results, _open(out, "failures.jsonl") as failed:
        for r in out.records():
            t = r.pop("type")
            if t == "failure":
                failed.write(_json(r) + "\n")
                s.failures += 1
                if len(failures) < LISTED:
                    failures.append(r)
                continue
            results.write(_json(r) + "\n")
            s.sessions += 1
            good = r["ok"] if kind == "verify" else r["identical"]
            if not good:
                s.bad += 1
                if len(bad) < LISTED:
                    bad.append(r)
    word = "broken" if kind == "verify" else "replaying differently"
    lines = [f"# {title}", "", f"Sessions checked: {s.sessions:,}; {word}: {s.bad:,}; failed: {s.failures:,}.", ""]
    if store_problems:
        lines += ["## Store problems", ""] + [f"- {p}" for p in store_problems] + [""]
    lines += [f"## Sessions {word} ({s.bad:,})", ""]
    if not bad:
        lines.append("None.")
    for r in bad:
        if kind == "verify":
            lines.append(f"- `{r['session']}`: first broken at {r['broken_at']}: {r['reason']}")
        else:
            lines.append(f"- `{r['session']}`: recorded {r['recorded']} edits, replay produced {r['replayed']}; "
                         f"first difference {_cut(_json(r['first_difference']), 200)}")
    if s.bad > LISTED:
        lines.append(f"- … and {s.bad - LISTED:,} more in {kind}.jsonl.")
    lines.append("")
    if limits:
        lines += ["## Limits", ""] + [f"- {n}" for n in limits] + [""]
    lines += _failures_md(failures, s.failures, stats.failed_batches)
    (out.path / "report.md").write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return s


def write_applied(out: OutDir) -> tuple[int, int]:
    """applied.jsonl of `backfill --apply`; (sessions moved, failures)."""
    moved = failures = 0
    with _open(out, "applied.jsonl") as f:
        for r in out.records():
            f.write(_json(r) + "\n")
            moved += r["type"] == "applied"
            failures += r["type"] == "failure"
    return moved, failures


