"""Long-term memory from the session's own store: ``Memory(..., store=url, facts=True, recall=True)``.

In: the store a memory keeps its session in, and what the caller asked for:

* ``facts=True``: the store's facts (``store.facts()``) as a :class:`~convmem.longterm.facts.Facts`, rendered
  into every request by a :class:`~convmem.longterm.facts.FactsBlock`; ``facts=<extractor>`` also mines
  what the memory evicts for facts (the ``Facts`` becomes an eviction sink);
* ``recall=True``: the store's recall documents (``store.recall()``: SQLite FTS5, PostgreSQL ``tsvector``,
  RediSearch, or the in-process index over the file or in-memory store) as a
  :class:`~convmem.longterm.recall.RecallIndex` that indexes everything the memory evicts, searched every
  turn by a :class:`~convmem.longterm.recall.RecallBlock`; ``recall=<embedder>`` makes it hybrid.

Out: the ``Facts`` and ``RecallIndex`` (``memory.facts``, ``memory.recall``) and the blocks and sinks they add,
appended after the caller's own. So one URL opened once wires messages, facts and recall; the per-kind
classes (``SQLiteFactStore``, ``PostgresRecallStore``...) stay for those who mix backends or want other
block settings.

An async memory renders its blocks without awaiting (as it always did), so its facts block and recall
index read the sync twin of a thread-run async store (SQLite, files, in-memory); its ``memory.facts`` is
an ``AsyncFacts`` over the same rows. An async PostgreSQL or Redis store has no sync twin to read in a
turn: it is refused with what to do instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ..errors import ConfigurationError
from ..longterm.blocks.base import Block
from ..stores.base import LongTermStores
from .sinks import AsyncEvictionSink, EvictionSink

__all__ = ["Wired", "wire"]


@dataclass(frozen=True, slots=True)
class Wired:
    """What the store's long-term memory adds to a memory."""

    facts: Any = None  # Facts (Memory) or AsyncFacts (AsyncMemory), or None
    recall: Any = None  # RecallIndex, or None
    blocks: Sequence[Block] = field(default_factory=tuple)
    sinks: Sequence[EvictionSink | AsyncEvictionSink] = field(default_factory=tuple)


def wire(store: object, *, facts: object, recall: object, awaited: bool) -> Wired:
    """The facts and recall of ``store`` as ``facts=`` and ``recall=`` ask (see the module docstring).

    Raises:
        ConfigurationError: ``facts``/``recall`` of the wrong type, or a store that keeps no long-term
            memory (a third-party ``Store``) or none a turn can read without awaiting.
    """
    extractor = _wanted("facts", facts, "a fact extractor")
    embedder = _wanted("recall", recall, "an embedder")
    if extractor is None and embedder is None:
        return Wired()
    source = _readable(store, awaited)
    blocks: list[Block] = []
    sinks: list[EvictionSink | AsyncEvictionSink] = []
    book: Any = None
    index: Any = None
    if extractor is not None:
        from ..longterm.facts import AsyncFacts, Facts, FactsBlock

        given: Any = None if extractor is True else extractor
        shown = Facts(source.facts())  # what the block renders, read during the turn
        if awaited:
            book = AsyncFacts(cast(Any, store).facts(), extractor=given)  # the async store's own, awaited
        else:
            book = Facts(source.facts(), extractor=given)
            shown = book
        blocks.append(FactsBlock(shown))
        if given is not None:
            sinks.append(book)
    if embedder is not None:
        from ..longterm.recall import RecallBlock, RecallIndex

        chosen: Any = None if embedder is True else embedder
        index = RecallIndex(store=source.recall(), embedder=chosen)
        blocks.append(RecallBlock(index))
        sinks.append(index)
    return Wired(book, index, tuple(blocks), tuple(sinks))


def _wanted(name: str, value: object, what: str) -> object | None:
    """None when ``value`` asks for nothing, True for the defaults, else the object given."""
    if value is False or value is None:
        return None
    if value is True:
        return True
    method = {"facts": ("extract", "aextract"), "recall": ("embed", "aembed")}[name]
    if not any(hasattr(value, m) for m in method):
        raise ConfigurationError(f"{name} must be True, False or {what}, got {type(value).__name__}")
    return value


def _readable(store: object, awaited: bool) -> LongTermStores:
    """The store whose long-term memory a turn reads without awaiting: the store, or its sync twin."""
    source = getattr(store, "sync", None) if awaited else store
    if isinstance(source, LongTermStores):
        return source
    kind = type(store).__name__
    if awaited and hasattr(store, "facts"):  # an async PostgreSQL or Redis store: its facts must be awaited
        raise ConfigurationError(
            f"{kind} has no sync twin for a turn to read facts and recall from without awaiting; give the "
            "memory Facts/RecallIndex over the sync store of the same URL (blocks= and sinks=)"
        )
    raise ConfigurationError(
        f"{kind} keeps no long-term memory (it has no facts()/blocks()/recall()); pass Facts and a "
        "RecallIndex over stores of their own as blocks= and sinks="
    )
