"""The PostgreSQL backend (extra ``postgres``): sessions, messages and long-term memory for many processes.

==================  ===========================================================
``store.py``        :class:`PostgresStore` / :class:`AsyncPostgresStore`
``_ops.py``         message operations as I/O-free query generators, run by both drivers
``_sessions.py``    session management as I/O-free query generators
``_db.py``          settings, migrations, the sync and async drivers, error conversion
``_sql.py``         the SQL text and the append-only list of migrations
``longterm.py``     facts, working blocks and recall (``tsvector`` + vectors); needs the ``recall`` extra
==================  ===========================================================

The long-term classes are imported on first use, because they need numpy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .store import AsyncPostgresStore, PostgresStore

if TYPE_CHECKING:
    from .longterm import PostgresBlockStore, PostgresFactStore, PostgresRecallStore

__all__ = ["AsyncPostgresStore", "PostgresBlockStore", "PostgresFactStore", "PostgresRecallStore", "PostgresStore"]

_LAZY = frozenset({"PostgresBlockStore", "PostgresFactStore", "PostgresRecallStore"})


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(".longterm", __name__), name)
    globals()[name] = value
    return value
