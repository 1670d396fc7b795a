"""What a checkpoint backend stores and reads, the same for every backend: rows of typed bytes.

A backend never decodes a value: LangGraph's serializer (``serde.dumps_typed``) turns each into a
``(type, bytes)`` pair before it is written and back after it is read, so the SQL tables and the Redis
keys hold what LangGraph's own savers hold, and a custom or encrypting serializer works unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ...errors import ConfigurationError

__all__ = ["Found", "Query", "Saved", "Typed", "Write", "sync_on_async"]

Typed = tuple[str, bytes]  # serde.dumps_typed's pair: the encoding's name and the encoded value
PAGE = 200  # checkpoints read per request while a listing looks for ones its filter keeps


@dataclass(frozen=True, slots=True)
class Saved:
    """One checkpoint as stored: its place, its parent, and the checkpoint (without channel values) and metadata."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    checkpoint: Typed
    metadata: Typed


@dataclass(frozen=True, slots=True)
class Write:
    """One pending write of a task: ``idx`` is its position, or LangGraph's negative index of a special channel."""

    task_id: str
    idx: int
    channel: str
    value: Typed
    task_path: str = ""

    @property
    def order(self) -> tuple[str, str, int]:
        # LangGraph's writes_sort_key: the order live execution applies a super-step's writes in.
        return (self.task_path, self.task_id, self.idx)


@dataclass(frozen=True, slots=True)
class Found:
    """A checkpoint read back: the row, the channel values it names (by version), and its pending writes."""

    saved: Saved
    blobs: dict[str, Typed]
    writes: list[Write]


@dataclass(frozen=True, slots=True)
class Query:
    """Which checkpoints a read wants, newest first within each thread and namespace.

    ``keep`` decides on the stored metadata (LangGraph's ``filter``), ``versions`` reads the channel
    versions out of a stored checkpoint, so the backend fetches only the blobs it names; both are the
    saver's, which owns the serializer.
    """

    thread_id: str | None
    checkpoint_ns: str | None
    checkpoint_id: str | None
    before: str | None
    limit: int | None
    versions: Callable[[Typed], dict[str, str]]
    keep: Callable[[Typed], bool] = field(default=lambda _: True)

    def full(self, found: list[Saved]) -> bool:
        return self.limit is not None and len(found) >= self.limit


def sync_on_async(backend: str) -> ConfigurationError:
    """A sync call on a saver over an async store, which has no sync driver to run it on."""
    return ConfigurationError(
        f"this ConvmemSaver is over an async {backend} store: use its async methods (graph.ainvoke, astream), "
        "or give it the sync store"
    )
