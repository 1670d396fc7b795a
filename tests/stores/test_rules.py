"""The rules every backend calls (stores/_writes.py) and the record every backend decodes into (stores/_record.py)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convmem.errors import ConfigurationError, SessionLostError, SessionNotFoundError, StaleSessionError, StoreError
from convmem.session import SessionState
from convmem.stores._record import SessionRecord, from_columns, scoped, segments, unscoped
from convmem.stores._writes import admit, check_fork, fork_home, fork_record, unfolded_span, written_state
from convmem.stores.base import AppendRequest
from convmem.testing import numbered

WHEN = datetime(2024, 5, 1, tzinfo=timezone.utc)
views = st.none() | st.tuples(st.integers(0, 3), st.integers(0, 3))
expected = st.none() | st.integers(0, 3)


@given(views, expected, expected, st.booleans())
def test_admit_refuses_exactly_a_lost_a_stale_or_a_hidden_session(
    found: tuple[int, int] | None, seq: int | None, version: int | None, deleted: bool
) -> None:
    request = AppendRequest("s", numbered(1), expected_seq=seq, expected_version=version)
    view = None if deleted else found
    if view is None and (seq or version):
        outcome: type[Exception] | None = SessionLostError
    elif view is not None and ((seq is not None and seq != view[0]) or (version is not None and version != view[1])):
        outcome = StaleSessionError
    elif deleted:
        outcome = SessionNotFoundError
    else:
        outcome = None
    if outcome is None:
        admit(request, view, deleted=deleted)
    else:
        with pytest.raises(outcome):
            admit(request, view, deleted=deleted)


def test_a_state_is_written_with_the_next_version_and_needs_the_writers_version() -> None:
    state = SessionState(window_start=2, stats={"messages": 3})
    saved = written_state(AppendRequest("s", numbered(1), expected_version=4, state=state))
    assert saved is not None
    assert (saved.window_start, saved.version, dict(saved.stats)) == (2, 5, {"messages": 3})
    assert written_state(AppendRequest("s", numbered(1))) is None
    with pytest.raises(ConfigurationError, match="expected_version"):
        written_state(AppendRequest("s", numbered(1), state=state))


# A fork chain, nearest first: each session branched from the next one at a seq below the next one's own.
@st.composite
def chains(draw: st.DrawFn) -> list[tuple[str, int | None]]:
    depth = draw(st.integers(1, 4))
    points = sorted(draw(st.lists(st.integers(0, 30), min_size=depth - 1, max_size=depth - 1, unique=True)))
    forks: list[int | None] = [*reversed(points), None]
    return [(f"s{i}", f) for i, f in enumerate(forks)]


@given(chains(), st.integers(0, 40))
def test_a_fork_hangs_from_the_session_where_its_shared_history_lives(
    chain: list[tuple[str, int | None]], at_seq: int
) -> None:
    home = fork_home(chain, at_seq)
    seen = [(s.session_id, s.clip(0, at_seq)) for s in segments(chain) if s.clip(0, at_seq)]
    from_home = [(s.session_id, s.clip(0, at_seq)) for s in segments(chain[home:]) if s.clip(0, at_seq)]
    assert from_home == seen  # the fork reads the same rows through its home as through the source
    assert home == 0 or (chain[home - 1][1] is not None and at_seq <= (chain[home - 1][1] or 0))
    branched = chain[home][1]
    assert branched is None or at_seq > branched  # and no further: the home itself holds row at_seq


def test_a_fork_at_a_seq_the_session_lacks_is_refused_naming_the_range() -> None:
    check_fork("s", 3, 2)
    for at in (-1, 3):
        with pytest.raises(StoreError, match=r"cannot fork session 's' at seq .*from 0 to 2"):
            check_fork("s", 3, at)


def _row(metadata: str = "{}", state: str = "{}") -> tuple[object, ...]:
    key = scoped("alice", "s1")
    stamp = "2024-05-01T00:00:00.000000+00:00"
    return (
        key,
        "alice",
        "t",
        "gpt-4o",
        metadata,
        stamp,
        stamp,
        scoped("alice", "root"),
        4,
        5,
        50,
        2,
        20,
        7,
        state,
        3,
        0,
    )


def test_a_table_row_decodes_into_one_record_with_its_counters_and_scoped_keys() -> None:
    record = from_columns("sqlite", _row())
    assert (record.id, record.key, record.parent_id, record.parent_key) == (
        "s1",
        scoped("alice", "s1"),
        "root",
        scoped("alice", "root"),
    )
    info = record.info()
    assert (info.message_count, info.tokens, info.fork_seq, info.parent_id) == (7, 70, 4, "root")
    assert record.view() == (7, 3)
    assert record.state().version == 3
    assert unscoped(record.key) == "s1"


def test_a_damaged_record_is_listed_as_damaged_and_raises_when_read() -> None:
    record = from_columns("sqlite", _row(metadata="not json", state="{"))
    assert record.view() == (7, 3)  # the counters decode: an append can still be checked
    with pytest.raises(StoreError, match=r"sqlite: session 's1'.*corrupt"):
        record.info()
    with pytest.raises(StoreError, match="corrupt"):
        record.state()
    listed = record.listed()
    assert listed.damaged is not None
    assert "corrupt" in listed.damaged


def test_a_fork_record_starts_from_the_source_at_the_fork_point() -> None:
    source = SessionRecord("memory", "s", "s", "u", "t", "m", {"k": 1}, WHEN, WHEN, SessionState(stats={"messages": 9}))
    made = fork_record(source, 4, key="f", session_id="f", parent=("p", "p"), shared=(5, 50), when=WHEN)
    info = made.info()
    assert (info.id, info.parent_id, info.fork_seq, info.message_count, info.tokens) == ("f", "p", 4, 5, 50)
    assert (made.next_seq, made.version, made.state().stats["messages"]) == (5, 0, 5)
    assert (info.title, info.model, dict(info.metadata)) == ("t", "m", {"k": 1})


def test_the_unfolded_tail_is_read_only_when_asked_for_and_there_is_one() -> None:
    assert unfolded_span(SessionState(window_start=5, folded_to=1), 3) == (2, 4)
    assert unfolded_span(SessionState(window_start=5, folded_to=1), 0) is None
    assert unfolded_span(SessionState(window_start=2, folded_to=1), 3) is None
