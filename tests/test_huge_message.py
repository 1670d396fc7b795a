"""A message larger than the budget is cut for every context; the cut is made once, not on every call."""

from __future__ import annotations

import pytest

from convmem import Memory
from convmem.policy import truncate


def test_a_huge_message_is_cut_once_and_every_context_sends_the_same_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    cuts: list[int] = []
    real = truncate.truncate_message

    def spy(*args: object) -> object:
        cuts.append(1)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(truncate, "truncate_message", spy)
    memory = Memory("gpt-4o", max_tokens=2000, max_output_tokens=200)
    memory.add({"role": "user", "content": "log follows " + "line of output 12345\n" * 20_000})
    first = memory.context()
    assert truncate.MARKER in first.messages[-1]["content"]
    assert first.tokens <= 1800
    for _ in range(3):
        assert memory.context().messages == first.messages
    assert len(cuts) == 1


def test_another_target_or_counter_cuts_anew() -> None:
    text = "word " * 5_000
    big = Memory("gpt-4o", max_tokens=1000, max_output_tokens=100)
    big.add({"role": "user", "content": text})
    small = Memory("gpt-4o", max_tokens=600, max_output_tokens=100)
    small.add({"role": "user", "content": text})
    assert big.context().tokens <= 900
    assert small.context().tokens <= 500
    assert big.context().tokens > small.context().tokens
