"""Session-wide, test-owned search servers (see ``_search_servers``): started on first use, stopped at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._search_servers import PgVectorServer, SearchRedis


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
