"""Contract tests of the HTTP service: the real `context-editor serve` on 127.0.0.1, over SQLite and
a real PostgreSQL server, with keys made by the real CLI. Every endpoint, every way in being
refused (no key, revoked key, wrong role, another tenant's session), and every kind of bad input
(oversized body or message, malformed JSON, wrong shape, unknown domain/action/field)."""

from __future__ import annotations

import json
import sys
import threading

import httpx
import psycopg
import pytest

from context_editor.cli import main
from context_editor.conversation import read_conversation
from conftest import ROOT, SAMPLE
from service_server import create_key, running_service

MSG = {"role": "user", "content": "我想买蓝牙耳机，预算2000以内，要黑色", "timestamp": "2024-05-01T10:00:00+08:00"}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def svc(request, tmp_path_factory):
    """A running service, and keys of two tenants in every role."""
    if request.param == "sqlite":
        store = f"sqlite:///{tmp_path_factory.mktemp('svc') / 'svc.db'}"
    else:
        url = request.getfixturevalue("pg_url")
        with psycopg.connect(url, autocommit=True) as conn:  # a schema of its own, like pg_schema_url
            conn.execute("DROP SCHEMA IF EXISTS svc_test CASCADE")
            conn.execute("CREATE SCHEMA svc_test")
        store = f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3Dsvc_test"
    keys = {(t, r): create_key(store, t, r) for t in ("acme", "globex") for r in ("writer", "reader", "auditor")}
    with running_service(store, "--max-body-bytes", "200000", "--max-message-bytes", "50000") as base:
        yield {"base": base, "store": store, "keys": keys}


def call(svc, method: str, path: str, key: tuple[str, str] | str | None = ("acme", "writer"), **kw) -> httpx.Response:
    headers = kw.pop("headers", {})
    if key is not None:
        headers["Authorization"] = f"Bearer {svc['keys'][key] if isinstance(key, tuple) else key}"
    return httpx.request(method, svc["base"] + path, headers=headers, timeout=60, **kw)


def error(resp: httpx.Response, status: int, code: str) -> dict:
    assert resp.status_code == status, resp.text
    body = resp.json()["error"]
    assert body["code"] == code and body["message"] and body["fix"], body
    return body


def test_ingest_then_read_every_view(svc):
    headphones = [{**m, "id": f"hp-{i}"} for i, m in enumerate(read_conversation(str(SAMPLE)))]
    r = call(svc, "POST", "/v1/sessions/shop-1/messages", json={"domain": "ecommerce", "messages": headphones})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["added"] == len(headphones) and body["state"]["session"] == "shop-1"
    assert body["state"]["fields"]["budget_max"]["value"] == {"amount": 2000, "currency": "CNY"}

    again = call(svc, "POST", "/v1/sessions/shop-1/messages", json={"domain": "ecommerce", "messages": headphones[-2:]})
    assert again.json()["added"] == 0 and again.json()["skipped"] == 2  # a retried request adds nothing twice

    state = call(svc, "GET", "/v1/sessions/shop-1/state", key=("acme", "reader")).json()
    assert state["fields"]["color"]["value"] == body["state"]["fields"]["color"]["value"]
    early = call(svc, "GET", "/v1/sessions/shop-1/state?as_of_round=1", key=("acme", "reader")).json()
    assert early["round"] == 1 and "budget_max" not in early["fields"]

    ctx = call(svc, "GET", "/v1/sessions/shop-1/context?action=place_order&budget=400&model=gpt-4o").json()
    assert ctx["tokens"] <= ctx["budget"] == 400 and f'tokens="{ctx["tokens"]}"' in ctx["xml"]
    assert set(ctx) >= {"xml", "tokens", "budget", "missing", "dropped"}
    tight = call(svc, "GET", "/v1/sessions/shop-1/context?action=place_order&budget=200").json()
    assert tight["dropped"] and f'dropped="{", ".join(tight["dropped"])}"' in tight["xml"]

    why = call(svc, "GET", "/v1/sessions/shop-1/why/budget_max", key=("acme", "reader")).json()
    assert why["provenance"]["extractor"] == "rule:money.budget.zh" and why["session"] == "shop-1"

    lines = call(svc, "GET", "/v1/sessions/shop-1/export", key=("acme", "auditor")).text.splitlines()
    records = [json.loads(x) for x in lines]
    assert sum(1 for r in records if r.get("type") == "message") == len(headphones)

    anthropic = {"domain": "ecommerce", "messages": [  # another message format, detected
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "stock", "input": {"sku": "XM5"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "in stock"},
                                     {"type": "text", "text": "好的"}]}]}
    added = call(svc, "POST", "/v1/sessions/shop-1/messages", json=anthropic).json()
    assert added["added"] == 3
    xml = call(svc, "GET", "/v1/sessions/shop-1/context?action=recommend_product&budget=2000").json()["xml"]
    assert 'tool_call="stock">{"sku":"XM5"}</turn>' in xml

    verdict = call(svc, "POST", "/v1/audit/verify", key=("acme", "auditor")).json()
    assert verdict["ok"] and "shop-1" in [v["session"] for v in verdict["sessions"]]
    listed = call(svc, "GET", "/v1/sessions", key=("acme", "reader")).json()
    assert listed["tenant"] == "acme" and "shop-1" in [s["session"] for s in listed["sessions"]]


def test_tenants_never_see_each_other(svc):
    call(svc, "POST", "/v1/sessions/shared-name/messages", json={"domain": "ecommerce", "messages": [MSG]})
    for path in ("/v1/sessions/shared-name/state", "/v1/sessions/shared-name/context?action=place_order",
                 "/v1/sessions/shared-name/why/color"):
        error(call(svc, "GET", path, key=("globex", "writer")), 404, "CE501")  # 404, not 403: ids don't leak
    error(call(svc, "GET", "/v1/sessions/shared-name/export", key=("globex", "auditor")), 404, "CE501")
    assert "shared-name" not in [s["session"] for s in call(svc, "GET", "/v1/sessions", key=("globex", "reader")).json()["sessions"]]
    assert all(v["session"] != "shared-name" for v in call(svc, "POST", "/v1/audit/verify", key=("globex", "auditor")).json()["sessions"])
    # globex writing "shared-name" makes its own session; acme's is untouched
    call(svc, "POST", "/v1/sessions/shared-name/messages", key=("globex", "writer"),
         json={"domain": "ecommerce", "messages": [{"role": "user", "content": "要红色"}]})
    assert call(svc, "GET", "/v1/sessions/shared-name/state").json()["fields"]["color"]["value"] == "black"
    # a session id can't smuggle a path into another tenant's key
    assert call(svc, "GET", "/v1/sessions/..%2Fglobex%2F-%2Fshared-name/state").status_code in (400, 404)


def test_a_users_memory_stays_within_the_tenant_and_the_user(svc):
    """`user` in the body (and ?user= on reads) puts the session under tenant/user/session: a new
    session of the same user in the same tenant starts from the remembered seat preference; the
    same user name in another tenant, another user, or no user starts empty."""
    seat = {"domain": "travel", "user": "amy", "messages": [
        {"role": "user", "content": "下个月去三亚，座位要靠窗", "timestamp": "2024-05-01T10:00:00+08:00"}]}
    trip = {"domain": "travel", "messages": [{"role": "user", "content": "订去成都的机票",
                                               "timestamp": "2024-06-01T10:00:00+08:00"}]}
    assert call(svc, "POST", "/v1/sessions/mem-1/messages", json=seat).json()["user"] == "amy"
    later = call(svc, "POST", "/v1/sessions/mem-2/messages", json={**trip, "user": "amy"}).json()
    assert later["state"]["fields"]["seat_preference"]["value"] == "window"
    why = call(svc, "GET", "/v1/sessions/mem-2/why/seat_preference?user=amy", key=("acme", "reader")).json()
    assert why["history"][0]["source"] == "user_memory"
    xml = call(svc, "GET", "/v1/sessions/mem-2/context?action=book_flight&user=amy").json()["xml"]
    assert 'name="seat_preference"' in xml
    error(call(svc, "GET", "/v1/sessions/mem-2/state", key=("acme", "reader")), 404, "CE501")  # it is amy's
    for key, body in ((("globex", "writer"), {**trip, "user": "amy"}), (("acme", "writer"), {**trip, "user": "bob"}),
                      (("acme", "writer"), trip)):
        state = call(svc, "POST", "/v1/sessions/mem-3/messages", key=key, json=body).json()["state"]
        assert "seat_preference" not in state["fields"], (key, body)
    listed = call(svc, "GET", "/v1/sessions", key=("acme", "reader")).json()["sessions"]
    assert {"mem-2": "amy"} == {s["session"]: s["user"] for s in listed if s["session"] == "mem-2"}
    error(call(svc, "POST", "/v1/sessions/mem-4/messages", json={**trip, "user": "../globex"}), 400, "CE002")


def test_erasure_through_the_service(svc):
    """A message, then a whole end user, erased over HTTP: the cached state of the running service
    shows [erased] at once, verify passes, and bad targets or roles are refused with code and fix."""
    said = {"role": "user", "content": "我想买耳机，预算1500以内，要白色，电话13912345678", "timestamp": "2024-05-01T10:00:00+08:00"}
    for s in ("erase-1", "erase-2"):
        body = {"domain": "ecommerce", "user": "eve", "messages": [said, {**MSG, "content": "要黑色"}]}
        assert call(svc, "POST", f"/v1/sessions/{s}/messages", json=body).status_code == 200
    assert call(svc, "GET", "/v1/sessions/erase-1/state?user=eve").json()["fields"]["color"]["value"] == "black"
    order = {"actor": "dpo", "reason": "GDPR art. 17 request 5", "message": 0}
    error(call(svc, "POST", "/v1/sessions/erase-1/erase?user=eve", key=("acme", "reader"), json=order), 403, "CE902")
    error(call(svc, "POST", "/v1/sessions/erase-1/erase?user=eve", json={**order, "message": 9}), 400, "CE522")
    error(call(svc, "POST", "/v1/sessions/erase-1/erase?user=eve", key=("globex", "writer"), json=order), 404, "CE501")
    error(call(svc, "POST", "/v1/users/nobody/erase", json={"actor": "dpo", "reason": "r"}), 400, "CE522")
    error(call(svc, "POST", "/v1/sessions/erase-1/erase?user=eve", json={"reason": "r"}), 400, "CE906")
    r = call(svc, "POST", "/v1/sessions/erase-1/erase?user=eve", json=order)
    assert r.status_code == 200 and r.json()["erased"][0]["messages"] == 1, r.text
    state = call(svc, "GET", "/v1/sessions/erase-1/state?user=eve").json()
    assert state["fields"]["budget_max"]["value"] == "[erased]" and state["fields"]["color"]["value"] == "black"
    xml = call(svc, "GET", "/v1/sessions/erase-1/context?action=place_order&user=eve").json()["xml"]
    assert "13912345678" not in xml and "1500" not in xml
    # Erased by another process (the CLI) while the service holds erase-2's state in its cache.
    assert call(svc, "GET", "/v1/sessions/erase-2/state?user=eve").json()["fields"]["budget_max"]["value"] != "[erased]"
    assert main(["erase", "--store", svc["store"], "--tenant", "acme", "--user", "eve", "--session", "erase-2",
                 "--message", "0", "--actor", "dpo", "--reason", "ticket 6"]) == 0
    assert call(svc, "GET", "/v1/sessions/erase-2/state?user=eve").json()["fields"]["budget_max"]["value"] == "[erased]"
    r = call(svc, "POST", "/v1/users/eve/erase", json={"actor": "dpo", "reason": "PIPL art. 47"})
    assert [e["session"] for e in r.json()["erased"]] == ["erase-1", "erase-2"]
    assert "13912345678" not in call(svc, "GET", "/v1/sessions/erase-2/export?user=eve", key=("acme", "auditor")).text
    verdict = call(svc, "POST", "/v1/audit/verify", key=("acme", "auditor")).json()
    assert verdict["ok"], verdict


def test_roles_and_keys(svc, capsys):
    post = {"domain": "ecommerce", "messages": [MSG]}
    error(call(svc, "POST", "/v1/sessions/r1/messages", key=("acme", "reader"), json=post), 403, "CE902")
    error(call(svc, "POST", "/v1/sessions/r1/messages", key=("acme", "auditor"), json=post), 403, "CE902")
    error(call(svc, "POST", "/v1/audit/verify", key=("acme", "reader")), 403, "CE902")
    error(call(svc, "GET", "/v1/sessions", key=None), 401, "CE901")
    error(call(svc, "GET", "/v1/sessions", key="ce_000000000000_not-a-key"), 401, "CE901")
    error(call(svc, "GET", "/metrics", key=None), 401, "CE901")
    key = create_key(svc["store"], "acme", "reader")
    assert call(svc, "GET", "/v1/sessions", key=key).status_code == 200
    key_id = key.split("_")[1]
    assert main(["keys", "revoke", key_id, "--store", svc["store"]]) == 0
    error(call(svc, "GET", "/v1/sessions", key=key), 401, "CE901")
    capsys.readouterr()
    assert main(["keys", "list", "--store", svc["store"]]) == 0
    listing = capsys.readouterr().out
    assert f"{key_id}  acme  reader" in listing and "REVOKED" in listing and key.split("_", 2)[2] not in listing


def test_bad_input_is_refused_whole_with_code_and_fix(svc):
    path = "/v1/sessions/bad-1/messages"
    error(call(svc, "POST", path, content=b"{not json", headers={"content-type": "application/json"}), 400, "CE906")
    error(call(svc, "POST", path, json={"messages": [MSG]}), 400, "CE906")  # no domain
    error(call(svc, "POST", path, json={"domain": "ecommerce", "messages": []}), 400, "CE906")
    error(call(svc, "POST", path, json={"domain": "no_such_domain", "messages": [MSG]}), 404, "CE103")
    error(call(svc, "POST", path, json={"domain": "../../etc/passwd", "messages": [MSG]}), 404, "CE103")
    error(call(svc, "POST", path, json={"domain": "ecommerce", "messages": [MSG, {"role": "wizard", "content": "x"}]}),
          400, "CE200")
    error(call(svc, "POST", path, json={"domain": "ecommerce", "format": "anthropic",
                                        "messages": [{"role": "user", "content": [{"type": "hologram"}]}]}), 400, "CE200")
    error(call(svc, "POST", path, json={"domain": "ecommerce", "messages": [{**MSG, "content": "x" * 60_000}]}),
          413, "CE905")
    error(call(svc, "POST", path, json={"domain": "ecommerce", "messages": [MSG] * 2000}), 413, "CE905")
    error(call(svc, "GET", "/v1/sessions/bad-1/state"), 404, "CE501")  # nothing of the refused requests was stored
    call(svc, "POST", path, json={"domain": "ecommerce", "messages": [MSG]})
    error(call(svc, "POST", path, json={"domain": "travel", "messages": [MSG]}), 409, "CE505")
    error(call(svc, "GET", "/v1/sessions/bad-1/context?action=fly_to_mars"), 400, "CE300")
    error(call(svc, "GET", "/v1/sessions/bad-1/context?action=place_order&budget=abc"), 400, "CE906")
    error(call(svc, "GET", "/v1/sessions/bad-1/context?action=place_order&model=no-such-model"), 400, "CE403")
    error(call(svc, "GET", "/v1/sessions/bad-1/context?action=place_order&budget=5"), 422, "CE400")
    error(call(svc, "GET", "/v1/sessions/bad-1/why/no_field"), 400, "CE301")
    error(call(svc, "GET", "/v1/nothing-here"), 404, "CE908")
    error(call(svc, "DELETE", "/v1/sessions/bad-1/state"), 405, "CE908")


def test_domains_lint_health_metrics_and_openapi(svc):
    domains = call(svc, "GET", "/v1/domains", key=("acme", "reader")).json()["domains"]
    assert {"ecommerce", "travel", "finance"} <= {d["name"] for d in domains}
    good = (SAMPLE.parents[1] / "ecommerce.yaml").read_bytes()
    assert call(svc, "POST", "/v1/domains/lint", content=good).json() == {"ok": True, "problems": []}
    bad = call(svc, "POST", "/v1/domains/lint", content=good.replace(b"type: money", b"type: monee", 1)).json()
    assert not bad["ok"] and bad["problems"][0]["line"] and bad["problems"][0]["code"].startswith("CE1")
    assert httpx.get(svc["base"] + "/healthz").json()["status"] == "ok"
    metrics = call(svc, "GET", "/metrics", key=("acme", "reader")).text
    assert 'context_editor_requests_total{method="POST",route="/v1/sessions/{session}/messages",status="200"}' in metrics
    assert "context_editor_ingest_seconds_count" in metrics and "context_editor_render_seconds_bucket" in metrics
    spec = httpx.get(svc["base"] + "/openapi.json").json()
    for path in ("/v1/sessions/{session}/messages", "/v1/sessions/{session}/state", "/v1/sessions/{session}/context",
                 "/v1/sessions/{session}/why/{field}", "/v1/sessions/{session}/export", "/v1/audit/verify",
                 "/v1/domains", "/v1/domains/lint", "/healthz", "/metrics"):
        assert path in spec["paths"], path
    assert "HTTPBearer" in spec["components"]["securitySchemes"]


def test_concurrent_writers_of_one_session_with_retries(svc):
    """Parallel requests on one session, each sent twice: every message once, chains intact."""
    errors: list[str] = []

    def client(k: int) -> None:
        for i in range(3):
            batch = {"domain": "ecommerce", "messages": [{"role": "user", "content": f"预算{1000 + i}元", "id": f"c{k}-{i}"}]}
            for _ in range(2):  # the retry must add nothing
                r = call(svc, "POST", "/v1/sessions/together/messages", json=batch)
                if r.status_code != 200:
                    errors.append(r.text)
    threads = [threading.Thread(target=client, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert call(svc, "GET", "/v1/sessions/together/state").json()["message_index"] == 3 * 3 - 1


def test_load_benchmark_small(svc):
    """benchmarks/service_load.py's client loop, small: 4 clients × 5 messages over two service
    processes on one store (each request of a session goes to the other process than the last,
    so no process may serve its cached state stale): 0 errors, every message once, verified."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from service_load import load

    with running_service(svc["store"]) as second:  # a second process over the same store: requests alternate
        result = load([svc["base"], second], svc["keys"][("acme", "writer")], clients=4, messages=5)
    assert result["errors"] == 0, result["first_errors"]
    assert result["sessions_complete"] and result["audit_verify_ok"] and result["ingest_requests"] == 4 * 5
