"""``Options``: every constructor option, checked once, frozen, saved with the session and merged on open."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import AsyncMemory, Memory, Message
from convmem.errors import ConfigurationError, InvalidMessageError, StoreError
from convmem.limits import DEPTH_CEILING, SIZE_CEILING, Limits
from convmem.longterm.blocks.base import StaticBlock
from convmem.memory import AsyncEvictionSink, EvictionSink, Options
from convmem.memory._base import MemoryBase
from convmem.memory.options import CONFIG_KEY, initial_state, open_options, stored_config
from convmem.session import SessionState
from convmem.stores.memory import MemoryStore

from ._quick import examples
from .fakes import RecordingSummarizer

#: The constructor's parameters that say which session, not how to keep it.
IDENTITY = {"self", "store", "session_id", "user_id"}
#: The ones it turns into blocks and sinks from the session's store (``memory._longterm``), not options of their own.
WIRING = {"facts", "recall"}
#: What watches the memory without changing what it sends (``convmem.telemetry``): not an option of the session.
OBSERVERS = {"telemetry"}


def test_the_constructor_takes_exactly_the_options_with_the_same_types_and_defaults() -> None:
    parameters = inspect.signature(MemoryBase.__init__).parameters
    fields = {f.name: f for f in dataclasses.fields(Options)}
    assert set(parameters) - IDENTITY - WIRING - OBSERVERS == set(fields)
    for name, field in fields.items():
        parameter = parameters[name]
        assert parameter.annotation == field.type, name
        assert parameter.default == field.default, name


class AsyncOnlySink:
    def __init__(self) -> None:
        self.units = 0

    async def aabsorb(self, units: Any, *, session_id: str, user_id: str | None) -> None:
        self.units += len(units)


class NoSummary:
    pass


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"format": "xml"}, "format must be"),
        ({"strategy": 42}, "strategy must be a name or a Strategy, got int"),
        ({"strategy_options": [("max_messages", 3)]}, "strategy_options must be a mapping, got list"),
        ({"max_output_tokens": -1}, "non-negative integers, got -1"),
        ({"summary_max_tokens": True}, "non-negative integers, got True"),
        ({"limits": {"max_depth": 3}}, "limits must be a convmem.limits.Limits, got dict"),
        ({"on_overflow": "explode"}, "on_overflow must be 'truncate' or 'raise', got 'explode'"),
        ({"counter": "fast"}, "counter must be a TokenCounter, 'calibrated' or 'approximate', got 'fast'"),
        ({"summarizer": RecordingSummarizer()}, "only used by the summary_buffer and compaction"),
        ({"strategy": "compaction", "summarizer": NoSummary()}, r"summarize\(\) or asummarize\(\), got NoSummary"),
        ({"sinks": [print, object()]}, r"sinks\[0\] must have absorb\(\) or aabsorb\(\).*got builtin_function"),
    ],
)
def test_a_bad_option_is_a_configuration_error_naming_it(options: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        Options(max_tokens=1000, **options)
    with pytest.raises(ConfigurationError, match=says):
        Memory(max_tokens=1000, **options)
    with pytest.raises(ConfigurationError, match=says):
        AsyncMemory(max_tokens=1000, **options)


def test_options_are_frozen_and_do_not_follow_the_callers_lists() -> None:
    blocks = [StaticBlock("rules", "Be brief.")]
    strategy_options = {"max_messages": 4}
    memory = Memory(max_tokens=1000, strategy="sliding_window", strategy_options=strategy_options, blocks=blocks)
    blocks.append(StaticBlock("late", "Not given."))
    strategy_options["max_messages"] = 40
    assert [b.name for b in memory.options.blocks] == ["rules"]
    assert memory.options.strategy_options == {"max_messages": 4}
    assert memory.options.config()["strategy_options"] == {"max_messages": 4}
    with pytest.raises(dataclasses.FrozenInstanceError):
        memory.options.max_tokens = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        memory.options.strategy_options["max_messages"] = 9  # type: ignore[index]


def test_a_sync_memory_refuses_an_async_only_sink_before_it_opens_its_store(tmp_path: Path) -> None:
    path = tmp_path / "never.db"
    with pytest.raises(ConfigurationError, match=r"sinks\[0\] \(AsyncOnlySink\) is async-only"):
        Memory(max_tokens=1000, store=f"sqlite://{path}", sinks=[AsyncOnlySink()])
    assert not path.exists()  # refused first: nothing was opened, so nothing is left open


async def test_an_async_memory_awaits_an_async_only_sink() -> None:
    sink = AsyncOnlySink()
    assert isinstance(sink, AsyncEvictionSink)
    assert not isinstance(sink, EvictionSink)
    memory = AsyncMemory(max_tokens=300, strategy="sliding_window", strategy_options={"max_messages": 2}, sinks=[sink])
    for i in range(5):
        await memory.add({"role": "user", "content": f"message {i}"})
    assert sink.units == 3
    assert memory.stats().warnings == ()


def test_a_stored_config_cannot_name_the_session_or_its_user() -> None:
    # An imported session's state is the importer's to write: its config keys that are no option are dropped,
    # so they can neither collide with the session and user Memory.open passes nor reach the core.
    store = MemoryStore()
    memory = Memory(max_tokens=1000, store=store, session_id="s")
    memory.add({"role": "user", "content": "hi"})
    state = store.load("s").state
    config = {"max_tokens": 500, "session_id": "elsewhere", "user_id": "someone", "store": "sqlite"}
    crafted = dataclasses.replace(state, stats={**state.stats, CONFIG_KEY: config})
    store.save_state("s", crafted, expected_version=state.version)
    assert stored_config(store.load("s").state) == {"max_tokens": 500}
    reopened = Memory.open("s", store=store)
    assert (reopened.session_id, reopened.user_id, reopened.budget) == ("s", None, 500)


def test_memory_options_hold_the_summarizer_the_memory_folds_with() -> None:
    memory = Memory(max_tokens=1000, strategy="summary_buffer")
    assert memory.options.summarizer is memory.strategy.summarizer is not None
    assert "summarizer" not in memory.options.config()  # an object is not saved


STRATEGIES = st.sampled_from(
    [
        ("token_budget", {"low_watermark": 0.7}),
        ("sliding_window", {"max_messages": 6}),
        ("summary_buffer", {"max_tokens": 600, "keep_recent_tokens": 300}),
        ("compaction", {"keep_turns": 2}),
    ]
)


@settings(max_examples=examples(60), deadline=None)
@given(
    strategy=STRATEGIES,
    budget=st.integers(2_000, 100_000),
    reserve=st.none() | st.integers(0, 1_000),
    summary=st.none() | st.integers(64, 500),
    on_overflow=st.sampled_from(["truncate", "raise"]),
    format=st.sampled_from(["openai", "anthropic", "responses"]),
    given_budget=st.none() | st.integers(2_000, 100_000),
    limits=st.none() | st.builds(Limits, st.integers(1, DEPTH_CEILING), st.integers(1, SIZE_CEILING)),
    breakpoints=st.sampled_from([True, False, "automatic"]),
)
def test_the_saved_config_reopens_the_same_options_and_given_ones_win(
    strategy: tuple[str, dict[str, Any]],
    budget: int,
    reserve: int | None,
    summary: int | None,
    on_overflow: Any,
    format: Any,
    given_budget: int | None,
    limits: Limits | None,
    breakpoints: Any,
) -> None:
    name, strategy_options = strategy
    made = Options(
        limits=limits,
        cache_breakpoints=breakpoints,
        max_tokens=budget,
        max_output_tokens=reserve,
        strategy=name,
        strategy_options=strategy_options,
        summary_max_tokens=summary,
        on_overflow=on_overflow,
        format=format,
    )
    state: SessionState = initial_state(made)
    merged, unfolded = open_options(state, {}, None)
    assert Options(**merged).config() == made.config()
    assert (Options(**merged).limits, Options(**merged).cache_breakpoints) == (limits, breakpoints)
    assert unfolded == (10_000 if name in ("summary_buffer", "compaction") else 0)
    if given_budget is not None:
        merged, _ = open_options(state, {"max_tokens": given_budget}, None)
        assert Options(**merged).config() == {**made.config(), "max_tokens": given_budget}
    merged, _ = open_options(state, {"strategy": "token_budget"}, None)
    assert "strategy_options" not in merged  # another strategy's options would not apply


def _deep(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_limits_and_cache_breakpoints_are_saved_with_the_session_and_applied_by_import(tmp_path: Path) -> None:
    from convmem.stores import SQLiteStore

    store = SQLiteStore(tmp_path / "db.sqlite")
    memory = Memory(
        "claude-sonnet-4-5", store=store, session_id="s", limits=Limits(max_depth=4), cache_breakpoints=False
    )
    memory.add({"role": "system", "content": "Be brief."})
    memory.add_many([Message(role="user", content="hi", metadata=_deep(4)), Message(role="assistant", content="ok")])
    store.close()
    store = SQLiteStore(tmp_path / "db.sqlite")
    reopened = Memory.open("s", store=store)
    assert (reopened.options.limits, reopened.options.cache_breakpoints) == (Limits(max_depth=4), False)
    with pytest.raises(InvalidMessageError, match="4"):
        reopened.add(Message(role="user", content="deeper", metadata=_deep(5)))
    request = reopened.context(format="anthropic").request()
    assert "cache_control" not in repr(request), "a session that turned its breakpoints off stays off"
    # An import checks each message against the session's own limits, and the defaults when it saved none.
    lines = store.export_jsonl("s").decode().splitlines()
    deeper = lines[2].replace('"metadata":{"a":{"a":{"a":{}}}}', '"metadata":{"a":{"a":{"a":{"a":{}}}}}')
    assert deeper != lines[2]
    store.delete_session("s")
    with pytest.raises(StoreError, match=r"line 3: .*metadata.*4"):
        store.import_jsonl("\n".join([lines[0], lines[1], deeper, *lines[3:]]) + "\n")
    store.import_jsonl("\n".join(lines) + "\n")
    plain = Memory(max_tokens=2_000, store=store, session_id="plain")
    plain.add({"role": "user", "content": "hi"})
    exported = store.export_jsonl("plain").decode().splitlines()
    store.delete_session("plain")
    line = exported[1].replace('"content":"hi"', '"content":"hi","metadata":' + __import__("json").dumps(_deep(100)))
    with pytest.raises(StoreError, match=r"line 2: .*metadata.*64"):  # the default, though the ceiling is 256
        store.import_jsonl(exported[0] + "\n" + line + "\n")
    store.close()
