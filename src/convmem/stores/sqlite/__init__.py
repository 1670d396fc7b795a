"""The SQLite backend: the default persistent store, and long-term memory in the same file.

==================  ===========================================================
``store.py``        :class:`SQLiteStore` / :class:`AsyncSQLiteStore`: every operation of the contract
``_rows.py``        the tables as records: session rows decoded and encoded, fork-chain reads
``_db.py``          one connection: pragmas, migrations, transactions, error conversion
``_sql.py``         the SQL text and the append-only list of migrations
``longterm.py``     facts, working blocks and recall (FTS5 + vectors); needs the ``recall`` extra
==================  ===========================================================

The long-term classes are imported on first use, because they need numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy
from .store import AsyncSQLiteStore, SQLiteStore

if TYPE_CHECKING:
    from .longterm import SQLiteBlockStore, SQLiteFactStore, SQLiteRecallStore

__all__ = ["AsyncSQLiteStore", "SQLiteBlockStore", "SQLiteFactStore", "SQLiteRecallStore", "SQLiteStore"]

_LONGTERM = ("SQLiteBlockStore", "SQLiteFactStore", "SQLiteRecallStore")


__getattr__ = lazy(__name__, dict.fromkeys(_LONGTERM, "longterm"))
