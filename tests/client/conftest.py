"""The client tests run against the service tests' live server (uvicorn in a thread, SQLite in a temp folder)."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.server.conftest import live as live  # the module-scoped fixture, reused as it is
