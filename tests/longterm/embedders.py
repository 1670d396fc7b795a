"""Embedders that misbehave on purpose, for the failure-path tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from convmem.longterm.recall.embedders import HashingEmbedder


class FlakyEmbedder:
    """A HashingEmbedder that raises (or returns a wrong shape) while ``broken`` is set."""

    def __init__(self, mode: str = "raise", dim: int = 64) -> None:
        self.inner = HashingEmbedder(dim)
        self.name, self.dim = "flaky", dim
        self.broken = True
        self.mode = mode
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        if self.broken:
            if self.mode == "raise":
                raise ConnectionError("embedding server unreachable")
            if self.mode == "dim":
                return np.zeros((len(texts), self.dim + 1), dtype=np.float32)
            if self.mode == "nan":
                return np.full((len(texts), self.dim), np.nan, dtype=np.float32)
            return [[0.0]] * (len(texts) + 1)
        return self.inner.embed(texts)
