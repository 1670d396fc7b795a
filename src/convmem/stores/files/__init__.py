"""The file backend: one directory per session, append-only JSONL, and long-term memory as JSONL logs.

==================  ===========================================================
``store.py``        :class:`FileStore` / :class:`AsyncFileStore` (sessions and messages)
``_sessions.py``    session management: list, retitle, delete, expire, fork, export, import
``_base.py``        paths, session records, locks and reads every operation shares
``_meta.py``        ``session.json``: the per-session record and how it catches up
``_ids.py``         the message-id index (derived data)
``_jsonl.py``       locks, atomic writes, seq-sorted JSONL files
``longterm.py``     facts, working blocks and recall documents; needs the ``recall`` extra
==================  ===========================================================

The long-term classes are imported on first use, because they need numpy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .store import AsyncFileStore, FileStore

if TYPE_CHECKING:
    from .longterm import FileBlockStore, FileFactStore, FileRecallStore

__all__ = ["AsyncFileStore", "FileBlockStore", "FileFactStore", "FileRecallStore", "FileStore"]

_LAZY = frozenset({"FileBlockStore", "FileFactStore", "FileRecallStore"})


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(".longterm", __name__), name)
    globals()[name] = value
    return value
