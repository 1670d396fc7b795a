"""A LangGraph ``BaseCheckpointSaver`` on a convmem store: a graph's thread state beside its memory.

LangGraph keeps a thread's state (its messages, its next steps, pending writes, interrupts) through a
checkpointer; without one here, an app kept that state in another database and convmem only trimmed
its messages. ``ConvmemSaver`` keeps it in the convmem store the app already has::

    SQLiteStore / AsyncSQLiteStore      three tables in the same file (_sql.py), on the store's connection
    PostgresStore / AsyncPostgresStore  the same tables in the store's schema, on its pool and retries
    RedisStore / AsyncRedisStore        keys under the store's prefix (_redis.py), on its client

The sync methods run on a sync store; the async ones await an async store's driver (PostgreSQL,
Redis) or run a sync store's call in a worker thread (SQLite always: sqlite3 blocks). It passes
``langgraph-checkpoint-conformance`` (put, put_writes, get_tuple, list, delete_thread) on all three.
Channel values are stored once per version, so a step that changes one channel writes one value.

Example (with convmem's pre-model hook, the model sees the thread within the budget)::

    from convmem.integrations.langgraph_checkpoint import ConvmemSaver
    from convmem.stores import open_store

    store = open_store("sqlite:///app.db")
    graph = builder.compile(checkpointer=ConvmemSaver(store))
    graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}})

Checkpoints belong to threads, not to convmem users: ``Memory.forget`` does not reach them;
``delete_thread`` does.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from ...errors import ConfigurationError
from .. import missing

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        get_checkpoint_id,
        get_checkpoint_metadata,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test with a blocked import
    raise missing("langgraph", "langchain") from exc

from ._rows import Found, Query, Saved, Typed, Write

__all__ = ["ConvmemSaver"]


def _runner(store: Any) -> Any:
    from ...stores.postgres.store import AsyncPostgresStore, PostgresStore
    from ...stores.redis.store import AsyncRedisStore, RedisStore
    from ...stores.sqlite.store import AsyncSQLiteStore, SQLiteStore
    from ._redis import RedisRunner
    from ._sql import PostgresRunner, SQLiteRunner

    if isinstance(store, AsyncSQLiteStore):
        store = store.sync
    if isinstance(store, SQLiteStore):
        return SQLiteRunner(store)
    if isinstance(store, (PostgresStore, AsyncPostgresStore)):
        return PostgresRunner(store, asynchronous=isinstance(store, AsyncPostgresStore))
    if isinstance(store, (RedisStore, AsyncRedisStore)):
        return RedisRunner(store, asynchronous=isinstance(store, AsyncRedisStore))
    raise ConfigurationError(
        f"ConvmemSaver keeps checkpoints in a SQLite, PostgreSQL or Redis store, got {type(store).__name__}; "
        "for a graph that lives in one process, LangGraph's InMemorySaver does the same"
    )


class ConvmemSaver(BaseCheckpointSaver[str]):
    """LangGraph's checkpointer over a convmem store (see the module docstring).

    Args:
        store: a convmem ``SQLiteStore``, ``PostgresStore`` or ``RedisStore``, or its async twin.
        serde: LangGraph's serializer (default ``JsonPlusSerializer``); an ``EncryptedSerializer`` works too.
    """

    def __init__(self, store: Any, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        self.store = store
        self._ops = _runner(store)

    # -- what the backends share: rows in, tuples out --------------------------------------------------
    def _saved(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, versions: ChannelVersions
    ) -> tuple[Saved, list[tuple[str, str, Typed]], RunnableConfig]:
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        rest = dict(checkpoint)
        values: dict[str, Any] = rest.pop("channel_values", {})  # type: ignore[assignment]
        blobs = [
            # A channel named in new_versions but without a value was emptied: stored as LangGraph's "empty".
            (channel, str(version), self.serde.dumps_typed(values[channel]) if channel in values else ("empty", b""))
            for channel, version in versions.items()
        ]
        saved = Saved(
            thread_id,
            ns,
            checkpoint["id"],
            conf.get("checkpoint_id"),
            self.serde.dumps_typed(rest),
            self.serde.dumps_typed(get_checkpoint_metadata(config, metadata)),
        )
        return (
            saved,
            blobs,
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": saved.checkpoint_id}},
        )

    def _writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> tuple[Any, ...]:
        conf = config["configurable"]
        rows = [
            Write(task_id, WRITES_IDX_MAP.get(channel, idx), channel, self.serde.dumps_typed(value), task_path)
            for idx, (channel, value) in enumerate(writes)
        ]
        return (str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")), str(conf["checkpoint_id"]), rows)

    def _query(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
        latest: bool = False,
    ) -> Query:
        conf = (config or {}).get("configurable", {})
        wanted = dict(filter or {})

        def keep(metadata: Typed) -> bool:
            if not wanted:
                return True
            found = self.serde.loads_typed(metadata)
            return all(found.get(key) == value for key, value in wanted.items())

        def versions(checkpoint: Typed) -> dict[str, str]:
            return {c: str(v) for c, v in self.serde.loads_typed(checkpoint)["channel_versions"].items()}

        thread = conf.get("thread_id")
        return Query(
            thread_id=None if thread is None else str(thread),
            checkpoint_ns=None if conf.get("checkpoint_ns") is None else str(conf["checkpoint_ns"]),
            checkpoint_id=get_checkpoint_id(config) if config else None,
            before=get_checkpoint_id(before) if before else None,
            limit=1 if latest else limit,
            versions=versions,
            keep=keep,
        )

    def _tuple(self, found: Found) -> CheckpointTuple:
        s = found.saved
        checkpoint = self.serde.loads_typed(s.checkpoint)
        checkpoint["channel_values"] = {
            channel: self.serde.loads_typed(blob) for channel, blob in found.blobs.items() if blob[0] != "empty"
        }
        place = {"thread_id": s.thread_id, "checkpoint_ns": s.checkpoint_ns}
        return CheckpointTuple(
            config={"configurable": {**place, "checkpoint_id": s.checkpoint_id}},
            checkpoint=checkpoint,
            metadata=self.serde.loads_typed(s.metadata),
            parent_config={"configurable": {**place, "checkpoint_id": s.parent_id}} if s.parent_id else None,
            pending_writes=[(w.task_id, w.channel, self.serde.loads_typed(w.value)) for w in found.writes],
        )

    def _get_query(self, config: RunnableConfig) -> Query:
        query = self._query(config, latest=True)
        if query.checkpoint_ns is None:  # get_tuple reads the root namespace unless told otherwise
            query = Query(query.thread_id, "", query.checkpoint_id, None, 1, query.versions, query.keep)
        return query

    # -- sync ------------------------------------------------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = self._ops.run(self._ops.find(self._get_query(config)))
        return self._tuple(found[0]) if found else None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        for found in self._ops.run(self._ops.find(self._query(config, filter=filter, before=before, limit=limit))):
            yield self._tuple(found)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        saved, blobs, stored = self._saved(config, checkpoint, metadata, new_versions)
        self._ops.run(self._ops.put(saved, blobs))
        return stored

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self._ops.run(self._ops.put_writes(*self._writes(config, writes, task_id, task_path)))

    def delete_thread(self, thread_id: str) -> None:
        self._ops.run(self._ops.delete_thread(str(thread_id)))

    # -- async -----------------------------------------------------------------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = await self._ops.arun(self._ops.find(self._get_query(config)))
        return self._tuple(found[0]) if found else None

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for found in await self._ops.arun(
            self._ops.find(self._query(config, filter=filter, before=before, limit=limit))
        ):
            yield self._tuple(found)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        saved, blobs, stored = self._saved(config, checkpoint, metadata, new_versions)
        await self._ops.arun(self._ops.put(saved, blobs))
        return stored

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await self._ops.arun(self._ops.put_writes(*self._writes(config, writes, task_id, task_path)))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._ops.arun(self._ops.delete_thread(str(thread_id)))

    def get_next_version(self, current: str | None, channel: None) -> str:
        # LangGraph's own savers' scheme: a zero-padded counter (text order is numeric order) and a random
        # tail, so two writers that both bump a channel from the same version never make the same version.
        number = 0 if current is None else int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"
