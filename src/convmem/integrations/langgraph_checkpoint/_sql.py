"""The checkpoint tables in SQL: one flow per operation, run on a convmem SQLite or PostgreSQL store.

Three tables beside convmem's own, in the store's database (SQLite) or schema (PostgreSQL), made on
first use with ``CREATE TABLE IF NOT EXISTS`` (they are not convmem migrations: a store that never
holds a checkpoint never has them)::

    langgraph_checkpoints  (thread_id, checkpoint_ns, checkpoint_id) -> parent, checkpoint, metadata
    langgraph_blobs        (thread_id, checkpoint_ns, channel, version) -> a channel's value at a version
    langgraph_writes       (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) -> a pending write

A checkpoint is stored without its channel values; each value is a blob keyed by its version, written
once (``new_versions`` names the channels that changed), so a long thread does not store its unchanged
message list at every step. Checkpoint ids are LangGraph's time-ordered uuid6 strings: "newest" and
"before" are text order on them. Each flow yields :class:`Stmt` objects with ``?`` placeholders and gets
their rows back; the SQLite runner executes them in one of the store's transactions, the PostgreSQL
runner hands them, as ``%s`` queries, to the store's own driver (its pool, its retries, its errors).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..._effects import drive
from ...stores.postgres._ops import Op as PostgresOp
from ...stores.postgres._ops import Query as PostgresQuery
from ._rows import PAGE, Found, Query, Saved, Typed, Write, sync_on_async

__all__ = ["Plan", "PostgresRunner", "SQLiteRunner", "Stmt", "delete_thread", "find", "put", "put_writes"]


@dataclass(frozen=True, slots=True)
class Stmt:
    sql: str
    params: Sequence[Any] = ()


Flow: TypeAlias = Generator[Stmt, list[tuple[Any, ...]], Any]


@dataclass(frozen=True, slots=True)
class Plan:
    """An operation: its name (for errors), whether it writes, and its flow."""

    what: str
    write: bool
    start: Callable[[], Flow]


def _tables(binary: str) -> list[str]:
    return [
        "CREATE TABLE IF NOT EXISTS langgraph_checkpoints (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, "
        f"checkpoint_id TEXT NOT NULL, parent_id TEXT, type TEXT NOT NULL, checkpoint {binary} NOT NULL, "
        f"metadata_type TEXT NOT NULL, metadata {binary} NOT NULL, "
        "PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))",
        "CREATE TABLE IF NOT EXISTS langgraph_blobs (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, "
        f"channel TEXT NOT NULL, version TEXT NOT NULL, type TEXT NOT NULL, blob {binary} NOT NULL, "
        "PRIMARY KEY (thread_id, checkpoint_ns, channel, version))",
        "CREATE TABLE IF NOT EXISTS langgraph_writes (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, "
        "checkpoint_id TEXT NOT NULL, task_id TEXT NOT NULL, idx INTEGER NOT NULL, channel TEXT NOT NULL, "
        f"type TEXT NOT NULL, blob {binary} NOT NULL, task_path TEXT NOT NULL, "
        "PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx))",
    ]


_PUT_BLOB = (
    "INSERT INTO langgraph_blobs (thread_id, checkpoint_ns, channel, version, type, blob) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING"
)
_PUT_CHECKPOINT = (
    "INSERT INTO langgraph_checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_id, type, checkpoint, "
    "metadata_type, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) "
    "DO UPDATE SET parent_id = excluded.parent_id, type = excluded.type, checkpoint = excluded.checkpoint, "
    "metadata_type = excluded.metadata_type, metadata = excluded.metadata"
)
_PUT_WRITE = (
    "INSERT INTO langgraph_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, "
    "task_path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) "
)
# A task's regular write at a position is kept as first written (a retried task re-sends the same writes);
# a special channel's (an error, an interrupt: negative idx) is replaced, as LangGraph's savers do.
_KEEP = _PUT_WRITE + "DO NOTHING"
_REPLACE = (
    _PUT_WRITE + "DO UPDATE SET channel = excluded.channel, type = excluded.type, blob = excluded.blob, "
    "task_path = excluded.task_path"
)
_CHECKPOINT_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, parent_id, type, checkpoint, metadata_type, metadata"


def put(saved: Saved, blobs: Sequence[tuple[str, str, Typed]]) -> Plan:
    def flow() -> Flow:
        t, ns = saved.thread_id, saved.checkpoint_ns
        for channel, version, (kind, data) in blobs:
            yield Stmt(_PUT_BLOB, (t, ns, channel, version, kind, data))
        (kind, data), (mkind, mdata) = saved.checkpoint, saved.metadata
        yield Stmt(_PUT_CHECKPOINT, (t, ns, saved.checkpoint_id, saved.parent_id, kind, data, mkind, mdata))

    return Plan("put a checkpoint", True, flow)


def put_writes(thread_id: str, checkpoint_ns: str, checkpoint_id: str, writes: Sequence[Write]) -> Plan:
    def flow() -> Flow:
        for w in writes:
            row = (thread_id, checkpoint_ns, checkpoint_id, w.task_id, w.idx, w.channel, *w.value, w.task_path)
            yield Stmt(_REPLACE if w.idx < 0 else _KEEP, row)

    return Plan("put pending writes", True, flow)


def delete_thread(thread_id: str) -> Plan:
    def flow() -> Flow:
        for table in ("langgraph_writes", "langgraph_blobs", "langgraph_checkpoints"):
            yield Stmt(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))

    return Plan("delete a thread's checkpoints", True, flow)


def find(query: Query) -> Plan:
    """The checkpoints a query names, newest first, each with its blobs and writes, in one read transaction."""

    def flow() -> Generator[Stmt, list[tuple[Any, ...]], list[Found]]:
        where, params = _where(query)
        sql = (
            f"SELECT {_CHECKPOINT_COLUMNS} FROM langgraph_checkpoints{where} "
            "ORDER BY thread_id, checkpoint_ns, checkpoint_id DESC LIMIT ? OFFSET ?"
        )
        kept: list[Saved] = []
        offset = 0
        while not query.full(kept):
            rows = yield Stmt(sql, (*params, PAGE, offset))
            for row in rows:
                saved = Saved(row[0], row[1], row[2], row[3], (row[4], bytes(row[5])), (row[6], bytes(row[7])))
                if query.keep(saved.metadata):
                    kept.append(saved)
                    if query.full(kept):
                        break
            if len(rows) < PAGE:
                break
            offset += PAGE
        found = []
        for saved in kept:
            found.append(
                Found(saved, (yield from _blobs(saved, query.versions(saved.checkpoint))), (yield from _writes(saved)))
            )
        return found

    return Plan("read checkpoints", False, flow)


def _where(query: Query) -> tuple[str, list[Any]]:
    terms: list[str] = []
    params: list[Any] = []
    for column, value, op in (
        ("thread_id", query.thread_id, "="),
        ("checkpoint_ns", query.checkpoint_ns, "="),
        ("checkpoint_id", query.checkpoint_id, "="),
        ("checkpoint_id", query.before, "<"),
    ):
        if value is not None:
            terms.append(f"{column} {op} ?")
            params.append(value)
    return (" WHERE " + " AND ".join(terms) if terms else ""), params


def _blobs(saved: Saved, versions: dict[str, str]) -> Generator[Stmt, list[tuple[Any, ...]], dict[str, Typed]]:
    if not versions:
        return {}
    wanted = " OR ".join("(channel = ? AND version = ?)" for _ in versions)
    params = [saved.thread_id, saved.checkpoint_ns, *(x for pair in versions.items() for x in pair)]
    rows = yield Stmt(
        f"SELECT channel, type, blob FROM langgraph_blobs WHERE thread_id = ? AND checkpoint_ns = ? AND ({wanted})",
        params,
    )
    return {channel: (kind, bytes(blob)) for channel, kind, blob in rows}


def _writes(saved: Saved) -> Generator[Stmt, list[tuple[Any, ...]], list[Write]]:
    rows = yield Stmt(
        "SELECT task_id, idx, channel, type, blob, task_path FROM langgraph_writes "
        "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
        (saved.thread_id, saved.checkpoint_ns, saved.checkpoint_id),
    )
    writes = [Write(task, idx, channel, (kind, bytes(blob)), path) for task, idx, channel, kind, blob, path in rows]
    return sorted(writes, key=lambda w: w.order)


def _statements(*sql: str) -> Plan:
    def flow() -> Flow:
        for statement in sql:
            yield Stmt(statement)

    return Plan("create the checkpoint tables", True, flow)


# -- runners -------------------------------------------------------------------------------------------
class _Operations:
    """The operations every runner offers (the Redis runner offers the same four)."""

    put = staticmethod(put)
    put_writes = staticmethod(put_writes)
    delete_thread = staticmethod(delete_thread)
    find = staticmethod(find)


class SQLiteRunner(_Operations):
    """Runs a plan in one transaction of a convmem ``SQLiteStore``'s connection (its lock, its error translation)."""

    def __init__(self, store: Any) -> None:
        self.db = store.db
        self.run(_statements(*_tables("BLOB")))

    def run(self, plan: Plan) -> Any:
        with self.db.transaction(write=plan.write) as conn:
            return drive(plan.start(), lambda stmt: conn.execute(stmt.sql, tuple(stmt.params)).fetchall())

    async def arun(self, plan: Plan) -> Any:
        return await asyncio.to_thread(self.run, plan)  # sqlite3 blocks: off the event loop, as AsyncSQLiteStore


def _postgres(plan: Plan) -> PostgresOp[Any]:
    def start(retried: bool) -> Generator[PostgresQuery, Any, Any]:
        # Every write is an upsert keyed by LangGraph's ids, so a plan started again after a lost connection
        # writes the same rows: the driver may retry it.
        flow = plan.start()
        try:
            stmt = next(flow)
            while True:
                rows = yield PostgresQuery(stmt.sql.replace("?", "%s"), tuple(stmt.params))
                stmt = flow.send(rows)
        except StopIteration as stop:
            return stop.value

    return PostgresOp(plan.what, start, mode="transaction" if plan.write else "snapshot")


_LOCK = "SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':langgraph-checkpoints'))"


class PostgresRunner(_Operations):
    """Runs a plan as one operation of a convmem PostgreSQL store's driver, sync or async."""

    def __init__(self, store: Any, *, asynchronous: bool) -> None:
        self.db = store.db
        self.asynchronous = asynchronous  # an AsyncPostgresStore: its driver is awaited
        self.ready = False

    def _tables(self) -> Plan:
        # Two processes creating the same table at once can collide in the catalog: one creates, the other waits.
        return _statements(_LOCK, *_tables("BYTEA"))

    def run(self, plan: Plan) -> Any:
        if self.asynchronous:
            raise sync_on_async("PostgreSQL")
        if not self.ready:
            self.db.run(_postgres(self._tables()))
            self.ready = True
        return self.db.run(_postgres(plan))

    async def arun(self, plan: Plan) -> Any:
        if not self.asynchronous:
            return await asyncio.to_thread(self.run, plan)  # a sync store's pool blocks: off the event loop
        if not self.ready:
            await self.db.run(_postgres(self._tables()))
            self.ready = True
        return await self.db.run(_postgres(plan))
