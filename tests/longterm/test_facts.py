"""Facts with temporal validity: writes, updates, invalidation, valid_at, merging, extraction, isolation."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import Memory, Message
from convmem.errors import ConflictError, LLMError
from convmem.longterm.facts._plan import FactChanges
from convmem.longterm.facts.book import AsyncFacts, Facts
from convmem.longterm.facts.model import Fact, FactAdd, FactInvalidate, FactStore
from convmem.longterm.facts.store import MemoryFactStore
from convmem.stores.files.longterm import FileFactStore
from convmem.stores.sqlite.longterm import SQLiteFactStore

from .._quick import examples
from .fakes import AsyncRuleExtractor, FailingExtractor, HallucinatingExtractor, RuleExtractor

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
DAY = timedelta(days=1)

StoreFactory = Callable[[Path], FactStore]
FACTORIES: dict[str, StoreFactory] = {
    "memory": lambda _: MemoryFactStore(),
    "sqlite": lambda tmp: SQLiteFactStore(tmp / "facts.db"),
    "files": lambda tmp: FileFactStore(tmp / "store"),
}


class Clock:
    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(params=sorted(FACTORIES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FactStore]:
    made = FACTORIES[request.param](tmp_path)
    yield made
    made.close()


def test_update_sequence_answers_valid_at(store: FactStore) -> None:
    clock = Clock()
    facts = Facts(store, clock=clock)
    lisbon = facts.add("Alice lives in Lisbon", user_id="alice", subject="home")
    clock.now = T0 + 10 * DAY
    porto = facts.update(lisbon.id, "Alice lives in Porto", user_id="alice", reason="moved")
    clock.now = T0 + 20 * DAY
    berlin = facts.update(porto.id, "Alice lives in Berlin", user_id="alice", reason="moved")
    clock.now = T0 + 30 * DAY
    facts.invalidate(berlin.id, user_id="alice", reason="left Berlin, no new home known")

    def at(days: float) -> list[str]:
        return [f.text for f in facts.facts(user_id="alice", valid_at=T0 + days * DAY)]

    assert at(-1) == []
    assert at(0) == at(9.9) == ["Alice lives in Lisbon"]
    assert at(10) == ["Alice lives in Porto"]  # half-open: the old one ended exactly there
    assert at(25) == ["Alice lives in Berlin"]
    assert at(30) == []
    history = facts.history(user_id="alice")
    assert [f.text for f in history] == ["Alice lives in Lisbon", "Alice lives in Porto", "Alice lives in Berlin"]
    assert [f.replaced_by for f in history] == [porto.id, berlin.id, None]
    assert history[0].invalid_reason == "moved"
    assert history[2].invalid_reason == "left Berlin, no new home known"
    assert all(f.valid_to is not None for f in history)  # nothing deleted, everything ended


def test_duplicates_merge_after_normalization(store: FactStore) -> None:
    facts = Facts(store, clock=Clock())
    first = facts.add("Alice likes  tea.", user_id="alice", subject="Drinks", source_message_ids=["m1"])
    again = facts.add("alice LIKES tea", user_id="alice", subject="drinks", source_message_ids=["m2", "m1"])
    assert again.id == first.id
    assert again.source_message_ids == ("m1", "m2")
    assert len(facts.history(user_id="alice")) == 1
    other_subject = facts.add("alice likes tea", user_id="alice", subject="mornings")
    assert other_subject.id != first.id


def test_an_ended_fact_can_become_true_again(store: FactStore) -> None:
    clock = Clock()
    facts = Facts(store, clock=clock)
    tea = facts.add("likes tea", user_id="u")
    clock.now += DAY
    facts.invalidate(tea.id, user_id="u", reason="stopped")
    clock.now += DAY
    again = facts.add("likes tea", user_id="u")
    assert again.id != tea.id
    assert [f.text for f in facts.facts(user_id="u")] == ["likes tea"]
    assert facts.facts(user_id="u", valid_at=T0 + 1.5 * DAY) == []


def test_invalidation_must_name_an_open_fact_of_the_user(store: FactStore) -> None:
    facts = Facts(store, clock=Clock())
    mine = facts.add("a", user_id="alice")
    theirs = facts.add("b", user_id="bob")
    with pytest.raises(ConflictError, match="not an open fact"):
        facts.invalidate("nope", user_id="alice", reason="x")
    with pytest.raises(ConflictError, match="not an open fact"):
        facts.invalidate(theirs.id, user_id="alice", reason="x")  # another user's fact is invisible
    with pytest.raises(ConflictError, match="replaced_by"):
        facts.invalidate(mine.id, user_id="alice", reason="x", replaced_by=theirs.id)
    facts.invalidate(mine.id, user_id="alice", reason="x")
    with pytest.raises(ConflictError, match="not an open fact"):
        facts.invalidate(mine.id, user_id="alice", reason="again")
    assert [f.text for f in facts.facts(user_id="bob")] == ["b"]


def test_strict_apply_writes_nothing_when_one_operation_is_bad(store: FactStore) -> None:
    facts = Facts(store, clock=Clock())
    with pytest.raises(ConflictError):
        facts.apply([FactAdd("kept?"), FactInvalidate("ghost", "x")], user_id="u")
    assert facts.history(user_id="u") == []
    changes = facts.apply([FactAdd("kept"), FactInvalidate("ghost", "x")], user_id="u", strict=False)
    assert [f.text for f in changes.added] == ["kept"]
    assert [r.operation for r in changes.rejected] == [FactInvalidate("ghost", "x")]


def test_store_refuses_to_end_a_fact_twice(store: FactStore) -> None:
    facts = Facts(store, clock=Clock())
    fact = facts.add("x", user_id="u")
    stale = facts.store.list_facts(user_id="u", open_only=True)
    facts.invalidate(fact.id, user_id="u", reason="first")
    from convmem.longterm.facts._plan import plan_changes

    late = plan_changes([FactInvalidate(fact.id, "second")], stale, user_id="u", session_id=None, now=T0)
    with pytest.raises(ConflictError, match="already ended"):
        store.write_facts(late.added, late.changed)
    assert facts.history(user_id="u")[0].invalid_reason == "first"


def test_validity_defaults_to_the_source_message_time(store: FactStore) -> None:
    memory = Memory(max_tokens=10_000, user_id="alice")
    said = memory.add({"role": "user", "content": "I moved"})
    facts = Facts(store, clock=Clock(T0 + 100 * DAY))
    changes = facts.apply([FactAdd("moved", (said.id or "",))], user_id="alice", messages=[said])
    assert changes.added[0].valid_from == said.created_at


def test_update_to_the_same_text_only_adds_provenance(store: FactStore) -> None:
    facts = Facts(store, clock=Clock())
    fact = facts.add("x is 1", user_id="u", subject="x", source_message_ids=["a"])
    same = facts.update(fact.id, "X is 1.", user_id="u", source_message_ids=["b"])
    assert same.id == fact.id
    assert same.source_message_ids == ("a", "b")
    assert same.valid_to is None


def test_update_into_an_existing_fact_merges(store: FactStore) -> None:
    facts = Facts(store, clock=Clock())
    a = facts.add("home is Lisbon", user_id="u", subject="home")
    b = facts.add("home is Porto", user_id="u", subject="home")  # a contradiction the caller left open
    merged = facts.update(a.id, "home is Porto", user_id="u")
    assert merged.id == b.id
    history = facts.history(user_id="u")
    assert [(f.id, f.replaced_by) for f in history] == [(a.id, b.id), (b.id, None)]


# -- extraction -----------------------------------------------------------------------------


def test_extractor_drives_facts_from_evicted_units() -> None:
    extractor = RuleExtractor()
    facts = Facts(extractor=extractor)
    memory = Memory(
        max_tokens=200, user_id="alice", strategy="sliding_window", strategy_options={"max_messages": 2}, sinks=[facts]
    )
    for text in [
        "remember city = Lisbon",
        "ok",
        "remember city = Porto",
        "ok",
        "remember pet = cat",
        "ok",
        "forget pet",
        "ok",
        "filler",
        "filler",
    ]:
        memory.add({"role": "user", "content": text})
    assert extractor.calls, "the sink ran"
    history = facts.history(user_id="alice")
    assert [(f.text, f.valid_to is None) for f in history] == [
        ("city is Lisbon", False),
        ("city is Porto", True),
        ("pet is cat", False),
    ]
    porto = history[1]
    assert history[0].replaced_by == porto.id
    assert len(porto.source_message_ids) == 1
    assert porto.source_message_ids[0] in {m.id for m in memory.messages()}
    assert facts.facts(user_id="bob") == []


def test_a_failed_extraction_changes_nothing_and_warns() -> None:
    facts = Facts(extractor=FailingExtractor(RuntimeError("boom")))
    facts.add("kept", user_id="u")
    with pytest.raises(LLMError, match="boom"):
        facts.extract(Memory(max_tokens=999).add_many([{"role": "user", "content": "hi"}]), user_id="u")
    memory = Memory(
        max_tokens=200, user_id="u", strategy="sliding_window", strategy_options={"max_messages": 1}, sinks=[facts]
    )
    memory.add_many([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    assert [f.text for f in facts.history(user_id="u")] == ["kept"]
    assert any("boom" in w and "sink" in w for w in memory.stats().warnings)
    assert len(memory.messages()) == 2


def test_extractor_hallucinations_are_skipped_not_redirected() -> None:
    facts = Facts(extractor=HallucinatingExtractor())
    other = facts.add("unrelated", user_id="u")
    changes = facts.extract(Memory(max_tokens=999).add_many([{"role": "user", "content": "hi"}]), user_id="u")
    assert [r.operation.fact_id for r in changes.rejected] == ["no-such-fact"]  # type: ignore[union-attr]
    assert [f.text for f in facts.facts(user_id="u")] == ["unrelated", "sky is blue"]
    assert facts.history(user_id="u")[0] == other


async def test_async_twin_matches() -> None:
    sync, aio = (
        Facts(extractor=RuleExtractor()),
        AsyncFacts(extractor=AsyncRuleExtractor()),
    )
    messages = Memory(max_tokens=999).add_many(
        [{"role": "user", "content": t} for t in ["remember a = 1", "remember b = 2"]]
    )
    later = Memory(max_tokens=999).add_many([{"role": "user", "content": t} for t in ["remember a = 3", "forget b"]])
    for batch in (messages, later):
        sync.extract(batch, user_id="u")
        await aio.extract(batch, user_id="u")
    strip = lambda fs: [(f.text, f.subject, f.valid_to is None, f.invalid_reason) for f in fs]  # noqa: E731
    assert strip(sync.history(user_id="u")) == strip(await aio.history(user_id="u"))
    assert strip(await aio.facts(user_id="u")) == [("a is 3", "a", True, None)]
    fact = await aio.add("z", user_id="v")
    updated = await aio.update(fact.id, "z2", user_id="v")
    ended = await aio.invalidate(updated.id, user_id="v", reason="gone")
    assert ended.valid_to is not None
    assert await aio.facts(user_id="v") == []
    await AsyncFacts(MemoryFactStore(), extractor=RuleExtractor()).extract(messages, user_id="w")


# -- invariants -----------------------------------------------------------------------------

_ops = st.lists(
    st.tuples(
        st.sampled_from(["alice", "bob", None]),
        st.sampled_from(["add", "update", "invalidate"]),
        st.sampled_from(["tea", "coffee", "Tea.", "water"]),
        st.integers(0, 5),
    ),
    max_size=25,
)


@settings(max_examples=examples(60), deadline=None)
@given(_ops)
def test_isolation_and_validity_invariants(script: list[tuple[str | None, str, str, int]]) -> None:
    clock = Clock()
    facts = Facts(clock=clock)
    for step, (user, kind, text, pick) in enumerate(script):
        clock.now = T0 + step * DAY
        open_facts = facts.facts(user_id=user)
        if kind == "add" or not open_facts:
            facts.add(f"{user} likes {text}", user_id=user, subject="drink")
            continue
        target = open_facts[pick % len(open_facts)]
        if kind == "update":
            facts.update(target.id, f"{user} likes {text} a lot", user_id=user)
        else:
            facts.invalidate(target.id, user_id=user, reason="changed")
    for user in ("alice", "bob", None):
        history = facts.history(user_id=user)
        assert all(f.user_id == user and str(user) in f.text for f in history)  # isolation
        for day in range(len(script) + 1):
            when = T0 + day * DAY
            valid = facts.facts(user_id=user, valid_at=when)
            assert valid == [f for f in history if f.valid_at(when)]
            keys = [f.key for f in valid]
            assert len(keys) == len(set(keys))  # duplicates never coexist
        for fact in history:
            if fact.replaced_by is not None:
                assert fact.valid_to is not None
                assert any(f.id == fact.replaced_by for f in history)


# -- the twins share one flow -------------------------------------------------------------------


class _RacingStore(MemoryFactStore):
    """A concurrent writer ends the planned-against fact just before our first ``conflicts`` writes."""

    def __init__(self, conflicts: int) -> None:
        super().__init__()
        self.conflicts = conflicts
        self.writes = 0

    def write_facts(self, added: Sequence[Fact], changed: Sequence[Fact]) -> None:
        self.writes += 1
        if self.conflicts:
            self.conflicts -= 1
            raise ConflictError("fact is already ended (a concurrent writer)")
        super().write_facts(added, changed)


@pytest.mark.parametrize("conflicts", [0, 1, 2])
async def test_twins_retry_a_lost_race_once_and_agree(conflicts: int) -> None:
    batch = Memory(max_tokens=999).add_many([{"role": "user", "content": "remember a = 1"}])
    outcomes = []
    for twin in ("sync", "async"):
        store = _RacingStore(conflicts)
        try:
            if twin == "sync":
                changes = Facts(store, extractor=RuleExtractor()).extract(batch, user_id="u")
            else:
                changes = await AsyncFacts(store, extractor=RuleExtractor()).extract(batch, user_id="u")
            outcome: object = [f.text for f in changes.added]
        except ConflictError as exc:
            outcome = f"conflict: {exc}"
        outcomes.append((outcome, store.writes, [f.text for f in store.list_facts(user_id="u")]))
    assert outcomes[0] == outcomes[1]
    expected = (
        ("conflict: fact is already ended (a concurrent writer)", 2, [])
        if conflicts == 2
        else (["a is 1"], conflicts + 1, ["a is 1"])
    )
    assert outcomes[0] == expected


async def _extract_error(facts: Facts | AsyncFacts, batch: list[Message]) -> LLMError:
    try:
        result = facts.extract(batch, user_id="u")
        if not isinstance(result, FactChanges):
            await result
    except LLMError as exc:
        return exc
    raise AssertionError("the extraction did not fail")


async def test_twins_wrap_an_extractor_crash_the_same_way() -> None:
    batch = Memory(max_tokens=999).add_many([{"role": "user", "content": "hi"}])
    crashes = [
        await _extract_error(facts, batch)
        for facts in (
            Facts(extractor=FailingExtractor(KeyError("k"))),
            AsyncFacts(extractor=FailingExtractor(KeyError("k"))),
        )
    ]
    assert [str(e) for e in crashes] == ["fact extractor failed: KeyError: 'k'"] * 2
    assert all(isinstance(e.__cause__, KeyError) for e in crashes)
    own = [
        await _extract_error(f, batch)
        for f in (Facts(extractor=FailingExtractor()), AsyncFacts(extractor=FailingExtractor()))
    ]
    assert [str(e) for e in own] == ["HTTP 500 from the extraction model"] * 2
    assert all(e.__cause__ is None for e in own)  # an extractor's own LLMError passes through unchanged
