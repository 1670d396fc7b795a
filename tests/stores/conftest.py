"""Fixtures the store tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ._servers import RedisServer


@pytest.fixture
def redis_server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path, durable=request.param == "durable")
    server.start()
    yield server
    server.stop()
