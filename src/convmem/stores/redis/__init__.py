"""The Redis backend (extra ``redis``): sessions, messages and long-term memory for many processes.

==================  ===========================================================
``store.py``        :class:`RedisStore` / :class:`AsyncRedisStore`
``_ops.py``         message operations as I/O-free request generators, run by both drivers
``_sessions.py``    session management as I/O-free request generators
``_db.py``          settings, the sync and async drivers, retries, error conversion
``_lua.py``         the Lua scripts: every write is one atomic script
``longterm.py``     facts, working blocks, recall documents and vectors; needs the ``recall`` extra
==================  ===========================================================

The long-term classes are imported on first use, because they need numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy
from .store import AsyncRedisStore, RedisStore

if TYPE_CHECKING:
    from .longterm import RedisBlockStore, RedisFactStore, RedisRecallStore

__all__ = ["AsyncRedisStore", "RedisBlockStore", "RedisFactStore", "RedisRecallStore", "RedisStore"]

_LONGTERM = ("RedisBlockStore", "RedisFactStore", "RedisRecallStore")


__getattr__ = lazy(__name__, dict.fromkeys(_LONGTERM, "longterm"))
