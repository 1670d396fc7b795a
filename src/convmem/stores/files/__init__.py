"""The file backend: one directory per session, append-only JSONL, and long-term memory as JSONL logs.

==================  ===========================================================
``store.py``        :class:`FileStore` / :class:`AsyncFileStore`: every operation of the contract
``_layout.py``      the directory: paths, locks, fork-chain reads, a batch written with one outcome
``_meta.py``        ``session.json``: the per-session record and how it catches up
``_ids.py``         the message-id index (derived data)
``_jsonl.py``       locks, atomic writes, seq-sorted JSONL files
``longterm.py``     facts, working blocks and recall documents; needs the ``recall`` extra
==================  ===========================================================

The long-term classes are imported on first use, because they need numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy
from .store import AsyncFileStore, FileStore

if TYPE_CHECKING:
    from .longterm import FileBlockStore, FileFactStore, FileRecallStore

__all__ = ["AsyncFileStore", "FileBlockStore", "FileFactStore", "FileRecallStore", "FileStore"]

_LONGTERM = ("FileBlockStore", "FileFactStore", "FileRecallStore")


__getattr__ = lazy(__name__, dict.fromkeys(_LONGTERM, "longterm"))
