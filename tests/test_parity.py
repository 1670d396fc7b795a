"""The sync and async twins give identical results, method by method, and a memory locks every operation.

Every public member of ``Memory``/``AsyncMemory`` and ``Facts``/``AsyncFacts`` is found by
introspection and must have a scenario here (or a stated reason to need none), so a method added
later fails :func:`test_every_public_member_has_a_scenario` until it is covered. Each scenario runs
on a fresh pair of twins; a memory's lock is swapped for one that records whether it is held, and
its store, summarizer and sinks for spies that record whether the lock was held when they were
called: each memory operation must take the lock and do all its I/O under it.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from convmem import AsyncMemory, Memory, Message, ToolCall
from convmem.longterm.facts._plan import FactChanges
from convmem.longterm.facts.book import AsyncFacts, Facts
from convmem.longterm.facts.model import Fact, FactAdd, FactInvalidate
from convmem.stores.memory import AsyncMemoryStore, MemoryStore

from .fakes import AsyncRecordingSummarizer, FlakySummarizer, RecordingSummarizer
from .longterm.fakes import AsyncRuleExtractor, RuleExtractor

SCENARIO: list[list[Any]] = [
    [{"role": "system", "content": "You are a careful assistant."}],
    *[[{"role": "user", "content": f"question {i} " * 6}] for i in range(3)],
    [Message(role="assistant", tool_calls=(ToolCall("a", "f", "{}"), ToolCall("b", "g", '{"x": [1, 2]}')))],
    [Message(role="tool", tool_call_id="a", content="result a " * 30)],
    [Message(role="tool", tool_call_id="b", content="result b " * 30)],
    *[
        [{"role": "user", "content": f"follow-up {i} " * 9}, {"role": "assistant", "content": f"reply {i}"}]
        for i in range(12)
    ],
]

CONFIGS: list[dict[str, Any]] = [
    {"strategy": "token_budget"},
    {"strategy": "sliding_window", "strategy_options": {"max_messages": 5}},
    {
        "strategy": "summary_buffer",
        "summarizer": RecordingSummarizer,
        "strategy_options": {"max_tokens": 200, "keep_recent_tokens": 100},
    },
    {
        "strategy": "summary_buffer",
        "summarizer": lambda: FlakySummarizer({1, 3}),
        "strategy_options": {"max_tokens": 200, "keep_recent_tokens": 100},
    },
    {"strategy": "compaction", "summarizer": AsyncRecordingSummarizer, "strategy_options": {"max_tokens": 250}},
]


def build(config: dict[str, Any]) -> dict[str, Any]:
    options = dict(config)
    if "summarizer" in options:
        options["summarizer"] = options["summarizer"]()
    return options


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: str(c["strategy"]))
async def test_sync_and_async_give_identical_contexts(config: dict[str, Any]) -> None:
    sync = Memory(max_tokens=600, max_output_tokens=50, **build(config))
    asyn = AsyncMemory(max_tokens=600, max_output_tokens=50, **build(config))
    for step in SCENARIO:
        sync.add_many(step)
        await asyn.add_many(step)
        for fmt in ("openai", "anthropic", "responses"):
            a, b = sync.context(format=fmt), await asyn.context(format=fmt)
            assert (a.messages, a.system, a.account, a.left_out) == (b.messages, b.system, b.account, b.left_out)
    assert sync.stats() == asyn.stats()
    assert [m.content for m in sync.messages()] == [m.content for m in await asyn.messages()]
    assert [m.content for m in sync.messages("archived")] == [m.content for m in await asyn.messages("archived")]
    assert sync.rollback_incomplete() == await asyn.rollback_incomplete() == []
    await asyn.aclose()
    sync.close()


# -- the twins' public members ---------------------------------------------------------------------------

#: Sync name -> its async twin's, where they differ.
RENAMED = {"close": "aclose", "absorb": "aabsorb"}


def public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_every_public_member_has_an_async_twin() -> None:
    for sync, asyn in ((Memory, AsyncMemory), (Facts, AsyncFacts)):
        assert {RENAMED.get(name, name) for name in public(sync)} == public(asyn)


def test_every_public_member_has_a_scenario() -> None:
    # A public method added to a twin fails here until a scenario below covers it (or FIXED names it).
    assert public(Memory) == set(MEMORY_SCENARIOS) | FIXED
    assert public(Facts) == set(FACTS_SCENARIOS)


async def call(target: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``name`` (renamed for an async twin) on either twin, awaiting what the async one returns."""
    asynchronous = isinstance(target, (AsyncMemory, AsyncFacts)) or target in (AsyncMemory, AsyncFacts)
    member = getattr(target, RENAMED.get(name, name) if asynchronous else name)
    result = member(*args, **kwargs) if callable(member) else member
    return await result if inspect.isawaitable(result) else result


# -- memories: a lock that knows when it is held, and I/O that records whether it was -------------------


class Watch:
    """What one memory's lock saw: how often it was taken, and the I/O calls made with and without it."""

    def __init__(self) -> None:
        self.depth = 0
        self.taken = 0
        self.io: list[tuple[str, bool]] = []

    def saw(self, what: str) -> None:
        self.io.append((what, self.depth > 0))


class WatchedRLock:
    def __init__(self, watch: Watch) -> None:
        self._lock, self.watch = threading.RLock(), watch

    def __enter__(self) -> bool:
        self._lock.acquire()
        self.watch.depth += 1
        self.watch.taken += 1
        return True

    def __exit__(self, *exc: object) -> None:
        self.watch.depth -= 1
        self._lock.release()


class WatchedLock:
    def __init__(self, watch: Watch) -> None:
        self._lock, self.watch = asyncio.Lock(), watch

    async def __aenter__(self) -> None:
        await self._lock.acquire()
        self.watch.depth += 1
        self.watch.taken += 1

    async def __aexit__(self, *exc: object) -> None:
        self.watch.depth -= 1
        self._lock.release()


class SpyStore:
    """A store whose every call is recorded with whether the memory's lock was held."""

    def __init__(self, inner: Any, watch: Watch) -> None:
        self._inner, self._watch = inner, watch

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute):
            return attribute

        def spied(*args: Any, **kwargs: Any) -> Any:
            self._watch.saw(f"store.{name}")
            return attribute(*args, **kwargs)

        return spied


class SpySummarizer(RecordingSummarizer):
    def __init__(self, watch: Watch) -> None:
        super().__init__()
        self.watch = watch

    def summarize(self, previous: str | None, messages: Sequence[Message], max_tokens: int) -> str:
        self.watch.saw("summarizer")
        return super().summarize(previous, messages, max_tokens)


class SpySink:
    def __init__(self, watch: Watch) -> None:
        self.watch = watch
        self.units: list[list[str]] = []

    def absorb(self, units: Any, *, session_id: str, user_id: str | None) -> None:
        self.watch.saw("sink")
        self.units += [[s.message.text for s in unit] for unit in units]


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def calls(*ids: str) -> Message:
    return Message(role="assistant", tool_calls=tuple(ToolCall(i, "lookup", "{}") for i in ids))


REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "the answer"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 120, "completion_tokens": 8},
}


def memory_pair() -> tuple[Memory, AsyncMemory, Watch, Watch]:
    """Twins with a summary strategy and a sink, their stores spied on and their locks watched."""
    made: list[tuple[Any, Watch]] = []
    for twin, store in ((Memory, MemoryStore()), (AsyncMemory, AsyncMemoryStore())):
        watch = Watch()
        memory = twin(
            model="gpt-4o",
            store=store,
            session_id="s",
            user_id="u",
            strategy="summary_buffer",
            strategy_options={"max_tokens": 160, "keep_recent_tokens": 60},
            summarizer=SpySummarizer(watch),
            sinks=[SpySink(watch)],
        )
        memory._lock = WatchedRLock(watch) if twin is Memory else WatchedLock(watch)
        memory.store = SpyStore(store, watch)
        made.append((memory, watch))
    (sync, sync_watch), (asyn, async_watch) = made
    return sync, asyn, sync_watch, async_watch


async def prime(memory: Any) -> None:
    await call(memory, "add", {"role": "system", "content": "Be brief."})
    for i in range(4):
        await call(memory, "add_many", [user(f"question {i} " * 20), {"role": "assistant", "content": f"answer {i}"}])


def texts(messages: Sequence[Message]) -> list[tuple[str, str, str | None]]:
    return [(m.role, m.text, m.tool_call_id) for m in messages]


Scenario = Callable[[Any], Awaitable[Any]]


async def _add(m: Any) -> Any:
    return texts([await call(m, "add", user("a new question " * 8))])


async def _add_many(m: Any) -> Any:
    return texts(await call(m, "add_many", [user("one " * 30), {"role": "assistant", "content": "two " * 30}]))


async def _add_response(m: Any) -> Any:
    return texts(await call(m, "add_response", REPLY)), (await call(m, "stats")).input_tokens


async def _clear(m: Any) -> Any:
    await call(m, "clear", keep_system=False)
    return (await call(m, "stats")).window_messages, texts(await call(m, "messages", "cleared"))


async def _close(m: Any) -> Any:
    m._owns_store = True  # so closing reaches the store
    return await call(m, "close")


async def _context(m: Any) -> Any:
    context = await call(m, "context", "what did I ask?", format="anthropic")
    return context.messages, context.system, context.account


async def _messages(m: Any) -> Any:
    return texts(await call(m, "messages")), texts(await call(m, "messages", ["summarized", "archived"]))


async def _record_usage(m: Any) -> Any:
    return await call(m, "record_usage", {"input_tokens": 50, "output_tokens": 5}), await call(m, "stats")


async def _refresh(m: Any) -> Any:
    other = await call(type(m), "open", "s", store=m.store._inner, user_id="u")
    await call(other, "add", user("from another writer"))
    await call(m, "refresh")
    return texts(await call(m, "messages"))[-1], (await call(m, "stats")).messages


async def _repair(m: Any) -> Any:
    await call(m, "add", calls("c1", "c2"))
    return texts(await call(m, "repair")), await call(m, "pending_tool_calls")


async def _rollback_incomplete(m: Any) -> Any:
    await call(m, "add", calls("c1"))
    return texts(await call(m, "rollback_incomplete")), texts(await call(m, "messages"))[-1]


async def _stats(m: Any) -> Any:
    return await call(m, "stats")


async def _pending_tool_calls(m: Any) -> Any:
    await call(m, "add", calls("c1", "c2"))
    await call(m, "add", Message(role="tool", tool_call_id="c1", content="found"))
    return await call(m, "pending_tool_calls")


async def _open(m: Any) -> Any:
    twin = Memory if isinstance(m, Memory) else AsyncMemory
    reopened = await call(twin, "open", "s", store=m.store._inner, user_id="u", summarizer=RecordingSummarizer())
    return (await call(reopened, "context")).messages, (await call(reopened, "stats")).messages


MEMORY_SCENARIOS: dict[str, Scenario] = {
    "add": _add,
    "add_many": _add_many,
    "add_response": _add_response,
    "clear": _clear,
    "close": _close,
    "context": _context,
    "messages": _messages,
    "open": _open,
    "pending_tool_calls": _pending_tool_calls,
    "record_usage": _record_usage,
    "refresh": _refresh,
    "repair": _repair,
    "rollback_incomplete": _rollback_incomplete,
    "stats": _stats,
}
#: Fixed when the memory is made: nothing to lock.
FIXED = {"budget", "reserved_output", "counter", "strategy"}
#: A classmethod that makes the memory: no lock exists before it does.
UNLOCKED = {"open"}
#: AsyncMemory's reads that are not coroutines cannot await its asyncio.Lock (see convmem.memory.aio).
ASYNC_READS = {"stats", "pending_tool_calls"}


def lock_problems(twin: Any, name: str, watch: Watch) -> list[str]:
    """What ``twin.name`` did wrong with its lock: I/O without it, or never taking it."""
    label = f"{type(twin).__name__}.{name}"
    problems = [f"{label} called {what} without its lock" for what, held in watch.io if not held]
    if isinstance(twin, AsyncMemory) and name in ASYNC_READS:
        if inspect.iscoroutinefunction(getattr(AsyncMemory, name)):
            problems.append(f"{label} is a coroutine: it can await the lock, so it must")
    elif not watch.taken:
        problems.append(f"{label} did not take its lock")
    return problems


@pytest.mark.parametrize("name", sorted(MEMORY_SCENARIOS))
async def test_each_memory_operation_gives_the_same_result_under_the_lock(name: str) -> None:
    sync, asyn, sync_watch, async_watch = memory_pair()
    await prime(sync)
    await prime(asyn)
    for watch in (sync_watch, async_watch):
        watch.taken, watch.io = 0, []
    scenario = MEMORY_SCENARIOS[name]
    assert await scenario(sync) == await scenario(asyn)
    if name not in UNLOCKED:
        assert lock_problems(sync, name, sync_watch) == []
        assert lock_problems(asyn, name, async_watch) == []


def test_the_lock_check_catches_an_operation_without_the_lock() -> None:
    sync, _, watch, _ = memory_pair()
    sync.store.list_sessions(user_id="u")  # what a method that forgot the lock does
    assert lock_problems(sync, "forgetful", watch) == [
        "Memory.forgetful called store.list_sessions without its lock",
        "Memory.forgetful did not take its lock",
    ]
    watch.io = []
    with sync._lock:
        sync.store.list_sessions(user_id="u")
    assert lock_problems(sync, "careful", watch) == []


async def test_priming_summarizes_and_feeds_the_sink_under_the_lock() -> None:
    sync, asyn, sync_watch, async_watch = memory_pair()
    for twin, watch in ((sync, sync_watch), (asyn, async_watch)):
        await prime(twin)
        seen = {what for what, _ in watch.io}
        assert {"summarizer", "sink", "store.append", "store.save_state"} <= seen, seen
        assert all(held for _, held in watch.io)


async def test_concurrent_async_adds_are_serialized_by_the_lock() -> None:
    asyn = AsyncMemory(model="gpt-4o", strategy="summary_buffer", summarizer=AsyncRecordingSummarizer())
    await asyncio.gather(*(asyn.add(user(f"message {i} " * 20)) for i in range(12)))
    await asyncio.gather(asyn.add_response(REPLY), asyn.add_response(REPLY), asyn.record_usage(REPLY["usage"]))
    stored = await asyn.messages()
    assert len(stored) == len({m.id for m in stored}) == 14
    assert (await asyn.messages())[-1].text == "the answer"
    assert asyn.stats().input_tokens == 3 * 120


# -- facts -----------------------------------------------------------------------------------------------

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def facts_pair() -> tuple[Facts, AsyncFacts]:
    return Facts(extractor=RuleExtractor(), clock=lambda: T0), AsyncFacts(
        extractor=AsyncRuleExtractor(), clock=lambda: T0
    )


def plain(value: Any) -> Any:
    """Facts without their random ids, so the twins' results compare."""
    if isinstance(value, Fact):
        return replace(value, id="", replaced_by=None if value.replaced_by is None else "<id>")
    if isinstance(value, FactChanges):
        return (*(plain(part) for part in (value.added, value.changed, value.merged)), value.rejected)
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


async def _fact_add(f: Any) -> Any:
    return plain(await call(f, "add", "Alice lives in Lisbon", user_id="alice", subject="home"))


async def _fact_update(f: Any) -> Any:
    home = await call(f, "add", "Alice lives in Lisbon", user_id="alice", subject="home")
    return plain(await call(f, "update", home.id, "Alice lives in Porto", user_id="alice")), plain(
        await call(f, "history", user_id="alice")
    )


async def _fact_invalidate(f: Any) -> Any:
    home = await call(f, "add", "Alice lives in Lisbon", user_id="alice", subject="home")
    return plain(await call(f, "invalidate", home.id, reason="moved away", user_id="alice", valid_to=T0))


async def _fact_apply(f: Any) -> Any:
    ops = [FactAdd("sky is blue", ("m1",), "sky"), FactInvalidate("missing", "made up")]
    return plain(await call(f, "apply", ops, user_id="bob", strict=False))


async def _fact_facts(f: Any) -> Any:
    await call(f, "add", "Alice likes tea", user_id="alice", subject="drink", valid_from=T0 - timedelta(days=2))
    return plain(await call(f, "facts", user_id="alice")), plain(await call(f, "facts", user_id="alice", valid_at=T0))


async def _fact_history(f: Any) -> Any:
    await call(f, "add", "Alice likes tea", user_id="alice", subject="drink")
    return plain(await call(f, "history", user_id="alice"))


async def _fact_extract(f: Any) -> Any:
    said = [Message(role="user", content="remember city = Lisbon", id="m1", created_at=T0)]
    return plain(await call(f, "extract", said, user_id="alice", session_id="s"))


async def _fact_absorb(f: Any) -> Any:
    from convmem.messages import StoredMessage

    unit = [StoredMessage(0, Message(role="user", content="remember pet = cat", id="m2", created_at=T0), 5)]
    await call(f, "absorb", [unit], session_id="s", user_id="alice")
    return plain(await call(f, "facts", user_id="alice"))


async def _fact_close(f: Any) -> Any:
    return await call(f, "close")


FACTS_SCENARIOS: dict[str, Scenario] = {
    "absorb": _fact_absorb,
    "add": _fact_add,
    "apply": _fact_apply,
    "close": _fact_close,
    "extract": _fact_extract,
    "facts": _fact_facts,
    "history": _fact_history,
    "invalidate": _fact_invalidate,
    "update": _fact_update,
}


@pytest.mark.parametrize("name", sorted(FACTS_SCENARIOS))
async def test_each_facts_operation_gives_the_same_result(name: str) -> None:
    # Facts hold no lock: each write is one store transaction, and a concurrent writer's change is a
    # ConflictError from the store (extract plans once more), so there is no lock to check here.
    sync, asyn = facts_pair()
    scenario = FACTS_SCENARIOS[name]
    assert await scenario(sync) == await scenario(asyn)
