"""Fuzz add, add_many, import and Memory.open on every backend with hostile input.

The property: any input either raises a ConvmemError subclass and stores nothing, or is stored and a
memory reopened from the store gives the same context. Inputs mix valid messages with every kind of
hostility: lone surrogates, NaN and infinity, integers past 2**53, nesting up to 5,000 deep, unknown
roles and fields, broken tool arguments, oversized ids; imports are real exports with one field replaced.

``CONVMEM_FUZZ_EXAMPLES`` sets the number of examples per backend (the quick loop caps it at 5).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convmem import ConvmemError, Memory, SessionNotFoundError
from convmem.stores import MemoryStore

from .._quick import examples
from ._backends import BACKENDS, backend

N = examples(int(os.environ.get("CONVMEM_FUZZ_EXAMPLES", "25")))
USER = "fuzz"


def _nest(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


_text = st.text(st.characters(codec="utf-8"), max_size=12) | st.text(max_size=6).map(lambda s: s + "\ud800")
_leaf = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True, allow_infinity=True) | _text
)
_json = st.recursive(
    _leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3), max_leaves=8
)
_deep = st.builds(_nest, st.sampled_from([1, 10, 63, 64, 65, 255, 256, 257, 5000]), _leaf)
_values = _json | _deep
_arguments = (
    st.builds(json.dumps, st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))
    | st.sampled_from(["{", "NaN", '{"a": Infinity}', "[" * 300 + "]" * 300, "[" * 5000, '"\\ud800"', ""])
    | _text
)
_call = st.fixed_dictionaries(
    {"id": st.text(min_size=1, max_size=6), "type": st.just("function")},
    optional={"function": st.fixed_dictionaries({"name": st.text(min_size=1, max_size=6), "arguments": _arguments})},
)
_plain = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"]), "content": _text})
_hostile = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system", "developer", "robot", 7])},
    optional={
        "content": _text | st.none() | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _text})),
        "name": _text,
        "tool_calls": st.lists(_call, max_size=2),
        "tool_call_id": _text,
        "metadata": st.dictionaries(_text, _values, max_size=2),
        "x_extra": _values,
    },
)
items = _plain | _hostile


def _context(memory: Memory) -> list[dict[str, Any]]:
    return memory.context().messages


def _absent(store: Any, session_id: str) -> None:
    with pytest.raises(SessionNotFoundError):
        store.get_session(session_id, user_id=USER)


def _round_trip(store: Any, memory: Memory) -> None:
    reopened = Memory.open(memory.session_id, store=store, user_id=USER)
    assert _context(reopened) == _context(memory)
    assert [m.id for m in reopened.messages()] == [m.id for m in memory.messages()]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    with backend(request.param, tmp_path / request.param) as made:
        yield made


def _valid_export() -> bytes:
    source = MemoryStore()
    memory = Memory(max_tokens=1_000, store=source, session_id="src", user_id="u")
    memory.add_many([{"role": "system", "content": "s"}, {"role": "user", "content": "hello"}])
    memory.add({"role": "assistant", "content": "hi", "name": "bot"})
    return source.export_jsonl("src", user_id="u")


EXPORT = [json.loads(line) for line in _valid_export().splitlines()]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += _paths(child, (*path, index))
    return out


PATHS = [(line, path) for line, value in enumerate(EXPORT) for path in _paths(value) if path]


@settings(max_examples=N, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(items, min_size=1, max_size=3))
def test_add_and_add_many_store_whole_or_nothing_and_reopen_alike(store: Any, batch: list[dict[str, Any]]) -> None:
    memory = Memory(max_tokens=2_000, store=store, session_id=uuid.uuid4().hex, user_id=USER)
    try:
        if len(batch) == 1:
            memory.add(batch[0])
        else:
            memory.add_many(batch)
    except ConvmemError:
        _absent(store, memory.session_id)
        assert memory.messages() == []
        return
    _round_trip(store, memory)


@settings(max_examples=N, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(PATHS), value=_values | st.integers(-(2**70), 2**70))
def test_an_import_with_one_hostile_field_is_refused_whole_or_reopens(store: Any, where: Any, value: Any) -> None:
    lines = json.loads(json.dumps(EXPORT))
    session_id = uuid.uuid4().hex
    lines[0]["session"]["id"] = session_id
    line, path = where
    target = lines[line]
    for key in path[:-1]:
        target = target[key]
    if path[-1:] == ("id",) and path[:1] == ("session",):
        return  # the session id is the key this test finds the import by
    target[path[-1]] = value
    try:
        data = b"\n".join(json.dumps(x, ensure_ascii=False).encode("utf-8", "surrogatepass") for x in lines) + b"\n"
    except RecursionError:  # the test's own encoder cannot write it: a 5,000-deep value, built by hand
        return
    try:
        store.import_jsonl(data, user_id=USER)
    except ConvmemError:
        _absent(store, session_id)
        return
    try:
        memory = Memory.open(session_id, store=store, user_id=USER)
    except ConvmemError:
        return  # a named error at open (e.g. a stored option no memory accepts) is an allowed outcome
    again = Memory.open(session_id, store=store, user_id=USER)
    assert _context(again) == _context(memory)
