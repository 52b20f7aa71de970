"""Isolation (issue 4): sessions are keyed tenant/user/session; nothing crosses between them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from context_editor import ContextEditor, audit, session_key
from context_editor.errors import ContextEditorError

TS = "2024-05-01T10:00:00+08:00"
A = [("我想买蓝牙耳机", "预算2000以内", "要黑色的")]
B = [("I want to buy a keyboard", "budget is $300", "white please")]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_interleaved_sessions_never_see_each_other(tmp_path, store):
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'i.db'}"
    editor = ContextEditor("ecommerce", url)
    a, b = session_key("s1", tenant="acme", user="u1"), session_key("s1", tenant="globex", user="u1")
    assert a != b
    for ta, tb in zip(A[0], B[0]):  # interleave writes
        editor.add(a, {"role": "user", "content": ta, "timestamp": TS})
        editor.add(b, {"role": "user", "content": tb, "timestamp": TS})
    sa, sb = editor.state(a), editor.state(b)
    assert sa.get("color") == "black" and sb.get("color") == "white"
    assert sa.get("budget_max") == {"amount": 2000, "currency": "CNY"}
    assert sb.get("budget_max") == {"amount": 300, "currency": "USD"}
    for key, own, other in ((a, A[0], B[0]), (b, B[0], A[0])):
        xml = editor.render(key, "place_order", budget=2000).xml
        dump = json.dumps(list(audit.export(editor.store, key)), ensure_ascii=False)
        why = json.dumps([editor.why(key, f) for f in editor.domain.fields], ensure_ascii=False)
        for text in other:
            assert text not in xml and text not in dump and text not in why
        assert all(text in dump for text in own)
        assert [m.session for m in editor.store.messages(key)] == [key] * 3
        assert audit.verify(editor.store, key)[0].ok


@pytest.mark.parametrize("bad", ["a/b", "", "x\x00y"])
def test_key_parts_cannot_reach_into_another_key(bad):
    with pytest.raises(ContextEditorError, match="invalid session key part"):
        session_key("s1", tenant=bad)


def test_cli_tenant_and_user_options(tmp_path):
    conv = tmp_path / "c.jsonl"
    conv.write_text(json.dumps({"role": "user", "content": "预算2000以内", "timestamp": TS}, ensure_ascii=False) + "\n", "utf-8")
    db = str(tmp_path / "t.db")

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "context_editor", *args, "--store", db], capture_output=True, text=True, timeout=120)

    assert cli("ingest", "ecommerce", str(conv), "--tenant", "acme", "--user", "u1", "--session", "s1").returncode == 0
    ok = cli("state", "--tenant", "acme", "--user", "u1", "--session", "s1", "--json")
    assert json.loads(ok.stdout)["session"] == "acme/u1/s1"
    other = cli("state", "--tenant", "globex", "--user", "u1", "--session", "s1", "--json")
    assert other.returncode == 2 and "no session 'globex/u1/s1'" in other.stderr
