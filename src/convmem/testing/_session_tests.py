"""The session-management half of the conformance suite: list, update, delete, expire, fork, export, import.

:class:`SessionTests` is a base of :class:`~convmem.testing.StoreConformance`;
its tests skip for a backend that implements only
:class:`~convmem.stores.base.Store`.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from ..errors import (
    ConflictError,
    SessionNotFoundError,
    StoreError,
)
from ..session import SessionState, SummaryRecord
from ..stores.base import AppendRequest, SessionStore
from ._data import numbered, rich_messages

__all__ = ["SessionTests"]


class SessionTests:
    """Tests of :class:`~convmem.stores.base.SessionStore`; the suite class supplies ``reopen``."""

    def reopen(self, store: Any, location: Path) -> Any:
        raise NotImplementedError

    @staticmethod
    def sessions(store: Any) -> Any:
        if not isinstance(store, SessionStore):
            pytest.skip("the backend implements Store only, not SessionStore")
        return store

    # -- sessions --------------------------------------------------------------------------
    def test_sessions_are_listed_most_recent_first_with_counts(self, store: Any) -> None:
        store = self.sessions(store)
        for session_id in ("a", "b", "c"):
            store.append(AppendRequest(session_id, numbered(2, prefix=session_id), user_id="u"))
        store.append(AppendRequest("a", numbered(1, start=2, prefix="a"), user_id="u"))
        listed = store.list_sessions(user_id="u")
        assert [i.id for i in listed] == ["a", "c", "b"]
        assert [i.message_count for i in listed] == [3, 2, 2]
        assert listed[0].tokens == sum(t for _, t in numbered(3))
        assert [i.id for i in store.list_sessions(user_id="u", limit=2)] == ["a", "c"]
        store.update_session("b", user_id="u", title="Trip to Rome", metadata={"tags": ["travel"]})
        first = store.list_sessions(user_id="u")[0]
        assert (first.id, first.title, dict(first.metadata)) == ("b", "Trip to Rome", {"tags": ["travel"]})
        assert store.update_session("b", user_id="u", metadata={"k": 1}).title == "Trip to Rome"
        with pytest.raises(StoreError):
            store.update_session("b", user_id="u", metadata={"bad": object()})

    def test_delete_and_expire_remove_whole_sessions(self, store: Any) -> None:
        store = self.sessions(store)
        for session_id in ("old", "new"):
            store.append(AppendRequest(session_id, numbered(2, prefix=session_id), user_id="u"))
        store.append(AppendRequest("other-user", numbered(1, prefix="o"), user_id="v"))
        assert store.expire(timedelta(days=1), user_id="u") == []
        store.delete_session("ne", user_id="u")
        with pytest.raises(SessionNotFoundError):
            store.get_session("new", user_id="u")
        assert store.append(AppendRequest("new", numbered(2, prefix="new"), user_id="u")) == [
            0,
            1,
        ]  # ids and id are free
        assert store.expire(timedelta(0), user_id="u") == ["new", "old"]
        assert store.list_sessions(user_id="u") == []
        assert [i.id for i in store.list_sessions(user_id="v")] == ["other-user"]

    # -- forks -----------------------------------------------------------------------------
    def test_a_fork_shares_history_and_then_diverges(self, store: Any, tmp_path: Path) -> None:
        store = self.sessions(store)
        store.append(
            AppendRequest("root", [numbered(1, prefix="sys", role="system")[0], *numbered(9, start=1)], user_id="u")
        )
        fork = store.fork("ro", 4, user_id="u")
        assert (fork.parent_id, fork.fork_seq, fork.message_count) == ("root", 4, 5)
        assert fork.tokens == sum(t for _, t in numbered(5))
        assert store.append(AppendRequest(fork.id, numbered(2, prefix="f"), user_id="u")) == [5, 6]
        assert store.append(AppendRequest("root", numbered(1, start=10), user_id="u")) == [10]
        grand = store.fork(fork.id, 5, user_id="u")
        shallow = store.fork(fork.id, 2, user_id="u")
        store = self.reopen(store, tmp_path)
        for session_id, shared, seq in ((fork.id, "m3", 3), (grand.id, "f0", 5), (shallow.id, "m1", 1)):
            message, tokens = next(m for m in numbered(12) + numbered(2, prefix="f") if m[0].id == shared)
            assert store.append(AppendRequest(session_id, [(message, tokens)], user_id="u")) == [
                seq
            ]  # a retry: shared history
            with pytest.raises(ConflictError, match=repr(shared)):
                store.append(AppendRequest(session_id, [(replace(message, content="changed"), tokens)], user_id="u"))
        root_rows = list(store.messages("root", user_id="u"))
        assert [r.message.id for r in store.messages(fork.id, user_id="u")] == [r.message.id for r in root_rows[:5]] + [
            "f0",
            "f1",
        ]
        assert [r.seq for r in store.messages(grand.id, user_id="u")] == [0, 1, 2, 3, 4, 5]
        assert list(store.messages(shallow.id, user_id="u")) == root_rows[:3]
        assert store.get_session(fork.id, user_id="u").message_count == 7
        for bad in (-1, 11, 99):
            with pytest.raises(StoreError):
                store.fork("root", bad, user_id="u")
        with pytest.raises(StoreError, match="fork"):
            store.delete_messages("root", [4], user_id="u")
        with pytest.raises(StoreError):
            store.delete_messages(fork.id, [3], user_id="u")
        # Ids are unique per session: the fork may use an id its parent took after the fork point.
        assert store.append(AppendRequest(fork.id, numbered(1, start=10), user_id="u")) == [7]
        assert [r.message.id for r in store.messages(fork.id, user_id="u", from_seq=5)] == ["f0", "f1", "m10"]

    def test_a_fork_loads_even_when_its_window_starts_in_the_parent(self, store: Any) -> None:
        store = self.sessions(store)
        store.append(
            AppendRequest("p", [numbered(1, prefix="sys", role="system")[0], *numbered(19, start=1)], user_id="u")
        )
        summary = SummaryRecord("s", 1, 5, 3, datetime(2024, 1, 1, tzinfo=timezone.utc))
        stats = {"messages": 20, "last_seq": 19, "evicted_messages": 9, "summarized_messages": 5}
        store.save_state("p", SessionState(10, 5, 0, summary, stats), expected_version=0, user_id="u")
        late = store.fork("p", 14, user_id="u")
        loaded = store.load(late.id, user_id="u")
        assert [r.seq for r in loaded.window] == [10, 11, 12, 13, 14]
        assert [r.seq for r in loaded.pinned] == [0]
        assert loaded.state.summary == summary
        assert loaded.state.version == 0
        assert loaded.state.stats["messages"] == 15
        assert loaded.state.stats["last_seq"] == 14
        early = store.load(store.fork("p", 7, user_id="u").id, user_id="u")
        assert [r.seq for r in early.window] == [6, 7]
        assert early.state.summary == summary
        earliest = store.load(store.fork("p", 3, user_id="u").id, user_id="u")
        assert [r.seq for r in earliest.window] == [1, 2, 3]
        assert earliest.state.summary is None
        assert earliest.state.stats["evicted_messages"] == 0

    def test_deleting_a_parent_keeps_what_its_forks_share(self, store: Any, tmp_path: Path) -> None:
        store = self.sessions(store)
        store.append(AppendRequest("p", numbered(10), user_id="u"))
        fork = store.fork("p", 5, user_id="u")
        expected = list(store.messages(fork.id, user_id="u"))
        store.delete_session("p", user_id="u")
        store = self.reopen(store, tmp_path)
        assert [i.id for i in store.list_sessions(user_id="u")] == [fork.id]
        assert list(store.messages(fork.id, user_id="u")) == expected
        with pytest.raises(SessionNotFoundError):
            store.get_session("p", user_id="u")
        with pytest.raises(SessionNotFoundError):
            store.append(AppendRequest("p", numbered(1, prefix="z"), user_id="u"))
        store.delete_session(fork.id, user_id="u")
        assert store.list_sessions(user_id="u") == []
        assert store.append(AppendRequest("p", numbered(3), user_id="u")) == [0, 1, 2]  # everything is gone now

    # -- export / import -------------------------------------------------------------------
    def test_export_import_export_is_byte_for_byte(self, store: Any, tmp_path: Path) -> None:
        store = self.sessions(store)
        store.append(AppendRequest("s", [*rich_messages(), *numbered(3)], user_id="u", model="gpt-4o"))
        store.update_session("s", user_id="u", title="Zürich ☀", metadata={"a": [1, {"b": None}]})
        summary = SummaryRecord("sum", 1, 2, 3, datetime(2024, 1, 1, tzinfo=timezone.utc))
        # the window starts at a unit (seq 4, the reply after the tool loop), as an import requires
        store.save_state("s", SessionState(4, 2, 0, summary, {"x": 1.5}), expected_version=0, user_id="u")
        store.delete_messages("s", [8], user_id="u")
        first = store.export_jsonl("s", user_id="u")
        assert first.endswith(b"\n")
        assert len(first.split(b"\n")) == 1 + 8 + 1
        store.delete_session("s", user_id="u")
        info = store.import_jsonl(first.decode(), user_id="w")
        assert (info.id, info.user_id, info.title, info.message_count) == ("s", "w", "Zürich ☀", 8)
        store = self.reopen(store, tmp_path)
        assert store.export_jsonl("s", user_id="w") == first
        assert store.append(AppendRequest("s", numbered(1, prefix="n"), user_id="w")) == [9]
        fork = store.fork("s", 3, user_id="w")
        alone = store.export_jsonl(fork.id, user_id="w")
        store.delete_session("s", user_id="w")
        store.delete_session(fork.id, user_id="w")
        store.import_jsonl(alone, user_id="w")
        assert store.export_jsonl(fork.id, user_id="w") == alone

    def test_a_malformed_import_names_the_line_and_imports_nothing(self, store: Any) -> None:
        store = self.sessions(store)
        store.append(AppendRequest("s", numbered(4), user_id="u"))
        good = store.export_jsonl("s", user_id="u")
        store.delete_session("s", user_id="u")
        lines = good.split(b"\n")
        cases = {
            3: b"\n".join([*lines[:2], b'{"seq": 1, "tokens": ', *lines[3:]]),
            4: b"\n".join([*lines[:3], lines[3].replace(b'"role":"user"', b'"role":"robot"'), *lines[4:]]),
            1: b"\n".join([lines[0].replace(b'"version":1', b'"version":99'), *lines[1:]]),
            5: b"\n".join(lines[:4]) + b"\n",  # truncated: the header announced 4 messages
        }
        for number, data in cases.items():
            with pytest.raises(StoreError, match=f"line {number}\\b"):
                store.import_jsonl(data, user_id="u")
            with pytest.raises(SessionNotFoundError):
                store.get_session("s", user_id="u")
        with pytest.raises(StoreError):
            store.import_jsonl(b"", user_id="u")
        store.import_jsonl(good, user_id="u")
        with pytest.raises(StoreError, match="taken"):
            store.import_jsonl(good, user_id="u")
