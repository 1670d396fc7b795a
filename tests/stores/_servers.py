"""The real PostgreSQL and Redis servers the server-backend tests run against, and per-test namespaces.

Each test gets its own PostgreSQL schema or Redis key prefix, derived from its
temporary directory, so tests can run in parallel; the fixtures here remove
what they created. URLs come from ``CONVMEM_POSTGRES_URL`` / ``CONVMEM_REDIS_URL``
or default to the servers ``.ci/run`` starts on this machine.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

PG_URL = os.environ.get("CONVMEM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("CONVMEM_REDIS_URL", "redis://127.0.0.1:6379/0")


def tag(location: Path | str) -> str:
    return hashlib.sha1(str(location).encode()).hexdigest()[:16]


def schema_for(location: Path | str) -> str:
    return f"convmem_t_{tag(location)}"


def prefix_for(location: Path | str) -> str:
    return f"convmem-t-{tag(location)}:"


def drop_schemas(schemas: set[str]) -> None:
    import psycopg

    names = sorted(schemas)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for start in range(0, len(names), 10):  # ten to a statement: a module can leave hundreds
            batch = names[start : start + 10]
            try:
                conn.execute(f"DROP SCHEMA IF EXISTS {', '.join(batch)} CASCADE".encode())
            except psycopg.errors.OutOfMemory:
                # Ten schemas' objects can overflow the server's lock table (max_locks_per_transaction
                # x max_connections) while another worker drops its own: one schema to a statement then.
                for name in batch:
                    conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE".encode())
    schemas.clear()


def drop_prefixes(prefixes: set[str]) -> None:
    import redis

    with redis.Redis.from_url(REDIS_URL) as client:
        for prefix in sorted(prefixes):
            keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
            for start in range(0, len(keys), 500):
                client.delete(*keys[start : start + 500])
    prefixes.clear()


class RedisServer:
    """A redis-server of the test's own, on a free port; durable = AOF with fsync on every write."""

    def __init__(self, directory: Path, *, durable: bool, extra: Sequence[str] = ()) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if durable else ["--appendonly", "no"]
        self.command = [
            shutil.which("redis-server") or "redis-server",
            *["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", *persistence],
            *["--dir", str(directory), "--daemonize", "no", "--logfile", str(directory / "redis.log")],
            *extra,
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        raise AssertionError("redis-server did not start")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
