"""A real OpenAI-compatible chat-completions server on 127.0.0.1, with scripted replies.

The tests talk to it over HTTP through the real ``openai`` SDK: nothing in the
client is mocked. Each request pops the next :class:`Reply` of the script (or
gets the default reply when the script is empty) and is recorded with its JSON
body, so tests can assert what every request held.

Example::

    with ChatServer() as server:
        server.script(Reply.error(429, headers={"Retry-After": "0"}), Reply.text("ok"))
        summarizer = OpenAICompatibleSummarizer("gpt-4o-mini", base_url=server.base_url, api_key="sk-test")
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ChatServer", "Reply", "Request"]


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP reply."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0

    @classmethod
    def text(
        cls, content: str | None, *, prompt_tokens: int = 100, completion_tokens: int = 20, finish_reason: str = "stop"
    ) -> Reply:
        return cls.json(
            completion(
                content, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, finish_reason=finish_reason
            )
        )

    @classmethod
    def json(cls, payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
        return cls(status, json.dumps(payload).encode(), {"Content-Type": "application/json", **(headers or {})})

    @classmethod
    def error(
        cls, status: int, message: str = "error", *, code: str | None = None, headers: dict[str, str] | None = None
    ) -> Reply:
        body = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
        return cls.json(body, status, headers)

    @classmethod
    def raw(cls, body: bytes, status: int = 200, content_type: str = "application/json") -> Reply:
        return cls(status, body, {"Content-Type": content_type})

    @classmethod
    def slow(cls, seconds: float, reply: Reply | None = None) -> Reply:
        base = reply or cls.text("late")
        return cls(base.status, base.body, base.headers, seconds)


def completion(
    content: str | None,
    *,
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    finish_reason: str = "stop",
    model: str = "scripted",
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


@dataclass(frozen=True)
class Request:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def text(self) -> str:
        """All message contents of the request, joined."""
        return "\n".join(str(m.get("content") or "") for m in self.body.get("messages", []))


class ChatServer:
    """A threaded HTTP server speaking ``POST /v1/chat/completions``."""

    def __init__(self, default: Callable[[Request], Reply] | None = None) -> None:
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.requests: list[Request] = []
        self.default = default or (lambda request: Reply.text("summary"))
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                reply = server._next(request)
                if reply.delay and server._stop.wait(reply.delay):
                    return
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except OSError:  # the client gave up (a timeout test): nothing to report
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that hung up mid-reply is expected in the timeout tests

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def _next(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._replies:
                return self._replies.popleft()
        return self.default(request)

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
