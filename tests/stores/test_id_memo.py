"""The stores' id rule keeps the pairs that passed it (``stores._writes.check_ids``): the memo admits nothing the
rule refuses, and stays bounded."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convmem.errors import InvalidIdError
from convmem.limits import check_id
from convmem.stores import _writes


def _rule_accepts(session_id: str, user_id: str | None) -> bool:
    try:
        check_id(session_id, "session_id")
        if user_id is not None:
            check_id(user_id, "user_id", session=False)
    except InvalidIdError:
        return False
    return True


@given(
    st.lists(
        st.tuples(
            st.text(max_size=8) | st.sampled_from(["s1", "a/b", ".x", "", "ok"]),
            st.none() | st.text(max_size=4),
        ),
        max_size=20,
    )
)
def test_the_memo_decides_as_the_rule_does_on_every_call(pairs: list[tuple[str, str | None]]) -> None:
    for session_id, user_id in pairs + pairs:  # each pair twice: the second time the memo may answer
        if _rule_accepts(session_id, user_id):
            _writes.check_ids(session_id, user_id)
        else:
            with pytest.raises(InvalidIdError):
                _writes.check_ids(session_id, user_id)


def test_a_str_subclass_is_checked_every_time_and_never_kept() -> None:
    class Odd(str):
        pass

    _writes.check_ids(Odd("kept-not"), None)
    assert ("kept-not", None) not in _writes._CHECKED  # equal to the subclass's value, so this asks for it too
    assert all(type(s) is str or s is None for s, _ in _writes._CHECKED)


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_writes, "_CHECKED", {})
    monkeypatch.setattr(_writes, "_CHECKED_MAX", 8)
    for i in range(30):
        _writes.check_ids(f"s{i}", "u")
        assert len(_writes._CHECKED) <= 8
    with pytest.raises(InvalidIdError):
        _writes.check_ids("a/b", "u")  # refused after the memo was cleared and refilled
    assert ("a/b", "u") not in _writes._CHECKED
