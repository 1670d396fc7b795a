"""The store conformance suite: every backend runs these tests.

Subclass :class:`StoreConformance` in a test module, name the subclass
``Test...`` and say how to build the store; pytest collects the whole suite.
Capabilities are detected: tests of session management are skipped for a
backend that implements only :class:`~convmem.stores.base.Store`, the
archive-read check uses the store's ``rows_read`` counter if it has one, and
persistence is checked by reopening whenever ``persistent`` is true. Long-term
memory (``store.facts()``, ``store.blocks()``, ``store.recall()``) is checked
when the store keeps it; override ``per_kind`` to compare it with the
backend's own classes, and set ``releases_connection`` when closing the store
closes what they use.

Example (``tests/stores/test_sqlite_store.py``)::

    from convmem.stores import SQLiteStore
    from convmem.testing import StoreConformance

    class TestSQLiteStore(StoreConformance):
        def make_store(self, location):
            return SQLiteStore(location / "convmem.db")
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings

from ..errors import (
    AmbiguousSessionError,
    ConflictError,
    ContextOverflowError,
    InvalidIdError,
    InvalidMessageError,
    SessionNotFoundError,
)
from ..memory import Memory
from ..messages import Message
from ..session import SessionState, SummaryRecord, status_of
from ..stores.base import AppendRequest, SessionStore, Store
from ._data import conversations, numbered, rich_messages
from ._id_tests import IdTests
from ._import_tests import ImportTests
from ._longterm_tests import LongTermTests
from ._session_tests import SessionTests
from ._write_tests import WriteTests

# Examples of the resume property per backend; a quick local loop may lower it (CONVMEM_QUICK=1 gives 3).
RESUME_EXAMPLES = 3 if os.environ.get("CONVMEM_QUICK") == "1" else 25

__all__ = ["StoreConformance"]


class StoreConformance(WriteTests, SessionTests, LongTermTests, ImportTests, IdTests):
    """The suite. Override :meth:`make_store`; set ``persistent = False`` for a store that lives in memory."""

    persistent: ClassVar[bool] = True

    def make_store(self, location: Path) -> Any:
        """A store over ``location`` (an empty directory the first time; the same one to reopen)."""
        raise NotImplementedError

    def open_store(self, location: Path) -> Any:
        """The store the sync tests drive (the async suite wraps ``make_store`` here)."""
        return self.make_store(location)

    def _track(self, store: Any) -> Any:
        self.__dict__.setdefault("_opened", []).append(store)
        return store

    def reopen(self, store: Any, location: Path) -> Any:
        """Close ``store`` and open it again over the same location (the same object if not persistent)."""
        if not self.persistent:
            return store
        store.close()
        return self._track(self.open_store(location))

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[Any]:
        yield self._track(self.open_store(tmp_path))
        for opened in self.__dict__.pop("_opened", []):
            opened.close()  # closing twice is harmless; a store reopened by a test is closed here too

    # -- append, seq, read -----------------------------------------------------------------
    def test_the_store_implements_the_protocol(self, store: Any) -> None:
        assert isinstance(store, Store)

    def test_append_creates_the_session_and_assigns_consecutive_seqs(self, store: Any) -> None:
        assert store.append(AppendRequest("s1", [], user_id="u")) == []
        with pytest.raises(SessionNotFoundError):
            store.get_session("s1", user_id="u")  # created by its first message, not by an empty batch
        assert store.append(AppendRequest("s1", numbered(3), user_id="u", model="gpt-4o")) == [0, 1, 2]
        assert store.append(AppendRequest("s1", numbered(2, start=3), user_id="u")) == [3, 4]
        info = store.get_session("s1", user_id="u")
        assert (info.id, info.user_id, info.model, info.message_count) == ("s1", "u", "gpt-4o", 5)
        assert info.tokens == sum(t for _, t in numbered(5))
        assert info.created_at.tzinfo is not None
        assert info.updated_at >= info.created_at
        rows = list(store.messages("s1", user_id="u"))
        assert [(r.seq, r.message, r.tokens) for r in rows] == [(i, m, t) for i, (m, t) in enumerate(numbered(5))]
        assert [r.seq for r in store.messages("s1", user_id="u", from_seq=1, to_seq=3)] == [1, 2, 3]

    def test_every_field_of_a_message_survives(self, store: Any, tmp_path: Path) -> None:
        batch = rich_messages()
        store.append(AppendRequest("s", batch, user_id=None))
        store = self.reopen(store, tmp_path)
        assert [r.message for r in store.messages("s")] == [m for m, _ in batch]
        assert [r.message.created_at for r in store.messages("s")] == [m.created_at for m, _ in batch]
        assert store.append(AppendRequest("s", batch[3:4])) == [
            3
        ]  # ids are still known after reopening: a retry stores nothing
        with pytest.raises(ConflictError, match=repr(batch[3][0].id)):
            store.append(AppendRequest("s", [(replace(batch[3][0], metadata={"other": True}), batch[3][1])]))
        assert len(list(store.messages("s"))) == len(batch)

    def test_a_duplicate_or_missing_message_id_writes_nothing(self, store: Any) -> None:
        store.append(AppendRequest("s", numbered(2), user_id="u"))
        with pytest.raises(ConflictError, match="'m1'"):  # a stored id in a batch of new ones
            store.append(AppendRequest("s", [*numbered(1, start=5), *numbered(1, start=1)], user_id="u"))
        with pytest.raises(InvalidMessageError) as info:
            store.append(AppendRequest("s", [*numbered(1, start=7), *numbered(1, start=7)], user_id="u"))
        assert (info.value.field, info.value.index) == ("id", 1)
        with pytest.raises(InvalidMessageError, match="id"):
            store.append(AppendRequest("s", [(Message(role="user", content="x"), 1)], user_id="u"))
        with pytest.raises(InvalidMessageError, match="token"):
            store.append(AppendRequest("s", [(numbered(1, start=9)[0][0], -1)], user_id="u"))
        assert [r.seq for r in store.messages("s", user_id="u")] == [0, 1]
        assert store.append(AppendRequest("s", numbered(1, start=2), user_id="u")) == [2]

    def test_an_unknown_session_is_not_found_with_its_id(self, store: Any) -> None:
        for call in (
            lambda: store.get_session("nope"),
            lambda: store.load("nope"),
            lambda: list(store.messages("nope")),
            lambda: store.delete_messages("nope", [0]),
            lambda: store.save_state("nope", SessionState(), expected_version=0),
        ):
            with pytest.raises(SessionNotFoundError, match="nope") as info:
                call()
            assert isinstance(info.value, KeyError)

    # -- users and ids ---------------------------------------------------------------------
    def test_users_never_see_each_other(self, store: Any) -> None:
        store.append(AppendRequest("alice-1", numbered(3), user_id="alice"))
        for user in ("bob", None):
            with pytest.raises(SessionNotFoundError):
                store.get_session("alice-1", user_id=user)
            with pytest.raises(SessionNotFoundError):
                store.get_session("ali", user_id=user)
            with pytest.raises(SessionNotFoundError):
                store.load("alice-1", user_id=user)
            with pytest.raises(SessionNotFoundError):
                list(store.messages("alice-1", user_id=user))
            with pytest.raises(SessionNotFoundError):
                store.save_state("alice-1", SessionState(), expected_version=0, user_id=user)
            with pytest.raises(SessionNotFoundError):
                store.delete_messages("alice-1", [0], user_id=user)
        assert store.get_session("alice-1", user_id="alice").message_count == 3
        if isinstance(store, SessionStore):
            assert store.list_sessions(user_id="bob") == []
            for call in (
                lambda: store.delete_session("alice-1", user_id="bob"),
                lambda: store.fork("alice-1", 0, user_id="bob"),
                lambda: store.update_session("alice-1", user_id="bob", title="x"),
                lambda: store.export_jsonl("alice-1", user_id="bob"),
            ):
                with pytest.raises(SessionNotFoundError):
                    call()
            assert store.expire(timedelta(0), user_id="bob") == []
            assert [i.id for i in store.list_sessions(user_id="alice")] == ["alice-1"]

    def test_a_unique_prefix_opens_and_an_ambiguous_one_lists_the_matches(self, store: Any) -> None:
        for session_id in ("abc1", "abc2", "xyz", "ab"):
            store.append(AppendRequest(session_id, numbered(1, prefix=session_id), user_id="u"))
        assert store.get_session("x", user_id="u").id == "xyz"
        assert store.get_session("ab", user_id="u").id == "ab"  # an exact id wins over longer ones
        assert store.load("abc2", user_id="u").info.id == "abc2"
        with pytest.raises(AmbiguousSessionError) as info:
            store.get_session("abc", user_id="u")
        assert info.value.matches == ("abc1", "abc2")
        assert "abc1" in str(info.value)
        assert "abc2" in str(info.value)
        with pytest.raises(InvalidIdError):  # an empty prefix would match every session: not an id
            store.get_session("", user_id="u")

    # -- state and status ------------------------------------------------------------------
    def test_state_saves_are_versioned_and_a_stale_save_conflicts(self, store: Any, tmp_path: Path) -> None:
        store.append(AppendRequest("s", numbered(6), user_id="u"))
        summary = SummaryRecord("so far: hello", 0, 1, 7, datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=timezone.utc))
        wanted = SessionState(
            window_start=3,
            folded_to=1,
            pinned_start=0,
            summary=summary,
            stats={"messages": 6, "cost_usd": 0.25, "warnings": ["w"], "last_seq": 5},
        )
        saved = store.save_state("s", wanted, expected_version=0, user_id="u")
        assert saved == replace(wanted, version=1)
        with pytest.raises(ConflictError):
            store.save_state("s", wanted, expected_version=0, user_id="u")
        store = self.reopen(store, tmp_path)
        assert store.load("s", user_id="u").state == saved
        assert store.save_state("s", wanted, expected_version=1, user_id="u").version == 2

    def test_load_returns_the_pinned_messages_the_window_and_the_unfolded_tail(self, store: Any) -> None:
        batch = [
            numbered(1, prefix="sys", role="system")[0],
            *numbered(9, start=1),
            numbered(1, start=10, prefix="dev", role="developer")[0],
            *numbered(3, start=11),
        ]
        store.append(AppendRequest("s", batch, user_id="u"))
        state = SessionState(window_start=8, folded_to=3, pinned_start=0)
        store.save_state("s", state, expected_version=0, user_id="u")
        loaded = store.load("s", user_id="u", unfolded_limit=2)
        assert [r.seq for r in loaded.pinned] == [0, 10]
        assert [r.seq for r in loaded.window] == [8, 9, 11, 12, 13]
        assert [r.seq for r in loaded.unfolded] == [6, 7]
        statuses = [status_of(r, loaded.state) for r in store.messages("s", user_id="u")]
        assert statuses == [
            "pinned",
            *["summarized"] * 3,
            *["archived"] * 4,
            "active",
            "active",
            "pinned",
            *["active"] * 3,
        ]
        cleared = store.save_state("s", replace(state, pinned_start=5), expected_version=1, user_id="u")
        assert [r.seq for r in store.load("s", user_id="u").pinned] == [10]
        assert status_of(next(store.messages("s", user_id="u")), cleared) == "cleared"

    def test_load_does_not_read_the_archive(self, store: Any) -> None:
        store.append(AppendRequest("big", numbered(1, prefix="sys", role="system"), user_id="u"))
        for start in range(1, 2001, 500):
            store.append(AppendRequest("big", numbered(500, start=start), user_id="u"))
        store.save_state("big", SessionState(window_start=1995, folded_to=1994), expected_version=0, user_id="u")
        before = getattr(store, "rows_read", None)
        loaded = store.load("big", user_id="u", unfolded_limit=100)
        assert ([r.seq for r in loaded.pinned], [r.seq for r in loaded.window]) == ([0], list(range(1995, 2001)))
        assert loaded.info.message_count == 2001
        assert loaded.unfolded == []
        if before is not None:
            assert store.rows_read - before == 7

    def test_deleting_messages_keeps_seqs_moving_forward(self, store: Any) -> None:
        store.append(AppendRequest("s", numbered(4), user_id="u"))
        store.delete_messages("s", [2, 3, 99], user_id="u")
        assert [r.seq for r in store.messages("s", user_id="u")] == [0, 1]
        info = store.get_session("s", user_id="u")
        assert (info.message_count, info.tokens) == (2, sum(t for _, t in numbered(2)))
        assert store.append(AppendRequest("s", numbered(1, start=2), user_id="u")) == [
            4
        ]  # the deleted id is free again

    # -- through Memory --------------------------------------------------------------------
    # Each backend subclass runs this same method: differing executors are the point of a shared suite.
    @settings(
        max_examples=RESUME_EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
    )
    @given(conversations)
    def test_a_reopened_memory_gives_the_same_context(self, case: tuple[list[list[dict[str, Any]]], Any]) -> None:
        steps, options = case
        with tempfile.TemporaryDirectory() as tmp:
            location = Path(tmp)
            opened = [self.open_store(location)]
            try:
                memory = Memory(store=opened[0], user_id="u", **options)
                for step in steps:
                    memory.add_many(step)
                before, stats, history = _context(memory), memory.stats(), memory.messages()
                opened.append(self.reopen(opened[0], location))
                reopened = Memory.open(memory.session_id[:10], store=opened[-1], user_id="u", **options)
                assert _context(reopened) == before
                assert reopened.stats() == stats
                assert reopened.messages() == history
            finally:
                for store in opened:
                    store.close()


def _context(memory: Memory) -> Any:
    """What a resumed memory must reproduce: the context and its account, or the same overflow error."""
    try:
        ctx = memory.context()
    except ContextOverflowError as exc:
        return str(exc)
    return ctx.messages, ctx.account, ctx.left_out, ctx.window, ctx.truncated
