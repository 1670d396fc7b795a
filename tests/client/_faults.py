"""A loopback HTTP proxy that does the request and then loses its answer, as a flaky network or a busy service does.

Each request is read whole, forwarded to the live service (so the write happens), and
then, as the fault function decides for that request:

    "pass"   the answer goes back
    "drop"   the connection is closed without an answer (the client sees a dropped connection)
    "stall"  nothing is sent until the client has given up (the client sees a timeout)
    "503"    a 503 with ``Retry-After: 0`` goes back instead of the answer (the service's own timeout)
    "refuse" the connection is closed before anything is forwarded (the write does not happen)

Every connection carries one request and is closed after it, so a fault never leaks into
the next request.
"""

from __future__ import annotations

import http.client
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

Fault = Callable[[str, str, int], str]  # (method, path, index of this request) -> what to do


class FaultyProxy:
    """``url`` goes to ``upstream`` through the faults; ``requests`` lists (method, path, fault) as they came."""

    def __init__(self, upstream: str, fault: Fault, *, stall: float = 1.5) -> None:
        self.upstream = urlsplit(upstream)
        self.fault = fault
        self.stall = stall
        self.requests: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._handle(self.request)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FaultyProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _handle(self, conn: socket.socket) -> None:
        head, body = _read_request(conn)
        if head is None:
            return
        request_line, *header_lines = head.split("\r\n")
        method, target, _ = request_line.split(" ", 2)
        path = urlsplit(target).path
        with self._lock:
            index = len(self.requests)
            what = self.fault(method, path, index)
            self.requests.append((method, path, what))
        if what == "refuse":
            conn.close()
            return
        headers = dict(line.split(": ", 1) for line in header_lines if ": " in line)
        headers = {k: v for k, v in headers.items() if k.lower() not in ("connection", "host", "content-length")}
        upstream = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=30)
        upstream.request(method, target, body=body, headers=headers)
        answer = upstream.getresponse()
        data = answer.read()
        status, reason, answer_headers = answer.status, answer.reason, answer.getheaders()
        upstream.close()
        if what == "drop":
            conn.close()
            return
        if what == "stall":
            time.sleep(self.stall)
            conn.close()
            return
        if what == "503":
            status, reason, data = 503, "Service Unavailable", b'{"type":"about:blank","status":503}'
            answer_headers = [("Content-Type", "application/problem+json"), ("Retry-After", "0")]
        lines = [f"HTTP/1.1 {status} {reason}"]
        lines += [f"{k}: {v}" for k, v in answer_headers if k.lower() not in ("connection", "content-length")]
        lines += [f"Content-Length: {len(data)}", "Connection: close", "", ""]
        conn.sendall("\r\n".join(lines).encode() + data)
        conn.close()


def _read_request(conn: socket.socket) -> tuple[str | None, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    text = head.decode("latin-1")
    length = 0
    for line in text.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return text, body


def every(kind: str, *, method: str, path_end: str, first: int = 1) -> Fault:
    """A fault that strikes the first ``first`` attempts of every matching request, then lets it pass.

    Attempts are counted per body-less key (method and path), reset when a request passes.
    """
    struck: dict[str, int] = {}

    def fault(m: str, path: str, index: int) -> str:
        if m != method or not path.endswith(path_end):
            return "pass"
        count = struck.get(path, 0)
        if count < first:
            struck[path] = count + 1
            return kind
        struck[path] = 0
        return "pass"

    return fault
