"""What an operator watches: a request id on every request, one JSON log line per request, ``/metrics``.

:class:`Observed` is the outermost ASGI middleware: it takes the client's ``X-Request-Id`` (when it is a
short token) or makes one, answers with it, keeps it in a context variable for every log line written while
the request runs, counts the request in the service's :class:`~convmem.telemetry.MetricsRegistry` by method,
route template and status, and logs one access line. :class:`JsonFormatter` writes log records as JSON
objects (``--log-json``): the time, level, logger, message (passed through :func:`convmem.errors.redact`),
the request id and the access fields. No line holds a body, a message, a header or a key: the access line
names the route's template (``/v1/sessions/{session_id}/messages``), not the path.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import datetime, timezone
from typing import Any

from .._redact import redact
from ..telemetry import MetricsRegistry

__all__ = ["ACCESS", "FIELDS", "JsonFormatter", "Observed", "current_request_id", "use_json_logs"]

Scope_ = MutableMapping[str, Any]
ASGIApp = Callable[[Scope_, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]
ACCESS = logging.getLogger("convmem.server.access")
FIELDS = ("request_id", "method", "route", "status", "duration_ms")  # what a JSON line carries beside the message
_GIVEN_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")  # a client's id is echoed only when it is a short token
_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("convmem_request_id", default=None)


def current_request_id() -> str | None:
    """The id of the request being answered in this context (None outside a request)."""
    return _request_id.get()


class Observed:
    """Pure ASGI middleware: request ids, the request metrics and the access log line."""

    def __init__(self, app: ASGIApp, *, registry: MetricsRegistry | None) -> None:
        self.app, self.registry = app, registry

    async def __call__(
        self, scope: Scope_, receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _GIVEN_ID.match(given) else uuid.uuid4().hex
        token = _request_id.set(request_id)
        status = 500  # what an app that raised before answering is counted as
        started = time.perf_counter()

        async def stamped(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, stamped)
        finally:
            elapsed = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", None) or "unmatched"  # the template: no id, no cardinality
            method = str(scope.get("method", ""))
            if self.registry is not None:
                self.registry.add("convmem.http.requests", 1, {"method": method, "route": route, "status": status})
                self.registry.observe("convmem.http.duration", elapsed, {"method": method, "route": route})
            ACCESS.info(
                "%s %s %s",
                method,
                route,
                status,
                extra={
                    "request_id": request_id,
                    "method": method,
                    "route": route,
                    "status": status,
                    "duration_ms": round(elapsed * 1000, 3),
                },
            )
            _request_id.reset(token)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message (redacted), request id, access fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        request_id = getattr(record, "request_id", None) or current_request_id()
        if request_id is not None:
            line["request_id"] = request_id
        for field in FIELDS[1:]:
            value = getattr(record, field, None)
            if value is not None:
                line[field] = value
        if record.exc_info and record.exc_info[0] is not None:
            line["error_type"] = record.exc_info[0].__name__  # the class only: a traceback's text may quote content
        return json.dumps(line, ensure_ascii=False)


def use_json_logs(level: int = logging.INFO) -> logging.Handler:
    """Write the ``convmem`` loggers' records to stderr as JSON lines (once per process); returns the handler."""
    logger = logging.getLogger("convmem")
    for handler in logger.handlers:
        if isinstance(handler.formatter, JsonFormatter):
            return handler
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler
