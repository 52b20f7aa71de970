"""The session inspector: server-rendered pages for auditors and domain authors.

/ui/sessions lists the tenant's sessions; /ui/sessions/{session} shows the conversation with
each extracted span highlighted (hover: field, extractor, confidence, round, status), every
field's history (corrections, reversions, rejections with their codes), a round slider that
shows the state as of that round, the rendered context of any action at any budget, and the
audit verdict. The state of every round is computed here in one pass over the edit log and
sent with the page, so the slider needs no request; contexts are fetched from
/ui/sessions/{session}/context. No build step, no CDN: one template, a little vanilla JS.

Authentication: the same keys as the API. `Authorization: Bearer KEY` works; for a browser,
/ui/login takes the key in a form (POST, never in a URL) and sets it as an HttpOnly,
SameSite=Strict cookie scoped to /ui, which only the /ui pages accept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote

from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape

from .. import audit
from ..inject import format_value
from ..model import Edit, Message, State
from ..pipeline import ContextEditor
from ..errors import AuthError, Errors
from .keys import Principal, authenticate

if TYPE_CHECKING:
    from .app import Service

COOKIE = "ce_key"
_env = Environment(loader=FileSystemLoader(str(Path(__file__).parent / "templates")),
                   autoescape=select_autoescape(["html"]))


def highlighted(msg: Message, spans: list[dict[str, Any]]) -> Markup:
    """The message text with each extracted span wrapped in a <mark> whose title says where it
    went. Overlapping spans (two fields from one phrase) share the first mark."""
    out, pos = [], 0
    text = msg.content
    for s in sorted(spans, key=lambda s: (s["start"], -s["end"])):
        start, end = max(s["start"], 0), min(s["end"], len(text))
        if start < pos or start >= end:
            continue
        tip = "; ".join(f"{x['field']} = {x['value']} ({x['status']}) via {x['extractor']}, confidence "
                        f"{x['confidence']}, round {x['round']}" for x in spans
                        if x["start"] < end and x["end"] > start)
        out.append(escape(text[pos:start]))
        out.append(Markup('<mark class="span {}" title="{}" data-field="{}" data-round="{}">{}</mark>').format(
            s["status"], tip, s["field"], s["round"], text[start:end]))
        pos = end
    out.append(escape(text[pos:]))
    return Markup("").join(out)


def snapshots(editor: ContextEditor, key: str, edits: list[Edit], last_round: int) -> list[dict[str, Any]]:
    """The state at the end of every round 0..last_round, in one pass over the edit log."""
    state = State(editor.domain.name, editor.domain.version_hash, key)
    out, i = [], 0
    for rnd in range(last_round + 1):
        while i < len(edits) and edits[i].round <= rnd:
            state.apply(edits[i])
            i += 1
        out.append({"round": rnd, "phase": state.phase,
                    "fields": {n: {"value": format_value(fs.value), "round": fs.set_round, "source": fs.source}
                               for n, fs in state.fields.items() if fs.present},
                    "alerts": [f"{a.code}: {a.message}" for a in state.alerts]})
    return out


def session_page(editor: ContextEditor, key: str, session: str) -> str:
    store = editor.store
    messages, edits = store.messages(key), store.edits(key)
    spans: dict[int, list[dict[str, Any]]] = {}
    for e in edits:
        p = e.provenance
        if p is None or e.op not in ("set", "reject") or e.field is None:
            continue
        spans.setdefault(p.message_index, []).append(
            {"start": p.span[0], "end": p.span[1], "field": e.field, "value": format_value(e.after),
             "extractor": p.extractor, "confidence": p.confidence, "round": e.round,
             "status": "accepted" if e.op == "set" else f"rejected {e.reason}"})
    final = editor.history_state(key)
    histories = [{"field": n, "entries": [{"round": h.round, "status": h.status, "source": h.source,
                                           "value": format_value(h.value), "reason": h.reason,
                                           "via": f"{h.provenance.extractor} '{h.provenance.text}'" if h.provenance else ""}
                                          for h in fs.history]}
                 for n, fs in final.fields.items() if fs.history]
    last_round = messages[-1].round if messages else 0
    verdict = audit.verify(store, key)[0]
    data = json.dumps(snapshots(editor, key, edits, last_round), ensure_ascii=False).replace("<", "\\u003c")
    return _env.get_template("session.html").render(
        session=session, domain=editor.domain, last_round=last_round, verdict=verdict, histories=histories,
        messages=[{"index": m.index, "round": m.round, "role": m.role, "name": m.name or "",
                   "html": highlighted(m, spans.get(m.index, []))} for m in messages],
        actions=list(editor.domain.actions), snapshots=Markup(data), quote=quote)


def mount(app: FastAPI, svc: "Service") -> None:
    """Add the /ui routes to the service's app."""

    def viewer(request: Request) -> Principal | None:
        """The caller of a page: a Bearer header, else the login cookie; None if neither is valid."""
        header = request.headers.get("authorization", "")
        key = header[7:].strip() if header.lower().startswith("bearer ") else request.cookies.get(COOKIE)
        try:
            return authenticate(svc.store, key)
        except AuthError:
            return None

    def login_redirect(request: Request) -> RedirectResponse:
        return RedirectResponse(f"/ui/login?next={quote(request.url.path)}", status_code=303)

    @app.get("/ui", include_in_schema=False)
    def ui_root() -> RedirectResponse:
        return RedirectResponse("/ui/sessions", status_code=303)

    @app.get("/ui/login", include_in_schema=False)
    def login_form(next: str = "/ui/sessions") -> HTMLResponse:
        return HTMLResponse(_env.get_template("login.html").render(next=_local(next), error=None))

    @app.post("/ui/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        form = parse_qs((await svc.body(request)).decode("utf-8", "replace"))
        key, target = (form.get("key") or [""])[0].strip(), _local((form.get("next") or ["/ui/sessions"])[0])
        try:
            authenticate(svc.store, key)
        except AuthError as exc:
            page = _env.get_template("login.html").render(next=target, error=str(exc))
            return HTMLResponse(page, status_code=401)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(COOKIE, key, httponly=True, samesite="strict", path="/ui",
                            secure=request.url.scheme == "https")
        return response

    @app.post("/ui/logout", include_in_schema=False)
    def logout() -> Response:
        response = RedirectResponse("/ui/login", status_code=303)
        response.delete_cookie(COOKIE, path="/ui")
        return response

    @app.get("/ui/sessions", include_in_schema=False)
    def index(request: Request) -> Response:
        p = viewer(request)
        if p is None:
            return login_redirect(request)
        rows = []
        for s, user in svc.sessions.tenant_sessions(p.tenant):
            info = svc.store.session(svc.sessions.key(p.tenant, s, user))
            if info and user is None:  # the pages address sessions without a user (API: ?user=)
                rows.append({"session": s, "domain": info.domain, "messages": info.messages, "edits": info.edits})
        return HTMLResponse(_env.get_template("index.html").render(tenant=p.tenant, role=p.role, rows=rows, quote=quote))

    @app.get("/ui/sessions/{session}", include_in_schema=False)
    def page(session: str, request: Request) -> Response:
        p = viewer(request)
        if p is None:
            return login_redirect(request)
        p.require("read")
        html = svc.read(p, session, lambda editor, key: session_page(editor, key, session))
        return HTMLResponse(html)

    @app.get("/ui/sessions/{session}/context", include_in_schema=False)
    def context(session: str, request: Request, action: str, budget: int | None = Query(None, gt=0),
                as_of_round: int | None = Query(None, ge=0), model: str | None = None) -> dict[str, Any]:
        p = viewer(request)
        if p is None:
            raise Errors.NO_KEY(problem="not logged in (log in at /ui/login with your key)")
        p.require("read")
        return svc.context(p, session, action, budget, model, as_of_round)


def _local(target: str) -> str:
    """Only redirect within the inspector (never to another site)."""
    return target if target.startswith("/ui/") and not target.startswith("//") else "/ui/sessions"


__all__ = ["mount", "session_page"]
