"""Redis stores for many processes: ``RedisStore`` and its async twin.

Install with ``pip install 'convmem[redis]'`` (redis-py).

Design:

* Every write is one Lua script (:mod:`convmem.stores.redis._lua`), so it is
  atomic and all or nothing: the script checks the session's user and the
  message ids before its first write. An append allocates its seqs with
  ``HINCRBY next_seq n`` inside the script, so concurrent appends from any
  number of processes get gap-free seqs, and a refused append skips none.
* Sessions are hashes; each session's messages are two sorted sets by seq
  (pinned and the rest), so opening a session reads the pinned set and the
  window's range, never the archive: two round trips (one more per fork
  level), the rows in one ``MULTI`` snapshot.
* Per user, a sorted set by last update lists sessions by recency, and a
  lex-ordered set finds them by id prefix. Message ids are unique per user.
* Memory policy: at open the store reads the server's ``maxmemory-policy`` and refuses
  (ConfigurationError) one that can evict its keys: ``allkeys-*``, or ``volatile-*`` with ``ttl``
  (see :mod:`convmem.stores.redis._db`). ``allow_eviction=True`` opens anyway, with a warning; a
  session whose rows were evicted then raises SessionLostError when opened, read (every page of
  ``messages``) or exported, never returns holes.
* ``ttl``: sessions not written for that long expire (Redis ``PEXPIRE``,
  refreshed on each write, ancestors of a fork included). Index entries of an
  expired session are dropped lazily when met.
* The sync and async stores run the same I/O-free flows
  (:mod:`convmem.stores.redis._ops`); redis-py errors become
  :class:`~convmem.errors.StoreError` naming host and port, never the
  password, in one place (:mod:`convmem.stores.redis._db`), which also
  retries safely across a lost connection or a server restart.
* One Redis (or one shard): scripts compute their keys, so Redis Cluster is
  not supported. Durability is the server's: with ``appendonly yes`` and
  ``appendfsync always`` an acknowledged append survives a crash of Redis;
  with persistence off (a cache), a restart empties the store.

Recall and long-term memory (facts, working blocks, recall documents and
vectors) live under the same prefix, in :mod:`convmem.stores.redis.longterm`.
RediSearch is detected (:meth:`RedisStore.has_search` reads ``MODULE LIST``);
the Redis 7.0 these stores were tested on has no modules, and no RediSearch
path is shipped. So both retrievers run in the client over one user's
documents, loaded once: BM25 over the user's archive (measured at 100k
documents: 2.6 s to load and index on first use, about 110 MB of process
memory, 3 ms per query) and exact numpy scoring of the user's float32 vectors
(100k x 384 is 150 MB, about 7 ms per query); a few hundred thousand
per user is the sensible ceiling.

Example::

    from convmem import Memory
    from convmem.stores import RedisStore

    store = RedisStore("redis://cache:6379/0", prefix="chat:", ttl=timedelta(days=1))
    memory = Memory(model="gpt-4o", store=store, user_id="alice")
"""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING

from ...errors import ConfigurationError

try:
    import redis  # noqa: F401 - only to fail early, with the install hint
except ImportError:
    raise ConfigurationError("RedisStore needs redis-py: pip install 'convmem[redis]'") from None

from .._forget import ForgetReceipt
from .._server import AsyncServerStore, Operations, ServerStore
from . import _forget
from . import _ops as ops
from . import _sessions as sessions
from ._db import AsyncDriver, Eviction, Settings, SyncDriver
from ._ops import Keys

if TYPE_CHECKING:
    from .longterm import AsyncRedisFactStore, RedisBlockStore, RedisFactStore, RedisRecallStore

__all__ = ["AsyncRedisStore", "RedisStore"]


def _keys(prefix: str, ttl: timedelta | None) -> Keys:
    if ttl is not None and ttl <= timedelta(0):
        raise ConfigurationError(f"ttl must be positive, got {ttl}")
    return Keys(prefix, 0 if ttl is None else max(1, ttl // timedelta(milliseconds=1)))


def _operations(keys: Keys) -> Operations:
    """The Redis operations, bound to one store's keys (prefix and ttl)."""
    return Operations(
        append=partial(ops.append, keys),
        load=partial(ops.load, keys),
        save_state=partial(ops.save_state, keys),
        segments_of=partial(ops.segments_of, keys),
        page=partial(ops.page, keys),
        delete_messages=partial(ops.delete_messages, keys),
        get_session=partial(ops.get_session, keys),
        list_sessions=partial(ops.list_sessions, keys),
        update_session=partial(sessions.update_session, keys),
        delete_session=partial(sessions.delete_session, keys),
        expire=partial(sessions.expire, keys),
        fork=partial(sessions.fork, keys),
        export_jsonl=partial(sessions.export_jsonl, keys),
        import_jsonl=partial(sessions.import_jsonl, keys),
        page_size=ops.PAGE,
    )


class RedisStore(ServerStore):
    """A :class:`~convmem.stores.base.SessionStore` in Redis, shared by any number of processes.

    Args:
        url: a Redis URL (``redis://``, ``rediss://``, ``unix://``); defaults to ``$CONVMEM_REDIS_URL``.
        prefix: prefix of every key, so several stores can share one database.
        ttl: expire sessions not written for this long (None: keep them).
        timeout: socket timeout in seconds.
        retry_for: how long to keep retrying, safely, across a lost connection or a restart.
        max_connections: size of the client's connection pool.
        allow_eviction: open even if the server's ``maxmemory-policy`` can evict this store's keys
            (a warning says so); by default that is refused.
        maxmemory_policy: the policy to assume when the server answers neither ``CONFIG GET`` nor
            ``INFO`` (some managed Redis); ignored when it does.

    Raises:
        ConfigurationError: no URL, a bad ttl, or a memory policy that can evict the store's keys.
        StoreError: the server cannot be reached or refuses us (host and port named, never the password).
    """

    db: SyncDriver

    def __init__(
        self,
        url: str | None = None,
        *,
        prefix: str = "convmem:",
        ttl: timedelta | None = None,
        timeout: float = 5.0,
        retry_for: float = 10.0,
        max_connections: int = 50,
        allow_eviction: bool = False,
        maxmemory_policy: str | None = None,
    ) -> None:
        self.keys = _keys(prefix, ttl)
        self.settings = Settings.of(url, timeout, retry_for, max_connections)
        self.db = SyncDriver(
            self.settings, Eviction(ttl is not None, allow_eviction, maxmemory_policy)
        )  # runs the operations; the long-term stores share it
        self.ops = _operations(self.keys)
        self.rows_read = 0  # rows returned by load(); lets the conformance suite see load skip the archive

    def has_search(self) -> bool:
        """Whether the server has the RediSearch module (vector search)."""
        return self.db.run(ops.has_search())

    # -- erasure (see convmem.stores._forget) -------------------------------------------------
    def forget(self, *, user_id: str | None, session_id: str | None = None, compact: bool = False) -> ForgetReceipt:
        """Erase the user, or the session with its forks, in one script (see :mod:`._forget`)."""
        counts, erased = self.db.run(_forget.erase(self.keys, user_id, session_id))
        files = self.db.run(_forget.persists()) if any(counts.values()) else []
        if compact and files:
            self.compact()
        pending = f"the server's {' and '.join(files).upper()} file until rewritten" if files else ""
        command = "convmem compact --db <this store URL> (BGREWRITEAOF / BGSAVE)"
        return ForgetReceipt.made(
            user_id, session_id, counts, erased, compacted=compact, pending=pending, command=command
        )

    def compact(self) -> None:
        """Rewrite the server's AOF / RDB file if it persists (deleted keys left its memory already)."""
        self.db.run(_forget.compact(self.db.run(_forget.persists())))

    # -- long-term memory (needs the ``recall`` extra) ---------------------------------------
    def facts(self) -> RedisFactStore:
        """The facts under this store's prefix, on its client; they close with the store."""
        from .longterm import RedisFactStore

        return RedisFactStore(self)

    def blocks(self) -> RedisBlockStore:
        """The working blocks under this store's prefix, on its client; they close with the store."""
        from .longterm import RedisBlockStore

        return RedisBlockStore(self)

    def recall(self) -> RedisRecallStore:
        """The recall documents under this store's prefix, on its client; they close with the store."""
        from .longterm import RedisRecallStore

        return RedisRecallStore(self)


class AsyncRedisStore(AsyncServerStore):
    """The async twin of :class:`RedisStore` (``redis.asyncio``; same flows, same scripts)."""

    db: AsyncDriver

    def __init__(
        self,
        url: str | None = None,
        *,
        prefix: str = "convmem:",
        ttl: timedelta | None = None,
        timeout: float = 5.0,
        retry_for: float = 10.0,
        max_connections: int = 50,
        allow_eviction: bool = False,
        maxmemory_policy: str | None = None,
    ) -> None:
        self.keys = _keys(prefix, ttl)
        self.settings = Settings.of(url, timeout, retry_for, max_connections)
        self.db = AsyncDriver(self.settings, Eviction(ttl is not None, allow_eviction, maxmemory_policy))
        self.ops = _operations(self.keys)
        self.rows_read = 0

    async def has_search(self) -> bool:
        """Whether the server has the RediSearch module (vector search)."""
        return await self.db.run(ops.has_search())

    def facts(self) -> AsyncRedisFactStore:
        """The facts under this store's prefix, awaited on its client; they close with the store.

        Blocks and recall have sync contracts only (see :mod:`convmem.stores.base`): for them, open a
        :class:`RedisStore` over the same URL.
        """
        from .longterm import AsyncRedisFactStore

        return AsyncRedisFactStore(self)
