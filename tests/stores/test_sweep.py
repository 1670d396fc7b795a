"""Retention sweeps: which sessions go (a property test of the rule), and a sweep on real stores."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem.errors import ConfigurationError
from convmem.messages import Message
from convmem.session import SessionInfo
from convmem.stores._sweep import Retention, doomed, sweep
from convmem.stores.base import AppendRequest

from ._backends import backend

AT = datetime(2025, 6, 1, tzinfo=timezone.utc)


@st.composite
def forests(draw: st.DrawFn) -> list[SessionInfo]:
    n = draw(st.integers(0, 12))
    out: list[SessionInfo] = []
    for i in range(n):
        parent = draw(st.none() | st.integers(0, i - 1)) if i else None
        age = draw(st.integers(0, 60))
        out.append(
            SessionInfo(
                id=f"s{i}",
                user_id="u",
                title=None,
                model=None,
                created_at=AT - timedelta(days=age),
                updated_at=AT - timedelta(days=age),
                message_count=1,
                tokens=1,
                metadata={},
                parent_id=None if parent is None else f"s{parent}",
            )
        )
    return out


@settings(max_examples=300, deadline=None)
@given(forests(), st.none() | st.integers(1, 40), st.none() | st.integers(0, 8))
def test_a_sweep_takes_exactly_what_the_policy_forbids_and_no_kept_fork_loses_its_history(
    sessions: list[SessionInfo], days: int | None, keep: int | None
) -> None:
    policy = Retention(None if days is None else timedelta(days=days), keep)
    gone = set(doomed(sessions, policy, AT))
    by_id = {s.id: s for s in sessions}
    ranked = [s.id for s in sorted(sessions, key=lambda s: (s.updated_at, s.id), reverse=True)]

    def forbidden(s: SessionInfo) -> bool:
        old = days is not None and AT - s.updated_at > timedelta(days=days)
        return old or (keep is not None and ranked.index(s.id) >= keep)

    def ancestors(s: SessionInfo) -> list[str]:
        out, p = [], s.parent_id
        while p is not None:
            out.append(p)
            p = by_id[p].parent_id
        return out

    kept = [s for s in sessions if s.id not in gone]
    for s in kept:  # every ancestor of a kept session is kept
        assert not gone & set(ancestors(s))
    for s in sessions:
        if s.id in gone:
            assert forbidden(s)
        elif forbidden(s):  # kept only because a kept fork reads it
            assert any(s.id in ancestors(k) for k in kept)


def test_retention_refuses_nonsense() -> None:
    with pytest.raises(ConfigurationError, match="max_age"):
        Retention(max_age=timedelta(0))
    with pytest.raises(ConfigurationError, match="max_sessions"):
        Retention(max_sessions=-1)


@pytest.mark.parametrize("kind", ["memory", "sqlite", "files"])
def test_a_sweep_keeps_the_newest_sessions_and_their_forks_history(kind: str, tmp_path: Path) -> None:
    with backend(kind, tmp_path) as store:
        for i in range(4):
            msg = Message(role="user", content=f"turn {i}", id=f"m{i}")
            store.append(AppendRequest(f"s{i}", [(msg, 3)], user_id="u"))
        fork = store.fork("s0", 0, user_id="u")  # the newest: keeps s0, the oldest, whose history it reads
        other = store.list_sessions(user_id="v")
        receipt = sweep(store, user_id="u", policy=Retention(max_sessions=2))
        left = {i.id for i in store.list_sessions(user_id="u")}
        assert left == {fork.id, "s0", "s3"}
        assert set(receipt.sessions) == {"s1", "s2"}
        assert receipt.removed["messages"] == 2
        assert store.list_sessions(user_id="v") == other
        assert sweep(store, user_id="u", policy=Retention(max_sessions=2)).total == 0
