"""The HTTP API: the same ContextEditor behind versioned resources under /v1.

Every request but /healthz carries `Authorization: Bearer KEY`; the tenant is the key's, so a
session id in a URL only ever names one of the caller's own sessions. Bodies and messages have
size limits (413). Errors are `{"error": {"code", "message", "fix"}}` with the CLI's codes.
"""

from __future__ import annotations

import json
import logging
from importlib.metadata import version
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from time import perf_counter
from typing import Any, TypeVar

from fastapi import Depends, FastAPI, Query, Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import audit
from ..conversation import adapt
from ..domain import lint_domain, load_domain
from ..errors import ContextEditorError, Errors
from ..inject import RenderedContext
from ..model import State
from ..pipeline import ContextEditor
from ..store import Store, open_store
from .errors import error_body, status_for
from .keys import Principal, authenticate
from .metrics import Metrics
from .sessions import Sessions, bundled_domains

log = logging.getLogger("context_editor.service")
__version__ = version("context-editor")
T = TypeVar("T")
MAX_BODY_BYTES = 8_000_000
MAX_MESSAGE_BYTES = 1_000_000


class IngestRequest(BaseModel):
    """POST /v1/sessions/{session}/messages"""

    domain: str = Field(description="a bundled domain name (GET /v1/domains); a session keeps the domain it was created with")
    messages: list[dict[str, Any]] = Field(min_length=1, description="messages in the project's format "
                                           '({"role", "content", "id"?, "timestamp"?, "name"?, "tool_call_id"?, '
                                           '"tool_calls"?}); a message whose id the session holds is skipped')
    format: str | None = Field(None, description="the messages' format: project, openai-chat, openai-responses, "
                               "anthropic or langchain (detected when omitted)")
    now: str | None = Field(None, description="ISO 8601 clock for messages without a timestamp")
    user: str | None = Field(None, description="the end user the session belongs to (within the caller's tenant): "
                             "fields with `scope: user` are remembered for them across sessions; read the session "
                             "back with ?user=")


class EraseRequest(BaseModel):
    """POST /v1/sessions/{session}/erase and /v1/users/{user}/erase"""

    actor: str = Field(min_length=1, description="who erases: recorded in each tombstone")
    reason: str = Field(min_length=1, description="why (e.g. 'GDPR art. 17 request 118'): recorded in each tombstone")
    message: int | None = Field(None, description="erase this message (index) and the edits it caused")
    field: str | None = Field(None, description="erase every value of this field")


class Service:
    """What the routes share: the store, the editors, the limits and the metrics."""

    def __init__(self, store: Store, max_body_bytes: int, max_message_bytes: int, cache_sessions: int):
        self.store = store
        self.sessions = Sessions(store, cache_sessions)
        self.max_body_bytes, self.max_message_bytes = max_body_bytes, max_message_bytes
        self.metrics = Metrics()

    def principal(self, request: Request, bearer: HTTPAuthorizationCredentials | None) -> Principal:
        return authenticate(self.store, bearer.credentials if bearer else None)

    async def body(self, request: Request) -> bytes:
        """The request body, refused with 413 as soon as it passes the limit."""
        limit = self.max_body_bytes
        fix = f"send at most {limit:,} bytes per request (split the messages over several requests)"
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise Errors.TOO_LARGE(problem=f"request body is {int(declared):,} bytes, the limit is {limit:,}", fix=fix)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise Errors.TOO_LARGE(problem=f"request body is over the limit of {limit:,} bytes", fix=fix)
            chunks.append(chunk)
        return b"".join(chunks)

    def ingest(self, p: Principal, session: str, req: IngestRequest) -> dict[str, Any]:
        for i, raw in enumerate(req.messages):
            size = len(json.dumps(raw, ensure_ascii=False).encode("utf-8"))
            if size > self.max_message_bytes:
                raise Errors.TOO_LARGE(problem=f"messages[{i}] is {size:,} bytes, the limit is {self.max_message_bytes:,}",
                                       fix="store large payloads elsewhere and send a reference, or trim the tool result")
        messages = adapt(req.messages, "<request>", req.format)  # all checked before anything is stored
        key = self.sessions.key(p.tenant, session, req.user)
        editor = self.sessions.editor_for_write(p.tenant, session, req.domain, req.user)
        with self.sessions.lock(key):
            before = editor.state(key).message_index
            for m in messages:
                start = perf_counter()
                editor.add(key, m, now=req.now, idempotent=True)
                self.metrics.ingest.observe(perf_counter() - start)
            state = editor.state(key)
            added = state.message_index - before
            self.metrics.messages.inc(added)
            return {"session": session, "user": req.user, "added": added, "skipped": len(messages) - added,
                    "state": self.state_json(state, session)}

    def erase(self, p: Principal, sessions: Sequence[tuple[str, str | None]], req: EraseRequest) -> dict[str, Any]:
        """Erase in the caller's sessions (each under its lock), then drop them from the caches."""
        keys = [self.sessions.info(p.tenant, s, u).session for s, u in sessions]
        locks = sorted({id(lock): lock for lock in map(self.sessions.lock, keys)}.items())
        for _, lock in locks:
            lock.acquire()
        try:
            done = audit.erase(self.store, keys, req.actor, req.reason,
                               None if req.message is None else [req.message], req.field)
        finally:
            for key in keys:
                self.sessions.forget(key)
            for _, lock in reversed(locks):
                lock.release()
        return {"erased": [{"session": s, "user": u,
                            "messages": sum(1 for t in done if t.session == k and t.kind == "message"),
                            "edits": sum(1 for t in done if t.session == k and t.kind == "edit")}
                           for (s, u), k in zip(sessions, keys)]}

    @staticmethod
    def state_json(state: State, session: str) -> dict[str, Any]:
        return {**state.to_json(), "session": session, "message_index": state.message_index}

    def read(self, p: Principal, session: str, work: Callable[[ContextEditor, str], T], user: str | None = None) -> T:
        """Run `work(editor, store key)` on one of the caller's sessions, under its lock."""
        info = self.sessions.info(p.tenant, session, user)
        key = info.session
        with self.sessions.lock(key):
            return work(self.sessions.editor_of(info), key)

    def context(self, p: Principal, session: str, action: str, budget: int | None, model: str | None,
                as_of_round: int | None, user: str | None = None) -> dict[str, Any]:
        if model and ("/" in model or "\\" in model or model.endswith(".json")):
            raise Errors.MALFORMED_REQUEST(problem=f"model {model!r} looks like a file path; the service never opens "
                                           "paths a client names", fix="pass a model name (gpt-4o, o200k_base, claude-…)")

        def work(editor: ContextEditor, key: str) -> RenderedContext:
            start = perf_counter()
            ctx = editor.render(key, action, budget=budget, as_of_round=as_of_round, model=model)
            self.metrics.render.observe(perf_counter() - start)
            return ctx

        ctx = self.read(p, session, work, user)
        return {"session": session, "action": ctx.action, "xml": ctx.xml, "tokens": ctx.tokens, "budget": ctx.budget,
                "tokens_estimated": ctx.estimated, "fields": ctx.fields,
                "missing": ctx.missing, "dropped": ctx.dropped, "alerts": ctx.alerts}


def create_app(store: Store | str | None, *, max_body_bytes: int = MAX_BODY_BYTES,
               max_message_bytes: int = MAX_MESSAGE_BYTES, cache_sessions: int = 1024) -> FastAPI:
    """The ASGI application over one store (a Store or its URL)."""
    svc = Service(store if isinstance(store, Store) else open_store(store), max_body_bytes, max_message_bytes,
                  cache_sessions)
    app = FastAPI(title="context-editor", version=__version__,
                  description="Conversations -> provenance-tagged state -> the minimal XML context each action needs.")
    app.state.service = svc
    bearer = HTTPBearer(auto_error=False, description="a key from `context-editor keys create --tenant T`")

    def caller(request: Request, creds: HTTPAuthorizationCredentials | None = Security(bearer)) -> Principal:
        return svc.principal(request, creds)

    def role(permission: str) -> Callable[..., Principal]:
        def check(p: Principal = Depends(caller)) -> Principal:
            p.require(permission)
            return p
        return check

    reader, writer, auditor = role("read"), role("write"), role("audit")

    @app.middleware("http")
    async def measure(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        start = perf_counter()
        response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", "unmatched")
        svc.metrics.requests.labels(request.method, route, str(response.status_code)).inc()
        svc.metrics.latency.labels(request.method, route).observe(perf_counter() - start)
        return response

    @app.exception_handler(ContextEditorError)
    async def on_error(request: Request, exc: ContextEditorError) -> JSONResponse:
        return JSONResponse(error_body(exc), status_code=status_for(exc))

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        err = Errors.NO_ENDPOINT(method=request.method, path=request.url.path, detail=exc.detail)
        return JSONResponse(error_body(err), status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        err = Errors.MALFORMED_REQUEST(problem=f"{where}: {first.get('msg')}", fix="see GET /openapi.json for the parameters")
        return JSONResponse(error_body(err), status_code=400)

    @app.exception_handler(Exception)
    async def on_bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        err = Errors.INTERNAL(kind=type(exc).__name__)
        return JSONResponse(error_body(err), status_code=500)

    @app.get("/healthz", tags=["ops"], summary="Liveness and store reachability (no key needed)")
    def healthz() -> dict[str, Any]:
        svc.store.session("healthz")  # a cheap read: a store error (503) if the store is down
        return {"status": "ok", "version": __version__}

    @app.get("/metrics", tags=["ops"], summary="Prometheus text: requests, latency, ingest and render timings")
    def metrics(p: Principal = Depends(caller)) -> Response:
        return Response(svc.metrics.text(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/sessions", tags=["sessions"], summary="The caller's tenant's sessions")
    def list_sessions(p: Principal = Depends(reader)) -> dict[str, Any]:
        out = []
        for s, user in svc.sessions.tenant_sessions(p.tenant):
            info = svc.store.session(svc.sessions.key(p.tenant, s, user))
            if info:
                out.append({"session": s, "user": user, "domain": info.domain, "messages": info.messages,
                            "edits": info.edits})
        return {"tenant": p.tenant, "sessions": out}

    @app.post("/v1/sessions/{session}/messages", tags=["sessions"], summary="Add messages; returns the state after them",
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": IngestRequest.model_json_schema()}}}})
    async def post_messages(session: str, request: Request, p: Principal = Depends(writer)) -> dict[str, Any]:
        body = await svc.body(request)
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise Errors.MALFORMED_REQUEST(problem=f"the body is not JSON: {exc}",
                                        fix='send {"domain": "ecommerce", "messages": [{"role": "user", "content": "..."}]}') from None
        try:
            req = IngestRequest.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "body"
            raise Errors.MALFORMED_REQUEST(problem=f"{where}: {first['msg']}",
                                        fix='send {"domain": "ecommerce", "messages": [{"role": "user", "content": "..."}]}') from None
        return await run_in_threadpool(svc.ingest, p, session, req)

    @app.get("/v1/sessions/{session}/state", tags=["sessions"], summary="The state now, or at the end of round N")
    def get_state(session: str, as_of_round: int | None = Query(None, ge=0), user: str | None = Query(None, description="the session's end user, as given when it was created"),
                  p: Principal = Depends(reader)) -> dict[str, Any]:
        return svc.read(p, session, lambda ed, key: svc.state_json(ed.state(key, as_of_round), session), user)

    @app.get("/v1/sessions/{session}/context", tags=["sessions"],
             summary="The XML context of an action: {xml, tokens, budget, missing, dropped}")
    def get_context(session: str, action: str, budget: int | None = Query(None, gt=0), model: str | None = None,
                    as_of_round: int | None = Query(None, ge=0), user: str | None = Query(None, description="the session's end user, as given when it was created"),
                    p: Principal = Depends(reader)) -> dict[str, Any]:
        return svc.context(p, session, action, budget, model, as_of_round, user)

    @app.get("/v1/sessions/{session}/why/{field}", tags=["sessions"], summary="A field's provenance and full history")
    def get_why(session: str, field: str, as_of_round: int | None = Query(None, ge=0), user: str | None = Query(None, description="the session's end user, as given when it was created"),
                p: Principal = Depends(reader)) -> dict[str, Any]:
        return {**svc.read(p, session, lambda ed, key: ed.why(key, field, as_of_round), user), "session": session}

    @app.get("/v1/sessions/{session}/export", tags=["audit"], summary="The session as JSONL: header, messages, edits",
             response_class=StreamingResponse)
    def get_export(session: str, user: str | None = Query(None, description="the session's end user, as given when it was created"), p: Principal = Depends(auditor)) -> StreamingResponse:
        key = svc.sessions.info(p.tenant, session, user).session
        records = list(audit.export(svc.store, key))

        def lines() -> Iterator[str]:
            for r in records:
                yield json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n"
        return StreamingResponse(lines(), media_type="application/x-ndjson")

    @app.post("/v1/audit/verify", tags=["audit"], summary="Verify the hash chains of every session of the caller's tenant")
    def post_verify(p: Principal = Depends(auditor)) -> dict[str, Any]:
        verdicts = []
        for s, user in svc.sessions.tenant_sessions(p.tenant):
            v = audit.verify(svc.store, svc.sessions.key(p.tenant, s, user))[0]
            verdicts.append({"session": s, "user": user, "ok": v.ok, "messages": v.messages, "edits": v.edits,
                             "broken_at": v.broken_at, "reason": v.reason})
        return {"ok": all(v["ok"] for v in verdicts), "sessions": verdicts}

    @app.post("/v1/sessions/{session}/erase", tags=["audit"],
              summary="Erase a message, a field or the whole session (right to erasure); commitments and tombstones stay")
    def post_erase(session: str, req: EraseRequest, user: str | None = Query(None, description="the session's end user"),
                   p: Principal = Depends(writer)) -> dict[str, Any]:
        return svc.erase(p, [(session, user)], req)

    @app.post("/v1/users/{user}/erase", tags=["audit"],
              summary="Erase every session of one end user of the caller's tenant, and their memory")
    def post_erase_user(user: str, req: EraseRequest, p: Principal = Depends(writer)) -> dict[str, Any]:
        if req.message is not None or req.field is not None:
            raise Errors.ERASE(problem="a user's erasure takes whole sessions",
                               fix="erase a message or a field with POST /v1/sessions/{session}/erase?user=")
        sessions = [(s, u) for s, u in svc.sessions.tenant_sessions(p.tenant) if u == user]
        if not sessions:
            raise Errors.ERASE(problem=f"no session of this tenant belongs to user {user!r}",
                               fix="check the user id (GET /v1/sessions lists each session's user)")
        return svc.erase(p, sessions, req)

    @app.get("/v1/domains", tags=["domains"], summary="The bundled domains: fields, actions, version hash")
    def get_domains(p: Principal = Depends(reader)) -> dict[str, Any]:
        return {"domains": [_describe(name) for name in bundled_domains()]}

    @app.post("/v1/domains/lint", tags=["domains"], summary="Lint a domain file sent as the body (YAML)",
              openapi_extra={"requestBody": {"required": True, "content": {"application/yaml": {"schema": {"type": "string"}}}}})
    async def post_lint(request: Request, p: Principal = Depends(reader)) -> dict[str, Any]:
        body = await svc.body(request)
        return await run_in_threadpool(_lint, body)

    from .inspector import mount  # the page for people, served by the same process

    mount(app, svc)
    return app


_described: dict[str, dict[str, Any]] = {}


def _describe(name: str) -> dict[str, Any]:
    if name not in _described:
        d = load_domain(name)
        _described[name] = {"name": d.name, "version": d.version, "version_hash": d.version_hash,
                            "languages": list(d.languages), "fields": list(d.fields), "actions": list(d.actions)}
    return _described[name]


def _lint(body: bytes) -> dict[str, Any]:
    """Lint YAML text in a private temporary folder (the body never names a server path)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "domain.yaml"
        path.write_bytes(body)
        _, problems = lint_domain(path)
    return {"ok": not problems, "problems": [{"line": x.line, "code": x.code, "message": x.message, "fix": x.fix,
                                              "path": x.path} for x in problems]}

