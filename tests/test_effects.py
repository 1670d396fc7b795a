"""The one effect driver: every flow of convmem runs through drive/adrive/step."""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import Any

import pytest

from convmem._effects import Done, adrive, drive, step


def _flow(log: list[str]) -> Generator[str, Any, str]:
    first = yield "read"
    log.append(f"got {first}")
    try:
        yield "write"
    except OSError as exc:
        log.append(f"undo after {exc}")
        raise
    return "finished"


def test_drive_sends_each_result_back_and_returns_the_flow_value() -> None:
    log: list[str] = []
    assert drive(_flow(log), lambda effect: effect.upper()) == "finished"
    assert log == ["got READ"]


def test_a_failed_effect_is_thrown_into_the_flow_which_can_undo() -> None:
    log: list[str] = []

    def perform(effect: str) -> str:
        if effect == "write":
            raise OSError("disk full")
        return effect

    with pytest.raises(OSError, match="disk full"):
        drive(_flow(log), perform)
    assert log == ["got read", "undo after disk full"]


def test_an_interrupt_is_thrown_in_too() -> None:
    undone: list[bool] = []

    def flow() -> Generator[str, Any, None]:
        try:
            yield "write"
        except KeyboardInterrupt:
            undone.append(True)
            raise

    def perform(effect: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        drive(flow(), perform)
    assert undone == [True]


async def test_adrive_awaits_each_effect_like_drive() -> None:
    log: list[str] = []

    async def perform(effect: str) -> str:
        return effect * 2

    assert await adrive(_flow(log), perform) == "finished"
    assert log == ["got readread"]


def test_step_starts_sends_throws_and_wraps_the_end() -> None:
    log: list[str] = []
    flow = _flow(log)
    assert step(flow, first=True) == "read"
    assert step(flow, "x") == "write"
    assert step(flow, None) == Done("finished")
    failing = _flow([])
    step(failing, first=True)
    step(failing, "y")
    with pytest.raises(OSError, match="gone"):
        step(failing, error=OSError("gone"))


def test_what_the_flow_raises_in_answer_does_not_chain_the_effect_failure() -> None:
    """An effect's failure may echo a secret (an SDK error with a key): the flow decides what to keep."""

    def flow() -> Generator[str, Any, None]:
        with contextlib.suppress(OSError):
            yield "call"
        raise ValueError("the flow's own error")

    def perform(effect: str) -> None:
        raise OSError("sk-secret in the SDK's message")

    with pytest.raises(ValueError, match="the flow's own error") as raised:
        drive(flow(), perform)
    assert raised.value.__context__ is None
    assert raised.value.__cause__ is None


def test_drive_runs_a_flow_with_no_effect_and_one_that_recovers() -> None:
    def empty() -> Generator[str, Any, int]:
        return 7
        yield "never"  # a generator all the same

    def recovers() -> Generator[str, Any, str]:
        try:
            yield "fails"
        except OSError:
            got = yield "again"
            return f"recovered with {got}"
        return "not reached"

    calls: list[str] = []

    def perform(effect: str) -> str:
        calls.append(effect)
        if effect == "fails":
            raise OSError("once")
        return "ok"

    assert drive(empty(), perform) == 7
    assert drive(recovers(), perform) == "recovered with ok"
    assert calls == ["fails", "again"]
