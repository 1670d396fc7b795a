"""Fixtures for the service tests: an in-process app (``TestClient``) and a live uvicorn server on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from fastapi.testclient import TestClient

from convmem.server import Service, Settings, create_app
from convmem.server.backends import open_backend

from ..stores._servers import PG_URL, REDIS_URL, drop_prefixes, drop_schemas, prefix_for, schema_for

ADMIN_KEY = "admin-key-for-tests-0123456789"


@dataclass
class Api:
    """An app with two tenants' keys, and an HTTP client on it."""

    http: TestClient
    service: Service
    key_a: str
    key_b: str

    def headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key is not None else {}


def make_api(tmp: Path, store: str = "memory", **settings: object) -> Api:
    app = create_app(Settings(store=store, keys=str(tmp / "keys.db"), **settings))  # type: ignore[arg-type]
    service: Service = app.state.service
    key_a = service.registry.create_key("tenant-a").secret
    key_b = service.registry.create_key("tenant-b").secret
    return Api(TestClient(app.state.asgi, raise_server_exceptions=False), service, key_a, key_b)


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    monkeypatch.setenv("CONVMEM_ADMIN_KEY", ADMIN_KEY)
    made = make_api(tmp_path)
    yield made
    made.http.close()
    made.service.close()


@dataclass
class Live:
    url: str
    service: Service
    key_a: str
    key_b: str


def serve_in_thread(app: object) -> tuple[str, object, threading.Thread]:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    return f"http://127.0.0.1:{port}", server, thread


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("live")
    app = create_app(Settings(store=str(tmp / "data.db"), keys=str(tmp / "keys.db")))
    service: Service = app.state.service
    key_a = service.registry.create_key("tenant-a").secret
    key_b = service.registry.create_key("tenant-b").secret
    url, server, thread = serve_in_thread(app.state.asgi)
    yield Live(url, service, key_a, key_b)
    server.should_exit = True  # type: ignore[attr-defined]
    thread.join(10)
    service.close()


def backend_for(kind: str, tmp_path: Path) -> object:
    """A service backend of ``kind`` (sqlite, postgres, redis) in a namespace of its own (see ``drop_namespace``)."""
    if kind == "sqlite":
        return open_backend(str(tmp_path / "data.db"))
    if kind == "postgres":
        return open_backend(PG_URL, schema=schema_for(tmp_path))
    return open_backend(REDIS_URL, prefix=prefix_for(tmp_path))


def drop_namespace(kind: str, tmp_path: Path) -> None:
    if kind == "postgres":
        drop_schemas({schema_for(tmp_path)})
    elif kind == "redis":
        drop_prefixes({prefix_for(tmp_path)})


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[TestClient, str, str]]:
    """The service on each persistent backend (the real servers), with keys of two tenants."""
    kind = request.param
    settings = Settings(keys=str(tmp_path / "keys.db"))
    service = Service(settings, backend=backend_for(kind, tmp_path))  # type: ignore[arg-type]
    app = create_app(settings, service=service)
    key_a = service.registry.create_key("tenant-a").secret
    key_b = service.registry.create_key("tenant-b").secret
    with TestClient(app.state.asgi) as http:
        yield http, key_a, key_b
    service.close()
    drop_namespace(kind, tmp_path)
