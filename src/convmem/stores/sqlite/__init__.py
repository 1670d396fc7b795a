"""The SQLite backend: the default persistent store, and long-term memory in the same file.

==================  ===========================================================
``store.py``        :class:`SQLiteStore` / :class:`AsyncSQLiteStore` (sessions and messages)
``_sessions.py``    session management: list, retitle, delete, expire, fork, export, import
``_base.py``        what every operation shares: rows, lookups, fork chains
``_db.py``          one connection: pragmas, migrations, transactions, error conversion
``_sql.py``         the SQL text and the append-only list of migrations
``longterm.py``     facts, working blocks and recall (FTS5 + vectors); needs the ``recall`` extra
==================  ===========================================================

The long-term classes are imported on first use, because they need numpy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .store import AsyncSQLiteStore, SQLiteStore

if TYPE_CHECKING:
    from .longterm import SQLiteBlockStore, SQLiteFactStore, SQLiteRecallStore

__all__ = ["AsyncSQLiteStore", "SQLiteBlockStore", "SQLiteFactStore", "SQLiteRecallStore", "SQLiteStore"]

_LAZY = frozenset({"SQLiteBlockStore", "SQLiteFactStore", "SQLiteRecallStore"})


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(".longterm", __name__), name)
    globals()[name] = value
    return value
