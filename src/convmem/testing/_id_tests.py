"""Conformance tests of the one id rule (:func:`convmem.limits.check_id`): every backend refuses the same ids.

Every store method that takes a session or a user id refuses one that breaks the rule with an
:class:`~convmem.errors.InvalidIdError` before it reads or writes anything, and every id the rule
accepts round-trips: written, found, listed and exported exactly as it was given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..errors import InvalidIdError
from ..limits import MAX_ID_BYTES, check_id
from ..memory import Memory
from ..stores.base import AppendRequest
from ._data import numbered

__all__ = ["IdTests"]

#: Ids no backend may take as session ids, each for another reason of the rule.
BAD_SESSION_IDS = (
    "",
    "a\ud83db",  # a lone surrogate (UTF-8 cannot store it)
    "a\x00b",
    "a\nb",
    "a/b",
    "a\\b",
    ".",
    "..",
    ".hidden",
    "x" * (MAX_ID_BYTES + 1),
    "é" * (MAX_ID_BYTES // 2 + 1),  # few characters, too many bytes
)
BAD_USER_IDS = ("", "a\ud83db", "a\x00b", "a\tb", "u" * (MAX_ID_BYTES + 1))

# Text with every kind of character, surrogates and controls included, and the separators often.
_any_text = st.text(
    st.characters(blacklist_categories=()) | st.sampled_from("/\\.:\x00 é"), min_size=0, max_size=12
) | st.sampled_from(["x" * MAX_ID_BYTES, "é" * (MAX_ID_BYTES // 2), ".."])


class IdTests:
    """Mixed into :class:`~convmem.testing.StoreConformance`; uses its ``store`` fixture."""

    def test_every_method_refuses_an_id_outside_the_rule_before_touching_anything(self, store: Any) -> None:
        store.append(AppendRequest("kept", numbered(2), user_id="u"))
        calls: dict[str, Callable[[str, str], object]] = {
            "append": lambda sid, uid: store.append(AppendRequest(sid, numbered(1), user_id=uid)),
            "load": lambda sid, uid: store.load(sid, user_id=uid),
            "get_session": lambda sid, uid: store.get_session(sid, user_id=uid),
            "messages": lambda sid, uid: list(store.messages(sid, user_id=uid)),
            "delete_session": lambda sid, uid: store.delete_session(sid, user_id=uid),
            "fork": lambda sid, uid: store.fork(sid, 0, user_id=uid),
            "export_jsonl": lambda sid, uid: store.export_jsonl(sid, user_id=uid),
        }
        for name, call in calls.items():
            for bad in BAD_SESSION_IDS:
                with pytest.raises(InvalidIdError) as info:
                    call(bad, "u")
                assert info.value.field == "session_id", name
                assert len(str(info.value)) < 200  # the id is not repeated: it may be huge
            for bad_user in BAD_USER_IDS:
                with pytest.raises(InvalidIdError) as info:
                    call("kept", bad_user)
                assert info.value.field == "user_id", name
        for bad_user in BAD_USER_IDS:
            with pytest.raises(InvalidIdError):
                store.list_sessions(user_id=bad_user)
        assert [i.id for i in store.list_sessions(user_id="u")] == ["kept"]
        assert [m.message.id for m in store.messages("kept", user_id="u")] == ["m0", "m1"]

    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors],
    )
    @given(session_id=_any_text, user_id=st.none() | _any_text)
    def test_any_id_is_either_refused_by_name_or_kept_exactly(
        self, store: Any, session_id: str, user_id: str | None
    ) -> None:
        try:
            check_id(session_id, "session_id")
            if user_id is not None:
                check_id(user_id, "user_id", session=False)
        except InvalidIdError:
            with pytest.raises(InvalidIdError):
                store.append(AppendRequest(session_id, numbered(1), user_id=user_id))
            return
        store.append(AppendRequest(session_id, numbered(1), user_id=user_id))
        assert store.get_session(session_id, user_id=user_id).id == session_id
        assert session_id in [i.id for i in store.list_sessions(user_id=user_id)]
        exported = store.export_jsonl(session_id, user_id=user_id)
        store.delete_session(session_id, user_id=user_id)
        assert store.import_jsonl(exported, user_id=user_id).id == session_id
        store.delete_session(session_id, user_id=user_id)

    def test_a_memory_refuses_an_empty_or_bad_id_instead_of_making_one_up(self, store: Any) -> None:
        for bad in ("", "a/b", "a\x00"):
            with pytest.raises(InvalidIdError):
                Memory(max_tokens=500, store=store, session_id=bad)
        with pytest.raises(InvalidIdError):
            Memory(max_tokens=500, store=store, user_id="")
        assert store.list_sessions() == []
