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

from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

from ...errors import ConfigurationError
from ...messages import Message

try:
    import redis  # noqa: F401 - only to fail early, with the install hint
except ImportError:
    raise ConfigurationError("RedisStore needs redis-py: pip install 'convmem[redis]'") from None

from .._common import Segment, check_batch
from ..base import LoadedSession, SessionInfo, SessionState, StoredMessage
from . import _ops as ops
from . import _sessions as sessions
from ._db import AsyncDriver, Settings, SyncDriver
from ._ops import Cmd, Flow, Keys

__all__ = ["AsyncRedisStore", "RedisStore"]


def _keys(prefix: str, ttl: timedelta | None) -> Keys:
    if ttl is not None and ttl <= timedelta(0):
        raise ConfigurationError(f"ttl must be positive, got {ttl}")
    return Keys(prefix, 0 if ttl is None else max(1, ttl // timedelta(milliseconds=1)))


def _modules() -> Flow[bool]:
    modules = yield Cmd(("MODULE", "LIST"))
    names = {str(dict(zip(m[::2], m[1::2], strict=True)).get(b"name", b""), "utf-8").lower() for m in modules}
    return bool(names & {"search", "ft", "searchlight"})


class RedisStore:
    """A :class:`~convmem.stores.base.SessionStore` in Redis, shared by any number of processes.

    Args:
        url: a Redis URL (``redis://``, ``rediss://``, ``unix://``); defaults to ``$CONVMEM_REDIS_URL``.
        prefix: prefix of every key, so several stores can share one database.
        ttl: expire sessions not written for this long (None: keep them).
        timeout: socket timeout in seconds.
        retry_for: how long to keep retrying, safely, across a lost connection or a restart.
        max_connections: size of the client's connection pool.

    Raises:
        ConfigurationError: no URL, or a bad ttl.
        StoreError: the server cannot be reached or refuses us (host and port named, never the password).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        prefix: str = "convmem:",
        ttl: timedelta | None = None,
        timeout: float = 5.0,
        retry_for: float = 10.0,
        max_connections: int = 50,
    ) -> None:
        self.keys = _keys(prefix, ttl)
        self.settings = Settings.of(url, timeout, retry_for, max_connections)
        self.db = SyncDriver(self.settings)  # runs the operations; the long-term stores share it
        self.rows_read = 0  # rows returned by load(); lets the conformance suite see load skip the archive

    def has_search(self) -> bool:
        """Whether the server has the RediSearch module (vector search)."""
        return self.db.run(ops.Op("list modules", lambda retried: _modules()))

    def append(
        self,
        session_id: str,
        messages: Sequence[tuple[Message, int]],
        *,
        user_id: str | None = None,
        model: str | None = None,
    ) -> list[int]:
        check_batch(messages)
        if not messages:
            return []  # a session is created by its first message, not by an empty batch
        return self.db.run(ops.append(self.keys, session_id, messages, user_id, model))

    def load(self, session_id: str, *, user_id: str | None = None, unfolded_limit: int = 0) -> LoadedSession:
        loaded = self.db.run(ops.load(self.keys, session_id, user_id, unfolded_limit))
        self.rows_read += len(loaded.pinned) + len(loaded.window) + len(loaded.unfolded)
        return loaded

    def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        return self.db.run(ops.save_state(self.keys, session_id, state, expected_version, user_id))

    def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> Iterator[StoredMessage]:
        segs, last = self.db.run(ops.segments_of(self.keys, session_id, user_id, to_seq))
        return self._pages(segs, from_seq, last)

    def _pages(self, segs: list[Segment], lo: int, hi: int) -> Iterator[StoredMessage]:
        while lo <= hi:
            rows = self.db.run(ops.page(self.keys, segs, lo, hi))
            yield from rows
            if len(rows) < ops.PAGE:
                return
            lo = rows[-1].seq + 1

    def delete_messages(self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None) -> None:
        self.db.run(ops.delete_messages(self.keys, session_id, seqs, user_id))

    def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        return self.db.run(ops.get_session(self.keys, session_id, user_id))

    def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        return self.db.run(ops.list_sessions(self.keys, user_id, limit))

    def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        return self.db.run(sessions.update_session(self.keys, session_id, user_id, title, metadata))

    def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        self.db.run(sessions.delete_session(self.keys, session_id, user_id))

    def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]:
        return self.db.run(sessions.expire(self.keys, older_than, user_id))

    def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo:
        return self.db.run(sessions.fork(self.keys, session_id, at_seq, user_id))

    def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        return self.db.run(sessions.export_jsonl(self.keys, session_id, user_id))

    def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        return self.db.run(sessions.import_jsonl(self.keys, data, user_id))

    def close(self) -> None:
        self.db.close()


class AsyncRedisStore:
    """The async twin of :class:`RedisStore` (``redis.asyncio``; same flows, same scripts)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        prefix: str = "convmem:",
        ttl: timedelta | None = None,
        timeout: float = 5.0,
        retry_for: float = 10.0,
        max_connections: int = 50,
    ) -> None:
        self.keys = _keys(prefix, ttl)
        self.settings = Settings.of(url, timeout, retry_for, max_connections)
        self.db = AsyncDriver(self.settings)
        self.rows_read = 0

    async def has_search(self) -> bool:
        """Whether the server has the RediSearch module (vector search)."""
        return await self.db.run(ops.Op("list modules", lambda retried: _modules()))

    async def append(
        self,
        session_id: str,
        messages: Sequence[tuple[Message, int]],
        *,
        user_id: str | None = None,
        model: str | None = None,
    ) -> list[int]:
        check_batch(messages)
        if not messages:
            return []
        return await self.db.run(ops.append(self.keys, session_id, messages, user_id, model))

    async def load(self, session_id: str, *, user_id: str | None = None, unfolded_limit: int = 0) -> LoadedSession:
        loaded = await self.db.run(ops.load(self.keys, session_id, user_id, unfolded_limit))
        self.rows_read += len(loaded.pinned) + len(loaded.window) + len(loaded.unfolded)
        return loaded

    async def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        return await self.db.run(ops.save_state(self.keys, session_id, state, expected_version, user_id))

    async def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> list[StoredMessage]:
        segs, hi = await self.db.run(ops.segments_of(self.keys, session_id, user_id, to_seq))
        out: list[StoredMessage] = []
        lo = from_seq
        while lo <= hi:
            rows = await self.db.run(ops.page(self.keys, segs, lo, hi))
            out += rows
            if len(rows) < ops.PAGE:
                break
            lo = rows[-1].seq + 1
        return out

    async def delete_messages(self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None) -> None:
        await self.db.run(ops.delete_messages(self.keys, session_id, seqs, user_id))

    async def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        return await self.db.run(ops.get_session(self.keys, session_id, user_id))

    async def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        return await self.db.run(ops.list_sessions(self.keys, user_id, limit))

    async def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        return await self.db.run(sessions.update_session(self.keys, session_id, user_id, title, metadata))

    async def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        await self.db.run(sessions.delete_session(self.keys, session_id, user_id))

    async def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]:
        return await self.db.run(sessions.expire(self.keys, older_than, user_id))

    async def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo:
        return await self.db.run(sessions.fork(self.keys, session_id, at_seq, user_id))

    async def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        return await self.db.run(sessions.export_jsonl(self.keys, session_id, user_id))

    async def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        return await self.db.run(sessions.import_jsonl(self.keys, data, user_id))

    async def aclose(self) -> None:
        await self.db.close()
