"""The summarizer-failure matrix: whatever a summarizer does, every message is stored exactly once.

A summarizer is a model's output, so it is checked like user input before it is stored: one that
raises, is slow, returns nothing, returns far too much, or returns text UTF-8 cannot hold (a lone
surrogate, what an LLM server's ``"\\ud83d"`` JSON escape yields) leaves the add complete, the
messages archived, and a retry of the same add a retry (nothing stored twice), on every store kind.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from convmem import Memory, Message

from .stores._backends import BACKENDS, backend

MODES = ("raise", "slow", "empty", "huge", "surrogate", "not_text")
STORES = BACKENDS  # every backend: memory, SQLite, files, PostgreSQL, Redis


class _Summarizer:
    """Fails in ``mode`` on every other call, so failed folds are retried and good ones land between them."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.calls = 0

    def summarize(self, previous: str | None, messages: Sequence[Message], max_tokens: int) -> object:
        self.calls += 1
        if self.calls % 2 == 0:
            return f"{previous or ''} and {len(messages)} more messages".strip()
        if self.mode == "raise":
            raise RuntimeError("HTTP 503: upstream overloaded")
        if self.mode == "slow":
            time.sleep(0.02)
            return "a slow but good summary"
        if self.mode == "empty":
            return "  \n "
        if self.mode == "huge":
            return "word " * 50_000
        if self.mode == "surrogate":
            return "the user likes \ud83d pizza"
        return {"summary": "not a string"}


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("mode", MODES)
def test_every_message_is_stored_exactly_once_whatever_the_summarizer_does(
    kind: str, mode: str, tmp_path: Path
) -> None:
    with backend(kind, tmp_path) as store:
        memory = Memory(
            max_tokens=2000,
            strategy="summary_buffer",
            summarizer=_Summarizer(mode),  # type: ignore[arg-type]
            strategy_options={"max_tokens": 120, "keep_recent_tokens": 60},
            store=store,
        )
        sent = []
        for i in range(24):
            message = {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} text", "id": f"m{i}"}
            sent.append(message["id"])
            memory.add(message)  # a summary that fails its check must not make the add raise
            if i % 5 == 0:
                memory.add(message)  # a retry of a completed add stores nothing
        stored = [m.message.id for m in store.messages(memory.session_id)]
        assert stored == sent
        stats = memory.stats()
        if mode == "huge":  # too long is not a failure: it is cut to the cap, and says so
            assert any("truncated" in w for w in stats.warnings)
        elif mode != "slow":
            assert stats.summary_failures >= 1
        summary = store.load(memory.session_id).state.summary
        if summary is not None:
            summary.text.encode("utf-8")  # what is stored as the summary is text UTF-8 can hold
        again = Memory.open(memory.session_id, store=store, max_tokens=2000)
        assert [m.id for m in again.messages()] == sent
        again.context().messages[0]["content"].encode("utf-8")
        memory.close()
