"""The FastAPI application: authentication, limits, error mapping and the OpenAPI document.

Routes live in :mod:`~convmem.server.routes_sessions`,
:mod:`~convmem.server.routes_memory` and :mod:`~convmem.server.routes_admin`;
this module wires them to one :class:`Service` and adds what every request
goes through: the body-size limit and the time limit (pure ASGI middleware),
the key check (a dependency), and the problem+json error handlers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, MutableMapping
from importlib.resources import files
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..errors import ConvmemError
from ..telemetry import CONTENT_TYPE, HTTP_METRICS, MetricsRegistry, Telemetry
from .backends import Backend, open_backend
from .deps import admin, tenant_of
from .json_rules import STORABLE_JSON
from .keys import KeyRegistry, open_registry
from .links import add_links
from .memories import MemoryService
from .observe import Observed, use_json_logs
from .problems import MEDIA_TYPE, PROBLEM_SCHEMA, problem, problem_of
from .sessions import SessionService
from .settings import Settings

__all__ = ["Service", "app_from_env", "create_app"]

log = logging.getLogger("convmem.server")
Scope_ = MutableMapping[str, Any]
MAX_HEAD = 64 * 1024  # the request line and headers (docs/service.md)
ASGIApp = Callable[[Scope_, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class Service:
    """Everything a request needs: settings, the key registry, and the session and memory services."""

    def __init__(
        self, settings: Settings, *, registry: KeyRegistry | None = None, backend: Backend | None = None
    ) -> None:
        self.settings = settings
        self.registry = registry or open_registry(settings.keys)
        self.backend = backend or open_backend(settings.store, schema=settings.pg_schema, prefix=settings.redis_prefix)
        # The memories' telemetry: metrics into the registry /metrics serves, and OpenTelemetry when asked.
        self.metrics = MetricsRegistry(HTTP_METRICS) if settings.metrics else None
        telemetry = Telemetry(otel=True, registry=self.metrics) if settings.otel else None
        if telemetry is None and self.metrics is not None:
            telemetry = Telemetry(otel=False, registry=self.metrics)
        self.telemetry = telemetry
        self.sessions = SessionService(
            self.backend, keep_sessions=settings.keep_sessions, keep_tokens=settings.keep_tokens, telemetry=telemetry
        )
        embedder = None
        if settings.embedder == "hashing":
            from ..longterm.recall.embedders import HashingEmbedder

            embedder = HashingEmbedder()
        self.memories = MemoryService(self.backend, self.sessions, embedder=embedder)
        from ..tokens import counter_for

        counter_for("gpt-4o").count_text("warm")  # load the default vocabulary now, not on a worker's first request

    def close(self) -> None:
        self.backend.close()
        self.registry.close()


def create_app(settings: Settings | None = None, *, service: Service | None = None) -> FastAPI:
    """The service as an ASGI app (give ``service`` to share a registry or backend, e.g. in tests)."""
    from .routes_admin import router as admin_router
    from .routes_forget import router as forget_router
    from .routes_memory import router as memory_router
    from .routes_sessions import router as sessions_router

    settings = settings or (service.settings if service is not None else Settings())
    service = service or Service(settings)
    app = FastAPI(
        title="convmem",
        version=__version__,
        summary="Conversation memory as a service: sessions, contexts within exact budgets, facts, blocks, recall.",
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.state.service = service
    app.include_router(sessions_router, dependencies=[Depends(tenant_of)])
    app.include_router(memory_router, dependencies=[Depends(tenant_of)])
    app.include_router(forget_router, dependencies=[Depends(tenant_of)])
    app.include_router(admin_router, dependencies=[Depends(admin)])
    _handlers(app)

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    metrics = service.metrics
    if metrics is not None:

        @app.get("/metrics", include_in_schema=False)
        def metrics_text() -> Response:
            # Unauthenticated like /healthz: its labels name no tenant, user, session or key.
            return Response(metrics.render(), media_type=CONTENT_TYPE)

    if settings.log_json:
        use_json_logs()
    if settings.ui:
        app.mount("/ui", StaticFiles(directory=str(files("convmem.server") / "static"), html=True), name="ui")

        @app.get("/", include_in_schema=False)
        def root() -> RedirectResponse:
            return RedirectResponse("/ui/")

    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    limited = Limits(app, max_body=settings.max_body_bytes, timeout=settings.request_timeout)
    app.state.asgi = Observed(limited, registry=metrics)  # outermost: a 413 or a 503 has a request id too
    return app


def app_from_env() -> Any:
    """The app of one worker process, from ``CONVMEM_SERVE_*`` (``uvicorn --factory``)."""
    app = create_app(Settings.from_env())
    return app.state.asgi


def _problem_response(body: dict[str, Any], headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(body, status_code=body["status"], media_type=MEDIA_TYPE, headers=headers)


def _handlers(app: FastAPI) -> None:
    def scrubber(request: Request) -> Any:
        from .tenancy import Scope

        tenant = getattr(request.state, "tenant", None)
        if tenant is None:
            return None
        return Scope(tenant, request.query_params.get("user_id")).scrub

    @app.exception_handler(ConvmemError)  # the service's own ServiceError included
    async def convmem_error(request: Request, exc: ConvmemError) -> JSONResponse:
        body = problem_of(exc, scrubber(request))
        if body["status"] >= 500:
            log.warning("%s %s: %s", request.method, request.url.path, type(exc).__name__)
        return _problem_response(body, {"WWW-Authenticate": "Bearer"} if body["status"] == 401 else None)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in exc.errors()
        ]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(p) for p in first["loc"])
        detail = f"{where}: {first['msg']}" if where else str(first["msg"])
        return _problem_response(problem(422, "invalid-request", "Invalid request", detail, errors=errors))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # a body the JSON reader refused is invalid input like any other
            detail = why_not_json(await request.body())
            return _problem_response(problem(422, "invalid-request", "Invalid request", detail))
        kinds = {404: "not-found", 405: "method-not-allowed", 413: "too-large"}
        body = problem(exc.status_code, kinds.get(exc.status_code, "http"), str(exc.detail), str(exc.detail))
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(app, request))
        return _problem_response(body, headers)

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed: %s", request.method, request.url.path, type(exc).__name__)
        return _problem_response(problem(500, "internal", "Internal error", "the service failed; this is a bug"))


def allowed_methods(app: FastAPI, request: Request) -> list[str]:
    """Every method some route of this path answers (Starlette's 405 names only the first route's): each asked."""
    from starlette.routing import Match

    methods = {
        method
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE")
        if any(r.matches({**request.scope, "method": method})[0] is Match.FULL for r in app.router.routes)
    }
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


def why_not_json(body: bytes) -> str:
    """What is wrong with a body the JSON reader refused, in the client's terms (not the reader's)."""
    from ..errors import InvalidMessageError
    from ..limits import json_text_depth

    text = body.decode("utf-8", "replace")
    try:
        json_text_depth(text, "body")
    except InvalidMessageError as exc:
        return f"the body {exc.reason}" if getattr(exc, "reason", None) else "the body nests too deeply"
    if re.search(r"\d{4301}", _STRINGS.sub('""', text)):
        return "the body holds an integer of more than 4300 digits (the limit is 2**53 - 1)"
    return "the body is not valid JSON"


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title, version=app.version, summary=app.summary, routes=app.routes, openapi_version="3.1.0"
    )
    components = schema.setdefault("components", {})
    components.setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
    components["schemas"]["StorableJson"] = STORABLE_JSON
    for path in schema["paths"].values():
        for operation in path.values():
            responses = operation.get("responses", {})
            if responses.get("422", {}).get("content", {}).get("application/json"):
                responses["422"]["content"] = {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for name in ("HTTPValidationError", "ValidationError"):
        components["schemas"].pop(name, None)
    add_links(schema)
    _this_service(schema, app)
    app.openapi_schema = schema
    return schema


def _this_service(schema: dict[str, Any], app: FastAPI) -> None:
    """The document describes this service: a search may name only the recall modes it can serve (dense ones
    need an embedder), so a schema-valid body is never refused for its mode."""
    service = getattr(app.state, "service", None)
    recall = schema.get("components", {}).get("schemas", {}).get("RecallIn")
    if service is None or recall is None:
        return
    modes, _ = service.memories.modes()
    recall["properties"]["mode"]["anyOf"] = [{"enum": modes, "type": "string"}, {"type": "null"}]


_UI_HEADERS = [
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class Limits:
    """Pure ASGI middleware: a body-size limit (413) and a per-request time limit (503)."""

    def __init__(self, app: ASGIApp, *, max_body: int, timeout: float) -> None:
        self.app, self.max_body, self.timeout = app, max_body, timeout

    async def __call__(
        self, scope: Scope_, receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers") or []
        head = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        head += sum(len(name) + len(value) + 4 for name, value in headers)  # "name: value\r\n"
        if head > MAX_HEAD:  # uvicorn's h11 limit does not hold under httptools, so the app holds it
            await _send_problem(
                send, 431, "head-too-large", "Request head too large", f"the request head limit is {MAX_HEAD} bytes"
            )
            return
        length = dict(headers).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await _send_problem(
                send, 413, "too-large", "Request body too large", f"the body limit is {self.max_body} bytes"
            )
            return
        started = False
        seen = 0

        async def counted() -> Any:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body:  # a chunked body has no length to check up front
                raise StarletteHTTPException(413, f"the body limit is {self.max_body} bytes")
            return message

        async def watched(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if str(scope.get("path", "")).startswith("/ui"):  # the inspector loads nothing from elsewhere
                    message = {**message, "headers": [*message.get("headers", []), *_UI_HEADERS]}
            await send(message)

        try:
            await asyncio.wait_for(self.app(scope, counted, watched), self.timeout)
        except asyncio.TimeoutError:
            if not started:
                await _send_problem(
                    send,
                    503,
                    "timeout",
                    "Request timed out",
                    f"the request took longer than {self.timeout:g}s; a write may still complete: "
                    "retry with the same message ids",
                )


async def _send_problem(
    send: Callable[[Any], Awaitable[None]], status: int, kind: str, title: str, detail: str
) -> None:
    body = json.dumps(problem(status, kind, title, detail)).encode()
    headers = [(b"content-type", MEDIA_TYPE.encode()), (b"content-length", str(len(body)).encode())]
    if status == 503:
        headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
