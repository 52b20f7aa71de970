"""A session is bound to its domain; moving it to a new version is explicit, recorded and replayable."""

from __future__ import annotations

import json

import pytest

from context_editor import ContextEditor, audit
from context_editor.cli import main
from context_editor.domain.model import DOMAINS_DIR
from context_editor.errors import SessionDomainError
from context_editor.store import open_store

SAMPLE = DOMAINS_DIR / "samples" / "ecommerce_headphones.jsonl"


def chat(*texts: str) -> list[dict]:
    return [{"role": "user", "content": t, "timestamp": "2024-05-01T10:00:00+08:00"} for t in texts]


def test_another_domain_is_refused_and_nothing_is_stored(tmp_path, capsys):
    store = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["ingest", "ecommerce", str(SAMPLE), "--session", "a", "--store", store]) == 0
    before = open_store(store).session("a")
    travel = tmp_path / "t.jsonl"
    travel.write_text(json.dumps({"role": "user", "content": "fly to Denver"}) + "\n", "utf-8")
    assert main(["ingest", "travel", str(travel), "--session", "a", "--store", store]) == 2
    err = capsys.readouterr().err
    assert "[CE505]" in err and "belongs to domain 'ecommerce'" in err and "fix:" in err
    after = open_store(store).session("a")
    assert (after.messages, after.edits) == (before.messages, before.edits)


def test_a_new_version_needs_upgrade_which_is_an_edit_and_replays(tmp_path, capsys):
    v1 = (DOMAINS_DIR / "ecommerce.yaml").read_text("utf-8")
    path = tmp_path / "ecommerce.yaml"
    path.write_text(v1, "utf-8")
    url = f"sqlite:///{tmp_path / 's.db'}"
    ContextEditor(path, url).ingest("s", chat("我想买耳机，要黑色"))
    path.write_text(v1.replace("version: 1", "version: 2", 1).replace("black: [", "black: [乌黑, ", 1), "utf-8")
    with pytest.raises(SessionDomainError, match="was processed with version"):
        ContextEditor(path, url).ingest("s", chat("改成乌黑"))
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps(chat("改成红色", "还是乌黑吧")[0]) + "\n" + json.dumps(chat("还是乌黑吧")[0]) + "\n", "utf-8")
    assert main(["ingest", str(path), str(more), "--session", "s", "--store", url]) == 2
    assert "--upgrade" in capsys.readouterr().err
    assert main(["ingest", str(path), str(more), "--session", "s", "--store", url, "--upgrade"]) == 0
    store = open_store(url)
    edits = store.edits("s")
    [up] = [e for e in edits if e.op == "upgrade"]
    assert up.before != up.after and up.reason == "DOMAIN_UPGRADE" and up.round == 2
    assert {e.domain_version for e in edits[: up.seq]} == {up.before}
    assert {e.domain_version for e in edits[up.seq:]} == {up.after}
    assert ContextEditor(path, url).state("s").get("color") == "black"  # '乌黑' only exists in version 2
    report = audit.replay(store, "s")
    assert report.identical, report.first_difference
    assert main(["replay", "--session", "s", "--store", url]) == 0


def test_audit_export_is_accepted_by_run_and_ingest(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["ingest", "ecommerce", str(SAMPLE), "--session", "a", "--store", url]) == 0
    export = tmp_path / "a.jsonl"
    assert main(["audit", "export", "--session", "a", "--store", url, "--out", str(export)]) == 0
    capsys.readouterr()
    assert main(["run", "ecommerce", str(export), "--json"]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert main(["ingest", "ecommerce", str(export), "--session", "b", "--store", url]) == 0
    store = open_store(url)
    assert [m.content for m in store.messages("b")] == [m.content for m in store.messages("a")]
    assert [e.after for e in store.edits("b")] == [e.after for e in store.edits("a")]
    assert ran["fields"]["budget_max"]["value"] == {"amount": 2000, "currency": "CNY"}
