"""The durable identity every adapter uses (convmem.integrations._identity), on a real Memory.

Conversations are drawn with a tiny vocabulary, so the same words come back at other places
(the case a content hash alone would merge), and are fed the ways frameworks feed them:
whole histories after a restart, new messages only, retries of what was just sent, runs that
start without their history. Whatever the order, the memory ends up holding the conversation
once, in order.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import ConfigurationError, Memory, StoreError
from convmem.integrations._bridge import run
from convmem.integrations._identity import Ledger, fingerprint, plan, read_ledger, sync
from convmem.messages import Message
from tests._quick import examples

WORDS = st.sampled_from(["yes", "no", "ok", "again"])
CONVERSATIONS = st.lists(WORDS, min_size=1, max_size=12).map(
    lambda words: [Message(role="user" if i % 2 == 0 else "assistant", content=w) for i, w in enumerate(words)]
)
SYSTEM = Message(role="system", content="Be brief.")


def held(memory: Memory) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in memory.messages()]


def texts(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in messages]


def fresh_ledger(memory: Memory) -> Ledger:
    return run(memory, read_ledger(), what="-")


def add(memory: Memory, batch: list[Message], ledger: Ledger | None = None, *, history: bool = False) -> Any:
    return run(memory, sync(batch, [None] * len(batch), ledger or fresh_ledger(memory), history=history), what="-")


@settings(max_examples=examples(60), deadline=None)
@given(CONVERSATIONS, st.data())
def test_whole_histories_after_restarts_store_each_message_once(conversation: list[Message], data: Any) -> None:
    memory = Memory(max_tokens=100_000)
    memory.add(SYSTEM)
    cuts = sorted([*data.draw(st.lists(st.integers(1, len(conversation)), max_size=4)), len(conversation)])
    for cut in cuts:  # each time a new process, a new ledger, the whole history so far (its system prompt too)
        add(memory, [SYSTEM, *conversation[:cut]], history=True)
    assert held(memory) == texts([SYSTEM, *conversation])


class LosesAnswers:
    """A memory whose next add is stored and then fails, as an add whose answer a network lost."""

    def __init__(self, memory: Memory) -> None:
        self.memory, self.lose_next = memory, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.memory, name)

    def add_many(self, messages: Any) -> Any:
        added = self.memory.add_many(messages)
        if self.lose_next:
            self.lose_next = False
            raise StoreError("the answer was lost")
        return added


@settings(max_examples=examples(80), deadline=None)
@given(CONVERSATIONS, st.data())
def test_new_messages_only_with_lost_answers_and_restarts_store_each_message_once(
    conversation: list[Message], data: Any
) -> None:
    memory = LosesAnswers(Memory(max_tokens=100_000))
    ledger = fresh_ledger(memory.memory)
    start = 0
    while start < len(conversation):
        size = data.draw(st.integers(1, len(conversation) - start))
        chunk = conversation[start : start + size]
        memory.lose_next = data.draw(st.booleans())
        try:
            run(memory, sync(chunk, [None] * size, ledger, history=False), what="-")  # type: ignore[arg-type]
        except StoreError:  # stored, but the adapter never heard: the app sends the same chunk again
            run(memory, sync(chunk, [None] * size, ledger, history=False), what="-")  # type: ignore[arg-type]
        if data.draw(st.booleans()):
            ledger = fresh_ledger(memory.memory)  # a restart between two turns
        start += size
    assert held(memory.memory) == texts(conversation)


def test_the_same_exchange_twice_is_two_exchanges_not_a_retry() -> None:
    memory = Memory(max_tokens=10_000)
    turn = [Message(role="user", content="ok"), Message(role="assistant", content="Sure.")]
    for _ in range(3):  # an adapter sends the exchange twice, then the app restarts (a new adapter, a new reading)
        ledger = fresh_ledger(memory)
        add(memory, turn, ledger)
        add(memory, turn, ledger)
    assert held(memory) == texts(turn * 6)
    assert len({m.id for m in memory.messages()}) == 12


@settings(max_examples=examples(60), deadline=None)
@given(CONVERSATIONS)
def test_runs_without_their_history_never_lose_a_message_whose_words_came_before(conversation: list[Message]) -> None:
    memory = Memory(max_tokens=100_000)
    for message in conversation:  # each run hands only [system prompt, its new message]
        add(memory, [SYSTEM, message], history=True)
    assert held(memory) == texts([SYSTEM, *conversation])


def test_the_same_words_at_another_place_are_another_message() -> None:
    yes = Message(role="user", content="yes")
    assert fingerprint(None, yes) != fingerprint(fingerprint(None, yes), yes)
    assert fingerprint("a", yes) == fingerprint("a", Message(role="user", content="yes", id="other"))  # ids aside


def test_a_framework_id_is_the_identity_and_a_strict_adapter_refuses_what_it_cannot_follow() -> None:
    memory = Memory(max_tokens=10_000)
    ledger = fresh_ledger(memory)
    one, two = Message(role="user", content="one"), Message(role="assistant", content="two")
    run(memory, sync([one], ["lc-1"], ledger, history=True, strict=True), what="-")
    run(memory, sync([one, two], ["lc-1", "lc-2"], fresh_ledger(memory), history=True, strict=True), what="-")
    assert [m.id for m in memory.messages()] == ["lc-1", "lc-2"]
    with pytest.raises(ConfigurationError, match="removed or replaced"):
        plan([one], ["lc-9"], fresh_ledger(memory), history=True, strict=True)
    with pytest.raises(ConfigurationError, match="inserted"):
        plan(
            [one, Message(role="user", content="new"), two],
            ["lc-1", "lc-x", "lc-2"],
            fresh_ledger(memory),
            history=True,
        )
