"""Fixtures the store tests share: a test-owned Redis per test, and session-wide search servers.

The search servers (see ``_search_servers``) are started on first use and stopped at the end of the session.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ._search_servers import PgVectorServer, SearchRedis
from ._servers import RedisServer


@pytest.fixture
def redis_server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path, durable=request.param == "durable")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def pgvector_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = PgVectorServer(tmp_path_factory.mktemp("pgvector"))
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redisearch_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = SearchRedis(tmp_path_factory.mktemp("redisearch"))
    try:
        yield server.url
    finally:
        server.stop()
