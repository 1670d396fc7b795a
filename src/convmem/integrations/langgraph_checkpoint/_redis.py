"""The checkpoints in Redis: one flow per operation, run by a convmem Redis store's driver, sync or async.

Keys under the store's own prefix (so a store's prefix holds everything of it, and tests and
``FLUSH``-free clean-ups find them), names JSON-encoded so any thread id or namespace is one key::

    lg:threads                      zset: every thread id (score 0, read in text order)
    lg-ns:<thread>                  set: the thread's namespaces
    lg-ids:[thread, ns]             zset: checkpoint ids (score 0, so ZREVRANGEBYLEX gives newest first)
    lg-cp:[thread, ns, id]          hash: parent, type, checkpoint, metadata_type, metadata
    lg-b:[thread, ns]               hash: [channel, version] -> a channel's value at a version
    lg-w:[thread, ns, id]           hash: [task_id, idx] -> a pending write

A put or a put_writes is one ``MULTI``; a read takes each page of checkpoints in one ``MULTI`` (a
listing spanning pages can see a put that lands between them, as LangGraph's own Redis saver can).
Values are ``header\\n bytes``: the header is JSON (no raw newline), the bytes are the serializer's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Generator, Sequence
from typing import Any

from ...stores.redis._ops import Cmd, Pipe
from ...stores.redis._ops import Op as RedisOp
from ...stores.redis._rows import pairs
from ._rows import PAGE, Found, Query, Saved, Typed, Write, sync_on_async

__all__ = ["RedisRunner"]

Flow = Generator[Cmd | Pipe, Any, Any]
_CHUNK = 500  # keys per DEL


def _name(*parts: str) -> str:
    return json.dumps(list(parts), ensure_ascii=False, separators=(",", ":"))


def _pack(header: Any, data: bytes) -> bytes:
    return json.dumps(header).encode() + b"\n" + data


def _unpack(packed: bytes) -> tuple[Any, bytes]:
    header, _, data = packed.partition(b"\n")
    return json.loads(header), data


class RedisRunner:
    """The operations over a convmem ``RedisStore`` (or ``AsyncRedisStore``): its keys' prefix, its driver."""

    def __init__(self, store: Any, *, asynchronous: bool) -> None:
        self.db, self.keys, self.asynchronous = store.db, store.keys, asynchronous

    def _threads(self) -> str:
        return str(self.keys("lg", "threads"))

    def run(self, op: RedisOp[Any]) -> Any:
        if self.asynchronous:
            raise sync_on_async("Redis")
        return self.db.run(op)

    async def arun(self, op: RedisOp[Any]) -> Any:
        if not self.asynchronous:
            return await asyncio.to_thread(self.run, op)  # a sync client blocks: off the event loop
        return await self.db.run(op)

    # -- writes ----------------------------------------------------------------------------------------
    def put(self, saved: Saved, blobs: Sequence[tuple[str, str, Typed]]) -> RedisOp[None]:
        t, ns, cid = saved.thread_id, saved.checkpoint_ns, saved.checkpoint_id
        cp = self.keys("lg-cp", _name(t, ns, cid))
        row: list[Any] = ["type", saved.checkpoint[0], "checkpoint", saved.checkpoint[1]]
        row += ["metadata_type", saved.metadata[0], "metadata", saved.metadata[1]]
        if saved.parent_id is not None:
            row += ["parent", saved.parent_id]
        cmds: list[tuple[Any, ...]] = [
            ("HSETNX", self.keys("lg-b", _name(t, ns)), _name(channel, version), _pack(kind, data))
            for channel, version, (kind, data) in blobs
        ]
        cmds += [("DEL", cp), ("HSET", cp, *row), ("ZADD", self.keys("lg-ids", _name(t, ns)), 0, cid)]
        cmds += [("SADD", self.keys("lg-ns", t), ns), ("ZADD", self._threads(), 0, t)]

        def flow(retried: bool) -> Flow:
            yield Pipe(cmds)  # idempotent: a retry after a lost connection writes the same keys

        return RedisOp("put a checkpoint", flow)

    def put_writes(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, writes: Sequence[Write]
    ) -> RedisOp[None]:
        key = self.keys("lg-w", _name(thread_id, checkpoint_ns, checkpoint_id))
        cmds = [
            # A special channel's write (negative idx) replaces; a task's regular one is kept as first written.
            (
                "HSET" if w.idx < 0 else "HSETNX",
                key,
                json.dumps([w.task_id, w.idx]),
                _pack([w.channel, w.value[0], w.task_path], w.value[1]),
            )
            for w in writes
        ]

        def flow(retried: bool) -> Flow:
            if cmds:
                yield Pipe(cmds)

        return RedisOp("put pending writes", flow)

    def delete_thread(self, thread_id: str) -> RedisOp[None]:
        def flow(retried: bool) -> Flow:
            spaces = [s.decode() for s in (yield Cmd(("SMEMBERS", self.keys("lg-ns", thread_id))))]
            listed = yield Pipe([("ZRANGE", self.keys("lg-ids", _name(thread_id, ns)), 0, -1) for ns in spaces])
            doomed = [self.keys("lg-ns", thread_id)]
            for ns, ids in zip(spaces, listed, strict=True):
                doomed += [self.keys("lg-ids", _name(thread_id, ns)), self.keys("lg-b", _name(thread_id, ns))]
                for cid in (i.decode() for i in ids):
                    doomed += [
                        self.keys("lg-cp", _name(thread_id, ns, cid)),
                        self.keys("lg-w", _name(thread_id, ns, cid)),
                    ]
            cmds: list[tuple[Any, ...]] = [("DEL", *doomed[i : i + _CHUNK]) for i in range(0, len(doomed), _CHUNK)]
            yield Pipe([*cmds, ("ZREM", self._threads(), thread_id)])

        return RedisOp("delete a thread's checkpoints", flow)

    # -- reads -----------------------------------------------------------------------------------------
    def find(self, query: Query) -> RedisOp[list[Found]]:
        def flow(retried: bool) -> Generator[Cmd | Pipe, Any, list[Found]]:
            if query.thread_id is not None:
                threads = [query.thread_id]
            else:
                threads = [t.decode() for t in (yield Cmd(("ZRANGE", self._threads(), 0, -1)))]
            kept: list[Saved] = []
            for t in threads:
                if query.checkpoint_ns is not None:
                    spaces = [query.checkpoint_ns]
                else:
                    spaces = sorted(s.decode() for s in (yield Cmd(("SMEMBERS", self.keys("lg-ns", t)))))
                for ns in spaces:
                    yield from self._scan(query, t, ns, kept)
                    if query.full(kept):
                        break
                if query.full(kept):
                    break
            found = []
            for saved in kept:
                found.append((yield from self._complete(query, saved)))
            return found

        return RedisOp("read checkpoints", flow)

    def _scan(self, query: Query, t: str, ns: str, kept: list[Saved]) -> Generator[Cmd | Pipe, Any, None]:
        if query.checkpoint_id is not None:
            if query.before is not None and query.checkpoint_id >= query.before:
                return
            pages: Any = [[query.checkpoint_id.encode()]]
        else:
            pages = None
        offset = 0
        top = "(" + query.before if query.before is not None else "+"
        while True:
            if pages is None:
                ids = yield Cmd(("ZREVRANGEBYLEX", self.keys("lg-ids", _name(t, ns)), top, "-", "LIMIT", offset, PAGE))
            else:
                ids = pages.pop() if pages else []
            if not ids:
                return
            rows = yield Pipe([("HGETALL", self.keys("lg-cp", _name(t, ns, i.decode()))) for i in ids])
            for cid, raw in zip(ids, rows, strict=True):
                row = pairs(raw)
                if not row:
                    continue  # deleted meanwhile
                parent = row.get(b"parent")
                saved = Saved(
                    t,
                    ns,
                    cid.decode(),
                    parent.decode() if parent is not None else None,
                    (row[b"type"].decode(), row[b"checkpoint"]),
                    (row[b"metadata_type"].decode(), row[b"metadata"]),
                )
                if query.keep(saved.metadata):
                    kept.append(saved)
                    if query.full(kept):
                        return
            if pages is not None or len(ids) < PAGE:
                return
            offset += PAGE

    def _complete(self, query: Query, saved: Saved) -> Generator[Cmd | Pipe, Any, Found]:
        t, ns, cid = saved.thread_id, saved.checkpoint_ns, saved.checkpoint_id
        versions = query.versions(saved.checkpoint)
        fields = [_name(c, v) for c, v in versions.items()]
        cmds: list[tuple[Any, ...]] = [("HGETALL", self.keys("lg-w", _name(t, ns, cid)))]
        if fields:
            cmds.append(("HMGET", self.keys("lg-b", _name(t, ns)), *fields))
        replies = yield Pipe(cmds)
        blobs: dict[str, Typed] = {}
        for channel, packed in zip(versions, replies[1] if fields else [], strict=True):
            if packed is not None:
                kind, data = _unpack(packed)
                blobs[channel] = (kind, data)
        writes = []
        for field, packed in pairs(replies[0]).items():
            task_id, idx = json.loads(field)
            (channel, kind, path), data = _unpack(packed)
            writes.append(Write(task_id, idx, channel, (kind, data), path))
        return Found(saved, blobs, sorted(writes, key=lambda w: w.order))
