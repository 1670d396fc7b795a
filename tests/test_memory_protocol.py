"""The one memory protocol: Memory and Client keep MemoryLike, AsyncMemory and AsyncClient keep AsyncMemoryLike.

Checked signature by signature (every parameter the protocol names, its kind and
default; sync methods plain, async ones coroutines), not only by the names that
``isinstance`` on a runtime-checkable protocol looks at.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from convmem import AsyncClient, AsyncMemory, Client, Memory
from convmem.memory.protocol import AsyncMemoryLike, MemoryLike

PAIRS = [(MemoryLike, Memory), (MemoryLike, Client), (AsyncMemoryLike, AsyncMemory), (AsyncMemoryLike, AsyncClient)]


def members(protocol: type) -> dict[str, Any]:
    return {
        name: value
        for name, value in vars(protocol).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }


@pytest.mark.parametrize(("protocol", "cls"), PAIRS, ids=lambda x: x.__name__)
def test_each_memory_keeps_its_protocol_signature_by_signature(protocol: type, cls: type) -> None:
    assert set(protocol.__annotations__) == {"session_id", "user_id", "model"}
    wanted = members(protocol)
    assert wanted, "the protocol names no method"
    for name, spec in wanted.items():
        own = inspect.getattr_static(cls, name, None)
        assert own is not None, f"{cls.__name__} has no {name}"
        if isinstance(spec, property):
            assert isinstance(own, property), f"{cls.__name__}.{name} is not a property"
            continue
        assert inspect.iscoroutinefunction(own) == inspect.iscoroutinefunction(spec), f"{cls.__name__}.{name}"
        theirs = inspect.signature(own).parameters
        for param in inspect.signature(spec).parameters.values():
            assert param.name in theirs, f"{cls.__name__}.{name} lacks {param.name!r}"
            got = theirs[param.name]
            assert got.kind == param.kind, f"{cls.__name__}.{name}({param.name}) is {got.kind}"
            assert got.default == param.default, f"{cls.__name__}.{name}({param.name}) defaults to {got.default}"
        extra = [p for n, p in theirs.items() if n not in inspect.signature(spec).parameters]
        assert all(p.default is not inspect.Parameter.empty or p.kind is p.VAR_KEYWORD for p in extra), (
            f"{cls.__name__}.{name} requires more than the protocol gives: {extra}"
        )


def test_a_memory_is_an_instance_of_its_protocol() -> None:
    memory = Memory(max_tokens=1_000)
    assert isinstance(memory, MemoryLike)
    assert isinstance(AsyncMemory(max_tokens=1_000), AsyncMemoryLike)
    assert not isinstance(object(), MemoryLike)


def test_a_method_missing_from_a_memory_fails_the_check() -> None:
    class Partial:
        session_id = "s"
        user_id = None
        model = None

        def add(self, message: Any) -> Any: ...

    assert inspect.getattr_static(Partial, "context", None) is None
    with pytest.raises(AssertionError, match="Partial has no "):
        test_each_memory_keeps_its_protocol_signature_by_signature(MemoryLike, Partial)
