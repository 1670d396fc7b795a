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

from typing import TYPE_CHECKING

from ..._lazy import lazy
from .store import AsyncPostgresStore, PostgresStore

if TYPE_CHECKING:
    from .longterm import PostgresBlockStore, PostgresFactStore, PostgresRecallStore

__all__ = ["AsyncPostgresStore", "PostgresBlockStore", "PostgresFactStore", "PostgresRecallStore", "PostgresStore"]

_LONGTERM = ("PostgresBlockStore", "PostgresFactStore", "PostgresRecallStore")


__getattr__ = lazy(__name__, dict.fromkeys(_LONGTERM, "longterm"))
