"""Long-term memory from the session's store: ``Memory(..., store=..., facts=True, recall=True)`` on every backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from convmem import AsyncMemory, ConfigurationError, Memory
from convmem.longterm.facts import Facts, FactsBlock
from convmem.longterm.recall import RecallBlock, RecallIndex
from convmem.stores import SQLiteStore
from convmem.stores.memory import MemoryStore

from .longterm.fakes import RuleExtractor
from .stores._backends import BACKENDS, backend

BOOKING = "I booked the Hotel Avenida for 12 May."


def _chat(memory: Memory, turns: int = 30) -> None:
    memory.add({"role": "system", "content": "You are Alice's travel assistant."})
    memory.add({"role": "user", "content": BOOKING})
    memory.add({"role": "assistant", "content": "Noted: Hotel Avenida, 12 May."})
    for turn in range(turns):  # pushes the booking out of the window, into the archive
        memory.add({"role": "user", "content": f"Tell me fact {turn} about Portuguese tiles. " * 5})
        memory.add({"role": "assistant", "content": f"Tile fact {turn}: azulejos are glazed. " * 5})


def _text(memory: Memory | AsyncMemory, ctx: Any) -> str:
    return str(ctx.request()["messages"])


@pytest.mark.parametrize("kind", BACKENDS)
def test_one_store_wires_facts_and_recall_and_both_survive_a_new_memory(kind: str, tmp_path: Path) -> None:
    with backend(kind, tmp_path) as store:
        options: dict[str, Any] = {"user_id": "alice", "max_tokens": 1_500, "max_output_tokens": 200}
        memory = Memory("gpt-4o", store=store, facts=True, recall=True, **options)
        assert memory.facts is not None
        assert memory.recall is not None
        assert [type(b) for b in memory.options.blocks] == [FactsBlock, RecallBlock]
        assert memory.recall in memory.options.sinks
        assert memory.facts not in memory.options.sinks
        memory.facts.add("Alice lives in Porto", user_id="alice", subject="alice.home")
        _chat(memory)
        assert BOOKING not in str([m.text for m in memory.messages("active")])  # evicted, archived
        text = _text(memory, memory.context("Which hotel did I book?"))
        assert "Alice lives in Porto" in text
        assert "Hotel Avenida" in text

        # A new memory on the same store (a restart) sees the same facts and the same archive.
        again = Memory.open(memory.session_id, store=store, facts=True, recall=True, **options)
        assert again.facts is not None
        assert again.recall is not None
        assert [f.text for f in again.facts.facts(user_id="alice")] == ["Alice lives in Porto"]
        text = _text(again, again.context("Which hotel did I book?"))
        assert "Alice lives in Porto" in text
        assert "Hotel Avenida" in text
        other = Memory("gpt-4o", store=store, facts=True, recall=True, user_id="bob", max_tokens=1_500)
        assert "Porto" not in _text(other, other.context("Where does Alice live? Which hotel?"))  # scoped by user


def test_a_url_is_opened_once_and_keeps_everything_in_one_database(tmp_path: Path) -> None:
    path = tmp_path / "assistant.db"
    memory = Memory("gpt-4o", store=str(path), user_id="alice", max_tokens=1_500, facts=True, recall=True)
    memory.facts.add("Alice prefers trains", user_id="alice")  # type: ignore[union-attr]
    _chat(memory)
    memory.close()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == ["assistant.db"]
    store = SQLiteStore(path)
    try:
        assert [f.text for f in Facts(store.facts()).facts(user_id="alice")] == ["Alice prefers trains"]
        hits = RecallIndex(store=store.recall()).search("Which hotel did I book?", user_id="alice", k=3)
        assert BOOKING in [h.doc.text for h in hits]
    finally:
        store.close()


def test_an_extractor_mines_what_the_memory_evicts(tmp_path: Path) -> None:
    extractor = RuleExtractor()
    memory = Memory("gpt-4o", store=str(tmp_path / "db.sqlite"), user_id="alice", max_tokens=1_500, facts=extractor)
    assert memory.facts in memory.options.sinks
    memory.add({"role": "user", "content": "remember city = Porto"})
    _chat(memory)
    assert [f.text for f in memory.facts.facts(user_id="alice")] == ["city is Porto"]  # type: ignore[union-attr]
    assert "city is Porto" in _text(memory, memory.context("Where do I live?"))


def test_the_wired_blocks_come_after_the_callers_own(tmp_path: Path) -> None:
    from convmem import StaticBlock

    memory = Memory("gpt-4o", blocks=[StaticBlock("rules", "Be brief.")], facts=True, max_tokens=2_000)
    assert [b.name for b in memory.options.blocks] == ["rules", "facts"]


async def test_an_async_memory_wires_the_same_store_and_awaits_its_facts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    memory = AsyncMemory("gpt-4o", store=url, user_id="alice", max_tokens=1_500, facts=True, recall=True)
    try:
        assert memory.facts is not None
        assert memory.recall is not None
        await memory.facts.add("Alice lives in Porto", user_id="alice")
        await memory.add({"role": "user", "content": BOOKING})
        for turn in range(30):
            await memory.add({"role": "user", "content": f"Tell me fact {turn} about tiles. " * 5})
        text = _text(memory, await memory.context("Which hotel did I book? Where do I live?"))
        assert "Alice lives in Porto" in text
        assert "Hotel Avenida" in text
    finally:
        await memory.aclose()


@pytest.mark.parametrize(
    ("facts", "recall", "message"),
    [
        ("yes", False, "facts must be True, False or a fact extractor, got str"),
        (False, 3, "recall must be True, False or an embedder, got int"),
    ],
)
def test_what_facts_and_recall_take_is_checked(facts: Any, recall: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Memory("gpt-4o", facts=facts, recall=recall)


class _PlainStore:
    """A third-party store: the session contract only (delegated), no long-term memory."""

    def __init__(self) -> None:
        self._inner = MemoryStore()

    def __getattr__(self, name: str) -> Any:
        if name in ("facts", "blocks", "recall"):
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_store_without_long_term_memory_is_refused_with_what_to_do() -> None:
    with pytest.raises(ConfigurationError, match="keeps no long-term memory"):
        Memory("gpt-4o", store=_PlainStore(), facts=True)  # type: ignore[arg-type]


def test_a_refused_wiring_closes_the_store_it_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[bool] = []
    real = SQLiteStore.close
    monkeypatch.setattr(SQLiteStore, "close", lambda self: (closed.append(True), real(self))[1])
    from convmem.memory import _longterm

    monkeypatch.setattr(_longterm, "LongTermStores", type("Nothing", (), {}))  # no store has long-term memory
    with pytest.raises(ConfigurationError):
        Memory("gpt-4o", store=str(tmp_path / "db.sqlite"), facts=True)
    assert closed == [True]
