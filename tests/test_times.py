"""Times at the door: a naive datetime is taken as UTC wherever a time enters (convmem.limits.as_utc).

Messages, facts (``valid_from``, ``facts(valid_at=)``), recall filters, the archive a recall block
reads and imports: random mixes of naive and aware times (any offset) never raise anything but a
named error, and every time read back is aware.
"""

from __future__ import annotations

import contextlib
import itertools
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convmem import Memory
from convmem.errors import ConvmemError
from convmem.limits import as_utc
from convmem.messages import Message
from tests._quick import examples
from tests.stores._backends import BACKENDS, backend

_offsets = st.none() | st.integers(-14 * 60, 14 * 60).map(lambda m: timezone(timedelta(minutes=m)))
_times = st.builds(
    lambda moment, zone: moment if zone is None else moment.replace(tzinfo=zone),
    st.datetimes(min_value=datetime(1971, 1, 2), max_value=datetime(2100, 1, 1)),
    _offsets,
)
_counter = itertools.count()


def test_a_naive_time_is_utc_and_an_aware_one_keeps_its_offset() -> None:
    naive = datetime(2024, 5, 1, 12, 0)
    assert as_utc(naive) == datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
    paris = timezone(timedelta(hours=2))
    assert as_utc(naive.replace(tzinfo=paris)).utcoffset() == timedelta(hours=2)
    assert Message(role="user", content="hi", created_at=naive).created_at == as_utc(naive)
    assert Message.trusted("user", "hi", "m1", naive).created_at == as_utc(naive)
    assert Message(role="user", content="hi").with_identity("m1", naive).created_at == as_utc(naive)


@pytest.mark.parametrize("kind", BACKENDS)
@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stamps=st.lists(_times, min_size=4, max_size=10), facts=st.lists(_times, max_size=4), probe=_times)
def test_random_mixes_of_naive_and_aware_times_never_raise_anything_but_a_named_error(
    kind: str, tmp_path: Path, stamps: list[datetime], facts: list[datetime], probe: datetime
) -> None:
    with backend(kind, tmp_path / f"t{next(_counter)}") as store:
        _mix(store, stamps, facts, probe)


def _mix(store: Any, stamps: list[datetime], facts: list[datetime], probe: datetime) -> None:
    memory = Memory(max_tokens=400, store=store, user_id="alice", facts=True, recall=True)
    try:
        for i, stamp in enumerate(stamps):  # a small budget: most of them go to the archive recall reads
            role = "user" if i % 2 == 0 else "assistant"
            memory.add(Message(role=role, content=f"hotel Avenida booking number {i} " * 6, created_at=stamp))
        assert memory.facts is not None
        for stamp in facts:
            with contextlib.suppress(ConvmemError):  # a named refusal is the other allowed outcome
                memory.facts.add(f"Alice said something on {stamp:%Y-%m-%d}", user_id="alice", valid_from=stamp)
        held = memory.facts.facts(user_id="alice", valid_at=probe)
        assert all(f.valid_from.tzinfo is not None for f in held)
        assert all(f.valid_from <= as_utc(probe) for f in held)
        memory.context("which hotel did I book?")  # the recall block ranks the archive by time
        assert memory.recall is not None
        hits = memory.recall.search("hotel", user_id="alice", since=min(stamps, key=as_utc), until=probe)
        assert all(h.doc.created_at.tzinfo is not None for h in hits)
        stored = list(store.messages(memory.session_id, user_id="alice"))
        assert all(m.message.created_at is not None and m.message.created_at.tzinfo for m in stored)
        exported = store.export_jsonl(memory.session_id, user_id="alice")
        store.delete_session(memory.session_id, user_id="alice")
        assert store.import_jsonl(exported, user_id="alice").id == memory.session_id
    finally:
        memory.close()
