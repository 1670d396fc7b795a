"""The conformance suite for async stores (:class:`~convmem.stores.base.AsyncStore`).

It runs the whole sync suite against the async store, driving each awaited
call to completion on a private event loop, so the twins are held to exactly
the same behaviour. Native async tests are added on top: concurrent appends
from many tasks, and a resumed ``AsyncMemory``.

Example::

    class TestAsyncSQLiteStore(AsyncStoreConformance):
        def make_store(self, location):
            return AsyncSQLiteStore(location / "convmem.db")
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..memory import AsyncMemory
from ..policy.units import group_units
from ..stores.base import AppendRequest, AsyncLongTermStores, AsyncSessionStore, AsyncStore
from ._data import EchoSummarizer, numbered
from ._longterm_tests import fact
from ._write_tests import turn
from .conformance import StoreConformance

__all__ = ["AsyncStoreConformance"]


class _Blocking:
    """A sync view of an async store, for the shared tests only (the library never blocks like this)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.loop = asyncio.new_event_loop()

    def __getattr__(self, name: str) -> Any:
        if name == "rows_read":
            return getattr(getattr(self.inner, "sync", self.inner), name)
        target = getattr(self.inner, name)
        if not inspect.iscoroutinefunction(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            result = self.loop.run_until_complete(target(*args, **kwargs))
            return iter(result) if name == "messages" else result

        return call

    def close(self) -> None:
        if self.loop.is_closed():
            return
        try:
            self.loop.run_until_complete(self.inner.aclose())
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
        finally:
            self.loop.close()


class AsyncStoreConformance(StoreConformance):
    """The suite for async stores: override :meth:`make_store` to return an ``AsyncStore``."""

    def open_store(self, location: Path) -> Any:
        store = self.make_store(location)
        assert isinstance(store, AsyncStore)
        blocking = _Blocking(store)
        if isinstance(store, AsyncSessionStore):
            return blocking
        # Hide the session-management methods the backend lacks, so those tests skip.
        return _StoreOnly(blocking)

    def _long_term(self, store: Any) -> Any:
        pytest.skip("an async store's long-term memory is checked by test_facts_of_an_async_store")

    async def test_facts_of_an_async_store(self, tmp_path: Path) -> None:
        """``store.facts()`` is the async fact store over the store's database; it keeps users apart."""
        store = self.make_store(tmp_path)
        try:
            keeper = store if isinstance(store, AsyncLongTermStores) else None
            if keeper is None:
                pytest.skip("the store keeps no long-term memory")
            facts = keeper.facts()
            await facts.write_facts([fact("f1", "alice", "lives in Lyon"), fact("f2", "bob", "lives in Oslo")], [])
            assert [f.id for f in await keeper.facts().list_facts(user_id="alice")] == ["f1"]
            assert [f.id for f in await facts.list_facts(user_id="bob")] == ["f2"]
            assert await facts.list_facts(user_id=None) == []
            await facts.aclose()  # the store's connection is not the fact store's to close
            await store.append(AppendRequest("s1", numbered(1), user_id="alice"))
        finally:
            await store.aclose()
        if self.persistent:
            again = self.make_store(tmp_path)
            try:
                assert [f.id for f in await again.facts().list_facts(user_id="alice")] == ["f1"]
            finally:
                await again.aclose()

    async def test_the_async_store_implements_the_protocol(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        assert isinstance(store, AsyncStore)
        await store.aclose()

    async def test_concurrent_tasks_get_distinct_consecutive_seqs(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        await store.append(AppendRequest("s", numbered(1), user_id="u"))
        results = await asyncio.gather(
            *(store.append(AppendRequest("s", numbered(1, start=n), user_id="u")) for n in range(1, 30))
        )
        assert sorted(seq for seqs in results for seq in seqs) == list(range(1, 30))
        rows = await store.messages("s", user_id="u")
        assert [r.seq for r in rows] == list(range(30))
        assert sorted(r.message.id or "" for r in rows) == sorted(f"m{n}" for n in range(30))
        await store.aclose()

    async def test_a_reopened_async_memory_gives_the_same_context(self, tmp_path: Path) -> None:
        options: dict[str, Any] = {
            "max_tokens": 400,
            "strategy": "summary_buffer",
            "summarizer": EchoSummarizer(),
            "strategy_options": {"max_tokens": 150, "keep_recent_tokens": 80},
        }
        store = self.make_store(tmp_path)
        memory = AsyncMemory(store=store, user_id="u", **options)
        await memory.add({"role": "system", "content": "Be brief."})
        for n in range(15):
            call = {"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            await memory.add_many(
                [
                    {"role": "user", "content": f"question {n} " * 3},
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": f"c{n}", "content": f"result {n}"},
                ]
            )
        before = await memory.context()
        if self.persistent:
            await store.aclose()
            store = self.make_store(tmp_path)
        reopened = await AsyncMemory.open(memory.session_id, store=store, user_id="u", **options)
        after = await reopened.context()
        assert (after.messages, after.account, after.window) == (before.messages, before.account, before.window)
        assert reopened.stats() == memory.stats()
        await store.aclose()

    async def test_forty_gathered_tasks_share_one_async_memory(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        memory = AsyncMemory(store=store, user_id="u", max_tokens=400, session_id="g")
        await memory.add({"role": "system", "content": "Be brief."})
        results = await asyncio.gather(*(memory.add_many(turn(str(n), tools=n % 3)) for n in range(40)))
        added = [m.id for batch in results for m in batch]
        stored = await memory.messages()
        assert len(added) == len(set(added)) == sum(len(turn(str(n), tools=n % 3)) for n in range(40))
        assert sorted(m.id or "" for m in stored[1:]) == sorted(i or "" for i in added)
        group_units(stored[1:])  # a valid conversation, every unit whole
        live = await memory.context()
        if self.persistent:
            await store.aclose()
            store = self.make_store(tmp_path)
        reopened = await AsyncMemory.open("g", store=store, user_id="u")
        assert (await reopened.context()).messages == live.messages
        # The window is the newest stored messages, in stored order (the lock admitted one add at a time).
        assert live.messages[1:] == [_rendered(m) for m in stored][-(len(live.messages) - 1) :]
        await store.aclose()


def _rendered(message: Any) -> dict[str, Any]:
    from ..formats.openai import to_openai

    return to_openai(message)


class _StoreOnly:
    """Exposes only the :class:`~convmem.stores.base.Store` methods of a wrapped store."""

    _names = frozenset(
        {"append", "load", "save_state", "messages", "delete_messages", "get_session", "close", "rows_read"}
    )

    def __init__(self, inner: _Blocking) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in self._names:
            raise AttributeError(name)
        return getattr(self._inner, name)  # type: ignore[no-any-return]
