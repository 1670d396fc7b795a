"""The writes half of the conformance suite: atomic, idempotent appends, many writers, users kept apart.

:class:`WriteTests` is a base of :class:`~convmem.testing.StoreConformance`,
so every backend is held to the promises of :mod:`convmem.stores.base`:

* an append checks the writer's view (next seq, state version) before it
  writes, writes its state with it, and a vanished session is lost, never
  re-created;
* a batch stored already is a retry (nothing written), other content under a
  stored id is a conflict naming it;
* a user learns nothing about another user's session or message ids;
* through ``Memory``: options saved with the session, one memory shared by
  eight threads, two memories on one session converging with tool calls kept
  whole, and a state save that fails after the append (live and reopened
  contexts stay equal, a retry duplicates nothing).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ..errors import (
    ConflictError,
    InvalidMessageError,
    SessionLostError,
    SessionNotFoundError,
    StaleSessionError,
    StoreError,
)
from ..memory import Memory
from ..messages import Message, ToolCall
from ..policy.strategies import SlidingWindow
from ..policy.units import group_units
from ..session import SessionState
from ..stores.base import AppendRequest, SessionStore
from ._data import EchoSummarizer, numbered

__all__ = ["FailingSaves", "WriteTests", "turn"]


def turn(tag: str, *, tools: int = 0) -> list[Message]:
    """A whole unit of messages: a user turn, or an assistant calling ``tools`` tools with their results."""
    if not tools:
        return [Message(role="user", content=f"question {tag} " * 3, id=f"u-{tag}")]
    calls = tuple(ToolCall(f"c-{tag}-{n}", "lookup", '{"q": 1}') for n in range(tools))
    out = [Message(role="assistant", tool_calls=calls, id=f"a-{tag}")]
    out += [Message(role="tool", tool_call_id=c.id, content=f"result {c.id}", id=f"t-{c.id}") for c in calls]
    return out


class FailingSaves:
    """A store whose ``save_state`` fails (after ``after`` successes), and whose ``append`` can lose its reply."""

    def __init__(self, inner: Any, *, after: int = 0) -> None:
        self.inner = inner
        self.saves_left = after
        self.lose_reply = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def save_state(self, *args: Any, **kwargs: Any) -> Any:
        if self.saves_left <= 0:
            raise StoreError("injected: the state save failed")
        self.saves_left -= 1
        return self.inner.save_state(*args, **kwargs)

    def append(self, *args: Any, **kwargs: Any) -> Any:
        seqs = self.inner.append(*args, **kwargs)
        if self.lose_reply:
            raise StoreError("injected: the append committed but its reply was lost")
        return seqs


def _valid(messages: list[Message]) -> None:
    """The history is a valid conversation: no tool result without its call, no call left open midway."""
    group_units([m for m in messages if m.role not in ("system", "developer")])


class WriteTests:
    """Tests of atomic, idempotent, many-writer writes; the suite class supplies the store helpers."""

    persistent: ClassVar[bool]

    def open_store(self, location: Path) -> Any:
        raise NotImplementedError

    def reopen(self, store: Any, location: Path) -> Any:
        raise NotImplementedError

    def _track(self, store: Any) -> Any:
        raise NotImplementedError

    def _second(self, store: Any, location: Path) -> Any:
        """Another store object over the same data (another process's view), or ``store`` if not persistent."""
        return self._track(self.open_store(location)) if self.persistent else store

    # -- the store contract ------------------------------------------------------------------
    def test_an_append_checks_the_writers_view_and_saves_its_state_with_it(self, store: Any) -> None:
        first = SessionState(stats={"config": {"max_tokens": 500}})
        assert store.append(
            AppendRequest("s", numbered(2), user_id="u", expected_seq=0, expected_version=0, state=first)
        ) == [0, 1]
        loaded = store.load("s", user_id="u")
        assert (loaded.state, loaded.next_seq) == (replace(first, version=1), 2)
        for seq, version in ((0, 1), (2, 0), (3, 1)):
            with pytest.raises(StaleSessionError):
                store.append(
                    AppendRequest("s", numbered(1, start=2), user_id="u", expected_seq=seq, expected_version=version)
                )
        assert store.get_session("s", user_id="u").message_count == 2  # a stale writer wrote nothing
        second = SessionState(window_start=1, stats={"n": 2})
        assert store.append(
            AppendRequest("s", numbered(1, start=2), user_id="u", expected_seq=2, expected_version=1, state=second)
        ) == [2]
        assert store.append(
            AppendRequest("s", numbered(1, start=3), user_id="u", expected_seq=3, expected_version=2)
        ) == [3]
        assert store.load("s", user_id="u").state == replace(second, version=2)  # no state: left as it was
        with pytest.raises(StaleSessionError):
            store.save_state("s", second, expected_version=1, user_id="u")
        with pytest.raises(StaleSessionError):
            store.delete_messages("s", [3], user_id="u", expected_seq=3)
        store.delete_messages("s", [3], user_id="u", expected_seq=4)
        assert [r.seq for r in store.messages("s", user_id="u")] == [0, 1, 2]
        assert store.load("s", user_id="u").next_seq in (None, 4)  # seqs keep moving forward

    def test_an_append_expecting_messages_of_a_vanished_session_says_it_was_lost(self, store: Any) -> None:
        with pytest.raises(SessionLostError, match=r"lost session 'gone'"):
            store.append(AppendRequest("gone", numbered(1), user_id="u", expected_seq=4, expected_version=2))
        with pytest.raises(SessionNotFoundError):
            store.get_session("gone", user_id="u")  # never re-created silently
        assert store.append(AppendRequest("gone", numbered(2), user_id="u", expected_seq=0, expected_version=0)) == [
            0,
            1,
        ]
        if isinstance(store, SessionStore):
            store.delete_session("gone", user_id="u")
            with pytest.raises(SessionLostError):
                store.append(
                    AppendRequest("gone", numbered(1, start=2), user_id="u", expected_seq=2, expected_version=0)
                )
            with pytest.raises(SessionNotFoundError):
                store.get_session("gone", user_id="u")

    def test_a_batch_stored_already_is_a_retry_and_other_content_a_conflict(self, store: Any) -> None:
        batch = numbered(3)
        assert store.append(AppendRequest("s", batch, user_id="u", expected_seq=0, expected_version=0)) == [0, 1, 2]
        stamped = [(replace(m, created_at=None), t) for m, t in batch]  # a retry may stamp created_at anew
        with pytest.raises(StaleSessionError):  # the view is checked first: the writer catches up, then retries
            store.append(AppendRequest("s", stamped, user_id="u", expected_seq=0, expected_version=0))
        assert store.append(AppendRequest("s", stamped, user_id="u", expected_seq=3, expected_version=0)) == [0, 1, 2]
        assert store.append(AppendRequest("s", stamped[1:2], user_id="u")) == [1]
        changed = [(replace(batch[2][0], content="other"), 5)]
        with pytest.raises(ConflictError, match="'m2'") as info:
            store.append(AppendRequest("s", changed, user_id="u", expected_seq=3, expected_version=0))
        assert not isinstance(info.value, StaleSessionError)
        with pytest.raises(ConflictError, match="'m0'"):
            store.append(AppendRequest("s", [batch[0], *numbered(1, start=3)], user_id="u"))
        rows = list(store.messages("s", user_id="u"))
        assert [(r.seq, r.message) for r in rows] == [(i, m) for i, (m, _) in enumerate(batch)]

    def test_one_user_learns_nothing_about_another_users_ids_or_sessions(self, store: Any) -> None:
        secret = [(Message(role="user", content="ship order 1234", id="order-1234"), 6)]
        store.append(AppendRequest("alice-chat", secret, user_id="alice"))
        mine = [(Message(role="user", content="where is my parcel", id="order-1234"), 7)]
        errors: list[str] = []
        for user in ("bob", None):
            # Bob's own session of the same name, with the same message id: his, and no error at all.
            assert store.append(
                AppendRequest("alice-chat", mine, user_id=user, expected_seq=0, expected_version=0)
            ) == [0]
            assert store.append(AppendRequest("other", mine, user_id=user)) == [0]
            with pytest.raises(ConflictError) as info:  # his own id, with other content
                store.append(AppendRequest("other", secret, user_id=user))
            errors.append(str(info.value))
            assert store.get_session("alice-c", user_id=user).id == "alice-chat"
            assert store.load("alice-chat", user_id=user).window[0].message.content == "where is my parcel"
        assert [r.message.content for r in store.messages("alice-chat", user_id="alice")] == ["ship order 1234"]
        assert store.get_session("alice-chat", user_id="alice").message_count == 1
        for text in errors:
            assert "alice" not in text
            assert "ship order" not in text
        if isinstance(store, SessionStore):
            assert [i.id for i in store.list_sessions(user_id="alice")] == ["alice-chat"]
            export = store.export_jsonl("alice-chat", user_id="alice")
            assert store.import_jsonl(export, user_id="carol").id == "alice-chat"  # carol's namespace is free
            with pytest.raises(StoreError, match="taken"):
                store.import_jsonl(export, user_id="bob")  # bob's own session of that name
            assert [r.message.content for r in store.messages("alice-chat", user_id="bob")] == ["where is my parcel"]

    # -- through Memory ----------------------------------------------------------------------
    def test_a_session_reopens_with_the_options_it_was_created_with(self, store: Any) -> None:
        plain = Memory(store=store, user_id="u", max_tokens=300)
        plain.add({"role": "user", "content": "hello"})
        assert Memory.open(plain.session_id, store=store, user_id="u").budget == 300
        made = Memory("gpt-4o", store=store, user_id="u", strategy=SlidingWindow(3), max_output_tokens=1024)
        made.add({"role": "user", "content": "hello"})
        reopened = Memory.open(made.session_id, store=store, user_id="u")
        assert (reopened.budget, reopened.reserved_output) == (made.budget, 1024)
        assert (reopened.strategy.name, getattr(reopened.strategy, "max_messages", None)) == ("sliding_window", 3)
        # Options given to open are this memory's; the session keeps its own, whoever saves its state later.
        other = Memory.open(
            made.session_id, store=store, user_id="u", strategy="sliding_window", strategy_options={"max_messages": 5}
        )
        for n in range(40):
            other.add_many(turn(f"o{n}"))
        assert other.stats().archived > 0  # it evicted, so it saved the state
        again = Memory.open(made.session_id, store=store, user_id="u")
        assert (again.budget, again.reserved_output, getattr(again.strategy, "max_messages", None)) == (
            made.budget,
            1024,
            3,
        )

    def test_eight_threads_share_one_memory(self, store: Any, tmp_path: Path) -> None:
        memory = Memory(store=store, user_id="u", max_tokens=400, strategy="token_budget")
        memory.add({"role": "system", "content": "Be brief."})
        errors: list[BaseException] = []

        def work(worker: int) -> None:
            try:
                for n in range(6):
                    memory.add_many(turn(f"{worker}.{n}", tools=n % 3))
                    memory.context()
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        stored = memory.messages()
        expected = 1 + sum(len(turn(f"{w}.{n}", tools=n % 3)) for w in range(8) for n in range(6))
        assert len(stored) == len({m.id for m in stored}) == expected
        _valid(stored)
        reopened = Memory.open(memory.session_id, store=self.reopen(store, tmp_path), user_id="u")
        assert reopened.context().messages == memory.context().messages

    def test_two_memories_on_one_session_converge_and_keep_tool_calls_whole(self, store: Any, tmp_path: Path) -> None:
        a = Memory(store=store, user_id="u", max_tokens=2_000, session_id="shared")
        b = Memory(store=self._second(store, tmp_path), user_id="u", max_tokens=2_000, session_id="shared")
        a.add_many(turn("a1"))
        b.add_many(turn("b1"))  # b had not seen a's message: it catches up, then appends after it
        a.add_many(turn("a2", tools=1)[:1])  # a calls a tool...
        with pytest.raises(InvalidMessageError, match="unanswered"):
            b.add_many(turn("b2"))  # ...and nothing may land between the call and its result
        a.add_many(turn("a2", tools=1)[1:])
        b.add_many(turn("b2"))
        b.add_many(turn("b3", tools=2)[:1])  # b calls tools and "crashes"
        with pytest.raises(InvalidMessageError, match="repair"):
            a.add_many(turn("a3"))  # a caught up and sees the open calls: it may repair them
        assert [m.tool_call_id for m in a.repair()] == ["c-b3-0", "c-b3-1"]
        a.add_many(turn("a3"))
        b.refresh()
        history = a.messages()
        _valid(history)
        assert [m.id for m in history][:4] == ["u-a1", "u-b1", "a-a2", "t-c-a2-0"]
        assert a.context().messages == b.context().messages
        assert a.stats() == b.stats()
        fresh = Memory.open("shared", store=self.reopen(store, tmp_path), user_id="u")
        assert fresh.context().messages == a.context().messages

    def test_a_failed_state_save_after_the_append_leaves_nothing_inconsistent(self, store: Any, tmp_path: Path) -> None:
        options: dict[str, Any] = {
            "max_tokens": 300,
            "strategy": "summary_buffer",
            "summarizer": EchoSummarizer(),
            "strategy_options": {"max_tokens": 150, "keep_recent_tokens": 60},
        }
        faulty = FailingSaves(store, after=1)
        memory = Memory(store=faulty, user_id="u", session_id="f", **options)
        acknowledged: list[str] = []
        for n in range(24):
            for message in memory.add_many(turn(f"{n}", tools=n % 2)):
                acknowledged.append(message.id or "")
        assert faulty.saves_left == 0
        assert any("state after an eviction failed" in w for w in memory.stats().warnings)
        faulty.lose_reply = True
        with pytest.raises(StoreError, match="reply was lost"):
            memory.add_many(turn("lost"))
        faulty.lose_reply = False
        assert [m.id for m in memory.add_many(turn("lost"))] == ["u-lost"]  # the retry stores nothing
        acknowledged.append("u-lost")
        store = self.reopen(store, tmp_path)
        reopened = Memory.open("f", store=store, user_id="u", **options)
        live = memory.context()
        again = reopened.context()
        assert (again.messages, again.window) == (live.messages, live.window)
        ids = [m.id for m in reopened.messages()]
        assert ids == acknowledged  # every acknowledged message, once, in order
        reopened.add_many(turn("after"))  # and the session goes on, folding what stayed queued
        assert reopened.stats().summaries >= 1
        _valid(reopened.messages())

    def test_a_summary_whose_state_another_writer_replaced_meanwhile_is_dropped(
        self, store: Any, tmp_path: Path
    ) -> None:
        class Meanwhile(EchoSummarizer):
            """While this memory summarizes (the slow part), another writer saves the session's state."""

            def summarize(self, previous: str | None, messages: Any, max_tokens: int) -> str:
                other.refresh()
                other.record_usage({"prompt_tokens": 5, "completion_tokens": 1})
                return super().summarize(previous, messages, max_tokens)

        options: dict[str, Any] = {
            "max_tokens": 300,
            "strategy": "summary_buffer",
            "strategy_options": {"max_tokens": 150, "keep_recent_tokens": 60},
        }
        second = self._second(store, tmp_path)
        other = Memory(store=second, user_id="u", session_id="c", summarizer=EchoSummarizer(), **options)
        memory = Memory(store=store, user_id="u", session_id="c", summarizer=Meanwhile(), **options)
        for n in range(60):  # until a summary's state save lost to the other writer
            memory.add_many(turn(str(n)))
            if memory.stats().input_tokens:
                break
        # The losing memory took the stored state (the other writer's usage, its own archived units queued).
        assert memory.stats().input_tokens == 5
        assert memory.stats().summaries == 0
        reopened = Memory.open("c", store=self.reopen(store, tmp_path), user_id="u", summarizer=EchoSummarizer())
        assert reopened.context().messages == memory.context().messages
        assert reopened.stats().input_tokens == 5

    def test_a_retry_after_a_lost_reply_stores_nothing_twice(self, store: Any) -> None:
        faulty = FailingSaves(store, after=10**6)
        memory = Memory(store=faulty, user_id="u", session_id="r", max_tokens=2_000)
        call, *results = turn("x", tools=1)
        memory.add_many([call])
        faulty.lose_reply = True
        with pytest.raises(StoreError, match="reply was lost"):
            memory.add_many(results)  # stored, but the memory cannot know: it is as before the add
        assert memory.pending_tool_calls == ["c-x-0"]
        faulty.lose_reply = False
        assert [m.id for m in memory.add_many(results)] == ["t-c-x-0"]  # a retry: answered by itself
        assert memory.pending_tool_calls == []
        memory.add_many(turn("y"))
        assert [m.id for m in memory.messages()] == ["a-x", "t-c-x-0", "u-y"]

    def test_a_memory_whose_session_vanished_says_so_and_never_recreates_it(self, store: Any) -> None:
        if not isinstance(store, SessionStore):
            pytest.skip("needs delete_session to make a session vanish")
        memory = Memory(store=store, user_id="u", max_tokens=500, session_id="v")
        memory.add_many(turn("1"))
        store.delete_session("v", user_id="u")  # what a Redis restarted without persistence does to it
        for call in (lambda: memory.add_many(turn("2")), memory.refresh, memory.messages):
            with pytest.raises(SessionLostError, match="'v'"):
                call()
        with pytest.raises(SessionNotFoundError):
            store.get_session("v", user_id="u")
