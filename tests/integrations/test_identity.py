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

from convmem import ConfigurationError, Memory
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


def add(memory: Memory, batch: list[Message], ledger: Ledger | None = None, **kw: Any) -> Any:
    return run(memory, sync(batch, [None] * len(batch), ledger or fresh_ledger(memory), **kw), what="-")


@settings(max_examples=examples(60), deadline=None)
@given(CONVERSATIONS, st.data())
def test_whole_histories_after_restarts_store_each_message_once(conversation: list[Message], data: Any) -> None:
    memory = Memory(max_tokens=100_000)
    memory.add(SYSTEM)
    cuts = sorted([*data.draw(st.lists(st.integers(1, len(conversation)), max_size=4)), len(conversation)])
    for cut in cuts:  # each time a new process, a new ledger, the whole history so far (its system prompt too)
        add(memory, [SYSTEM, *conversation[:cut]])
    assert held(memory) == texts([SYSTEM, *conversation])


@settings(max_examples=examples(60), deadline=None)
@given(CONVERSATIONS, st.data())
def test_new_messages_only_with_retries_store_each_message_once(conversation: list[Message], data: Any) -> None:
    memory = Memory(max_tokens=100_000)
    ledger = fresh_ledger(memory)
    start = 0
    while start < len(conversation):
        size = data.draw(st.integers(1, len(conversation) - start))
        chunk = conversation[start : start + size]
        add(memory, chunk, ledger)
        if data.draw(st.booleans()):  # the answer was lost: sent again, by this adapter or a new one
            add(memory, chunk, ledger if data.draw(st.booleans()) else None)
        if data.draw(st.booleans()):
            ledger = fresh_ledger(memory)  # a restart
        start += size
    assert held(memory) == texts(conversation)


@settings(max_examples=examples(60), deadline=None)
@given(CONVERSATIONS)
def test_runs_without_their_history_never_lose_a_message_whose_words_came_before(conversation: list[Message]) -> None:
    memory = Memory(max_tokens=100_000)
    for message in conversation:  # each run hands only [system prompt, its new message]
        add(memory, [SYSTEM, message])
    assert held(memory) == texts([SYSTEM, *conversation])


def test_the_same_words_at_another_place_are_another_message() -> None:
    yes = Message(role="user", content="yes")
    assert fingerprint(None, yes) != fingerprint(fingerprint(None, yes), yes)
    assert fingerprint("a", yes) == fingerprint("a", Message(role="user", content="yes", id="other"))  # ids aside


def test_a_framework_id_is_the_identity_and_a_strict_adapter_refuses_what_it_cannot_follow() -> None:
    memory = Memory(max_tokens=10_000)
    ledger = fresh_ledger(memory)
    one, two = Message(role="user", content="one"), Message(role="assistant", content="two")
    run(memory, sync([one], ["lc-1"], ledger, strict=True), what="-")
    run(memory, sync([one, two], ["lc-1", "lc-2"], fresh_ledger(memory), strict=True), what="-")
    assert [m.id for m in memory.messages()] == ["lc-1", "lc-2"]
    with pytest.raises(ConfigurationError, match="removed or replaced"):
        plan([one], ["lc-9"], fresh_ledger(memory), strict=True)
    with pytest.raises(ConfigurationError, match="inserted"):
        plan([one, Message(role="user", content="new"), two], ["lc-1", "lc-x", "lc-2"], fresh_ledger(memory))
