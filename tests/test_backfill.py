"""backfill, audit verify --all and replay --all on a local Ray runtime and in one process,
over a few hundred generated sessions on SQLite and on real PostgreSQL.

One Ray runtime (`ray.init(num_cpus=2)`) serves the whole module; the CLI is called in-process
so its `--engine ray` uses it. The changed domain (travel v2) adds two synonyms, drops one,
tightens the party size and the budget: every change kind occurs, and critical values are lost.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from conftest import ROOT
from context_editor import ContextEditor, audit
from context_editor.backfill.driver import selection_range
from context_editor.bench.sessions import fill, sample_conversations, travel_conversations
from context_editor.cli import main
from context_editor.model import State
from context_editor.pipeline import rerun
from context_editor.store import migrations, open_store

ray = pytest.importorskip("ray")
GENERATED = 200
OUTPUTS = {"backfill": ("diff.jsonl", "failures.jsonl", "report.md"), "verify": ("verify.jsonl", "report.md"),
           "replay": ("replay.jsonl", "report.md")}


def _v2(text: str) -> str:
    for old, new in (("version: 1", "version: 2"),
                     ("economy: [经济舱, economy class, coach]", "economy: [经济舱, economy class, coach, cheap seats]"),
                     ("premium economy]", "premium economy, premium plus]"),
                     ("aisle: [靠过道, 过道, 走道, 靠走廊, aisle seat]", "aisle: [靠过道, 过道, 走道, aisle seat]"),
                     ("constraints: {gt: 0, le: 50}", "constraints: {gt: 0, le: 6}"),
                     ("constraints: {gt: 0, lt: 10000000,", "constraints: {gt: 0, lt: 20000,")):
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


@pytest.fixture(scope="module")
def ray_runtime():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def domains(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("domains")
    travel = (ROOT / "domains" / "travel.yaml").read_text("utf-8")
    (d / "travel_v2.yaml").write_text(_v2(travel), "utf-8")
    (d / "broken.yaml").write_text(travel.replace("type: money", "type: moneyy", 1), "utf-8")
    return {p.stem: p for p in d.iterdir()}


def conversations():
    return [*travel_conversations(GENERATED, seed=16), *sample_conversations()]


@pytest.fixture(scope="module")
def sqlite_url(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('store') / 'sessions.db'}"
    fill(url, conversations())
    return url


@pytest.fixture(scope="module")
def postgres_url(pg_url) -> str:
    schema = f"t_{uuid.uuid4().hex}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    url = f"{pg_url}{'&' if '?' in pg_url else '?'}options=-csearch_path%3D{schema}"
    fill(url, conversations())
    yield url
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request) -> str:
    return request.getfixturevalue(f"{request.param}_url")


def run(*argv: str) -> int:
    return main([str(a) for a in argv])


def sorted_lines(path: Path) -> list[str]:
    return sorted(path.read_text("utf-8").splitlines())


def test_ray_and_local_give_the_same_outputs(ray_runtime, store_url, domains, tmp_path, capsys):
    jobs = {"backfill": ["backfill", "--domain", domains["travel_v2"]], "verify": ["audit", "verify", "--all"],
            "replay": ["replay", "--all"]}
    for kind, argv in jobs.items():
        codes = {}
        for engine in ("local", "ray"):
            codes[engine] = run(*argv, "--store", store_url, "--engine", engine, "--batch-size", 60,
                                "--out", tmp_path / kind / engine)
        assert codes["local"] == codes["ray"] == (1 if kind == "backfill" else 0), (kind, capsys.readouterr())
        for name in OUTPUTS[kind]:
            assert sorted_lines(tmp_path / kind / "local" / name) == sorted_lines(tmp_path / kind / "ray" / name), name
    err = capsys.readouterr().err
    assert "ETA" in err and f"{GENERATED + 3}/{GENERATED + 3} sessions (100%)" in err
    diff = [json.loads(line) for line in (tmp_path / "backfill" / "ray" / "diff.jsonl").read_text("utf-8").splitlines()]
    kinds = {(r["field"], r["kind"]) for r in diff}
    assert {("cabin_class", "newly_filled"), ("cabin_class", "changed"), ("seat_preference", "lost"),
            ("travelers", "newly_rejected"), ("budget_max", "newly_rejected")} <= kinds
    assert all(r["session"].startswith("gen-") for r in diff)  # the samples of other domains are skipped
    report = (tmp_path / "backfill" / "ray" / "report.md").read_text("utf-8")
    lost = sum(1 for r in diff if r["critical"] and r["after"] is None)
    assert lost and f"critical fields lost: {lost}." in report and "Skipped (another domain): 2" in report
    sample = next(r for r in diff if r["kind"] == "changed")
    assert (sample["before"], sample["after"], sample["why"]["after"]) == ("economy", "premium_economy", "premium plus")
    assert all(json.loads(line)["ok"] for line in (tmp_path / "verify" / "ray" / "verify.jsonl").open())
    assert len(sorted_lines(tmp_path / "replay" / "ray" / "replay.jsonl")) == GENERATED + 3


def test_apply_moves_the_changed_sessions_and_they_still_verify_and_replay(ray_runtime, domains, tmp_path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    fill(url, [*travel_conversations(60, seed=3), *sample_conversations()])
    store = open_store(url)
    before = {s: store.session(s) for s in store.sessions()}
    assert run("backfill", "--store", url, "--domain", domains["travel_v2"], "--engine", "ray",
               "--out", tmp_path / "out", "--apply") == 1  # critical values would be lost: nothing applied
    assert {s: store.session(s) for s in store.sessions()} == before
    assert run("backfill", "--store", url, "--domain", domains["travel_v2"], "--engine", "ray",
               "--out", tmp_path / "out", "--apply", "--allow-critical-loss") == 0
    changed = {json.loads(line)["session"] for line in (tmp_path / "out" / "diff.jsonl").open()}
    applied = {json.loads(line)["session"] for line in (tmp_path / "out" / "apply" / "applied.jsonl").open()}
    assert changed == applied and len(changed) > 10
    v2 = ContextEditor(domains["travel_v2"], store)
    for s, info in before.items():
        now = store.session(s)
        if s not in changed:
            assert now == info  # untouched
            continue
        assert now.domain_version == v2.domain.version_hash and now.messages == info.messages + 1
        upgrade = [e for e in store.edits(s) if e.op == "upgrade"]
        assert [e.reason for e in upgrade] == ["DOMAIN_REDERIVE"]
        # The stored state is now what v2 makes of the session's messages.
        expected = rerun(v2.domain, s, store.messages(s)[:-1])
        assert State.fold("travel", now.domain_version, s, store.edits(s)).values() == expected.values()
    # Nothing is left to change, the chains verify and every session replays identically.
    assert run("backfill", "--store", url, "--domain", domains["travel_v2"], "--out", tmp_path / "again") == 0
    assert (tmp_path / "again" / "diff.jsonl").read_text("utf-8") == ""
    assert run("audit", "verify", "--all", "--store", url, "--out", tmp_path / "verify") == 0
    assert run("replay", "--all", "--store", url, "--engine", "ray", "--out", tmp_path / "replay") == 0
    assert all(r.identical for r in (audit.replay(store, s) for s in sorted(changed)[:5]))


def test_a_session_that_crashes_the_pipeline_is_reported_and_the_run_goes_on(ray_runtime, sqlite_url, domains,
                                                                               tmp_path, capsys):
    path = tmp_path / "store.db"
    with sqlite3.connect(sqlite_url[len("sqlite:///"):]) as src, sqlite3.connect(path) as dst:
        src.backup(dst)
        # Two sessions hold a message the pipeline refuses (a role written by some other tool).
        for session in ("gen-000007", "gen-000100"):
            body = json.loads(dst.execute("SELECT body FROM messages WHERE session = ? AND idx = 2", (session,)).fetchone()[0])
            dst.execute("UPDATE messages SET body = ? WHERE session = ? AND idx = 2",
                        (json.dumps({**body, "role": "robot"}), session))
    code = run("backfill", "--store", path, "--domain", domains["travel_v2"], "--engine", "ray", "--batch-size", 60,
               "--out", tmp_path / "out", "--allow-critical-loss")
    assert code == 1
    failures = [json.loads(line) for line in (tmp_path / "out" / "failures.jsonl").open()]
    assert [f["session"] for f in failures] == ["gen-000007", "gen-000100"]
    assert all("unknown role 'robot'" in f["error"] and "pipeline.py" in f["traceback"] and f["attempts"] == 2
               for f in failures)
    report = (tmp_path / "out" / "report.md").read_text("utf-8")
    assert "## Failures (2 sessions, 0 batches)" in report and "Traceback (most recent call last)" in report
    assert f"Sessions re-run: {GENERATED + 1 - 2};" in report  # every other session was compared
    assert "2 failed" in capsys.readouterr().out


def test_a_rerun_with_the_same_out_skips_finished_batches(sqlite_url, domains, tmp_path, capsys):
    argv = ("backfill", "--store", sqlite_url, "--domain", domains["travel_v2"], "--batch-size", 50, "--out", tmp_path)
    run(*argv)
    first = sorted_lines(tmp_path / "diff.jsonl")
    batches = sorted((tmp_path / "batches").iterdir())
    assert len(batches) == 5
    batches[3].unlink()  # as if the run was killed before this batch finished
    marked = batches[0].read_text("utf-8").replace('"type": "change"', '"mark": 1, "type": "change"')
    batches[0].write_text(marked, "utf-8")  # a finished batch is never run again: its mark must survive
    capsys.readouterr()
    run(*argv)
    assert "4 of 5 batches done by an earlier run" in capsys.readouterr().out
    again = [json.loads(line) for line in (tmp_path / "diff.jsonl").open()]
    assert any(r.get("mark") for r in again)
    assert sorted(json.dumps({k: v for k, v in r.items() if k != "mark"}, ensure_ascii=False, sort_keys=True)
                  for r in again) == first


def test_sessions_are_selected_by_glob_and_by_tenant(domains, tmp_path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    fill(url, [*travel_conversations(12, prefix="acme/u1/trip"), *travel_conversations(5, prefix="acme0"),
               *travel_conversations(7, prefix="globex/u1/trip")])
    for selection, expected in ((["--tenant", "acme"], 12), (["--sessions", "globex/*"], 7),
                                (["--sessions", "acme*-00000[0-4]"], 10)):
        out = tmp_path / "_".join(selection).replace("/", "").replace("*", "").replace("[", "")
        run("backfill", "--store", url, "--domain", domains["travel_v2"], "--allow-critical-loss", *selection,
            "--out", out)
        sessions = [json.loads(line) for line in (out / "batches" / "0000000.jsonl").open()
                    if json.loads(line)["type"] == "session"]
        assert len(sessions) == expected, selection
    store = open_store(url)
    assert len(store.session_keys(*selection_range(None, "acme"))) == 12


def test_a_batch_gives_each_session_only_what_its_own_log_was_given(tmp_path):
    """A batch reruns its sessions one after another on one editor. A session of a user whose
    memory held nothing when it was recorded must not recall what an earlier session of the
    batch (sorted first, recorded later) told that editor: an unchanged domain finds no change."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    live = ContextEditor("travel", url)
    day = lambda d: f"2024-01-{10 + d:02d}T09:00:00+00:00"  # noqa: E731
    for session, text, d in (("acme/u1/b-trip", "我想订去成都的机票", 7),  # nothing remembered yet
                             ("acme/u1/a-trip", "下个月去三亚，座位要靠窗", 6),  # the seat is remembered from here on
                             ("acme/u1/c-trip", "我想订去西安的机票", 9)):  # recalls it
        live.add(session, {"role": "user", "content": text, "timestamp": day(d)})
    seats = {s: live.state(s).get("seat_preference") for s in ("acme/u1/a-trip", "acme/u1/b-trip", "acme/u1/c-trip")}
    assert seats == {"acme/u1/a-trip": "window", "acme/u1/b-trip": None, "acme/u1/c-trip": "window"}
    assert run("backfill", "--store", url, "--domain", ROOT / "domains" / "travel.yaml", "--out", tmp_path / "out") == 0
    rows = [json.loads(line) for line in (tmp_path / "out" / "batches" / "0000000.jsonl").open()]
    assert [r for r in rows if r["type"] == "change"] == []
    assert {r["session"]: r["changed"] for r in rows if r["type"] == "session"} == dict.fromkeys(seats, False)


# ----------------------------------------------------------------------------- refused before any work
def refused(capsys, argv: list, out: Path, code: str) -> None:
    assert run(*argv, "--out", out) == 2
    err = capsys.readouterr().err
    assert f"[{code}]" in err and "fix:" in err and "Traceback" not in err, err
    assert not out.exists()  # nothing was started


def test_an_unreachable_ray_address_is_refused(sqlite_url, domains, tmp_path, capsys):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    refused(capsys, ["backfill", "--store", sqlite_url, "--domain", domains["travel_v2"], "--engine", "ray",
                     "--address", f"ray://127.0.0.1:{port}"], tmp_path / "out", "CE530")
    refused(capsys, ["audit", "verify", "--all", "--store", sqlite_url, "--engine", "ray",
                     "--address", f"127.0.0.1:{port}"], tmp_path / "out", "CE530")


def test_a_domain_that_fails_lint_is_refused(sqlite_url, domains, tmp_path, capsys):
    refused(capsys, ["backfill", "--store", sqlite_url, "--domain", domains["broken"]], tmp_path / "out", "CE104")


def test_a_store_newer_than_the_package_is_refused(domains, tmp_path, capsys):
    path = tmp_path / "new.db"
    fill(f"sqlite:///{path}", travel_conversations(3))
    with sqlite3.connect(path) as c:
        c.execute(f"PRAGMA user_version = {migrations.SCHEMA_VERSION + 1}")
    refused(capsys, ["backfill", "--store", path, "--domain", domains["travel_v2"]], tmp_path / "out", "CE507")
    refused(capsys, ["replay", "--all", "--store", path], tmp_path / "out", "CE507")


def test_a_store_whose_migration_fails_is_refused_unchanged(domains, tmp_path, capsys, monkeypatch):
    path = tmp_path / "old.db"
    fill(f"sqlite:///{path}", travel_conversations(3))
    broken = migrations.Step(migrations.SCHEMA_VERSION + 1, "a step that cannot run", "ALTER TABLE no_such ADD x INTEGER")
    monkeypatch.setattr(migrations, "STEPS", (*migrations.STEPS, broken))
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", broken.version)
    refused(capsys, ["backfill", "--store", path, "--domain", domains["travel_v2"]], tmp_path / "out", "CE508")
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == broken.version - 1


def test_an_out_dir_of_another_run_and_a_memory_store_are_refused(sqlite_url, domains, tmp_path, capsys):
    out = tmp_path / "out"
    assert run("audit", "verify", "--all", "--store", sqlite_url, "--out", out) == 0
    capsys.readouterr()
    assert run("backfill", "--store", sqlite_url, "--domain", domains["travel_v2"], "--out", out) == 2
    assert "[CE531]" in capsys.readouterr().err and not (out / "diff.jsonl").exists()
    refused(capsys, ["replay", "--all", "--store", "memory://"], tmp_path / "mem", "CE532")
    shutil.rmtree(out)
