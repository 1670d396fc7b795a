"""The failure matrix of the other model outputs: extracted facts and rewritten recall queries.

A model's output is checked like user input before anything is stored or searched (issue 27): a fact
extractor or a query rewriter that raises, is slow, answers nothing, answers far too much, answers text
UTF-8 cannot hold (a lone surrogate, what an LLM server's ``"\\ud83d"`` JSON escape yields) or answers
something that is not text leaves every add whole (each message stored exactly once, a retry stores
nothing), stores no fact that breaks the rules, and never makes ``context()`` raise, on every store kind.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from convmem import Memory
from convmem.errors import InvalidFactError, LLMError
from convmem.llm.client import Completion
from convmem.llm.extractor import OpenAICompatibleFactExtractor
from convmem.longterm.facts import FactAdd, Facts
from convmem.longterm.facts.model import MAX_FACT_BYTES
from convmem.longterm.recall import RecallIndex
from convmem.longterm.recall.ranking import MAX_REWRITE_CHARS, MAX_REWRITES, checked_queries

from .stores._backends import BACKENDS, backend

MODES = ("raise", "slow", "empty", "huge", "surrogate", "not_text")
STORES = BACKENDS  # every backend: memory, SQLite, files, PostgreSQL, Redis


class _Chat:
    """An OpenAI-compatible chat backend whose every other reply is ``mode``'s (the others are good ones)."""

    model, endpoint = "fake-model", "http://127.0.0.1:9/v1"

    def __init__(self, mode: str) -> None:
        self.mode, self.calls = mode, 0

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        self.calls += 1
        # the new messages' ids, as the extractor's prompt lists them ("[m3 2026-...] user: ...")
        source = re.findall(r"^\[(\S+) ", str(messages[-1]["content"]), re.MULTILINE)[:1]
        good = {"op": "add", "fact_id": None, "text": f"The user said {self.calls}.", "subject": None, "reason": None}
        if self.calls % 2 == 0:
            return _reply([{**good, "source_message_ids": source}])
        if self.mode == "raise":
            raise LLMError("HTTP 503: upstream overloaded")
        if self.mode == "slow":
            time.sleep(0.02)
            return _reply([{**good, "source_message_ids": source}])
        if self.mode == "empty":
            return Completion("", None)
        text: object = {
            "huge": "word " * 50_000,
            "surrogate": "The user likes \ud83d pizza.",
            "not_text": 5,
        }[self.mode]
        return _reply([{**good, "text": text, "source_message_ids": source}, {**good, "source_message_ids": source}])


def _reply(operations: list[dict[str, Any]]) -> Completion:
    # json.dumps writes a lone surrogate as the "\ud83d" escape, as an LLM server does
    return Completion(json.dumps({"operations": operations}), None)


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("mode", MODES)
def test_every_message_is_stored_once_and_no_bad_fact_whatever_the_extractor_does(
    kind: str, mode: str, tmp_path: Path
) -> None:
    with backend(kind, tmp_path) as store:
        extractor = OpenAICompatibleFactExtractor(chat=_Chat(mode))
        facts = Facts(store.facts(), extractor=extractor)
        memory = Memory(max_tokens=400, store=store, user_id="u", sinks=[facts])
        sent = []
        for i in range(24):
            message = {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "text " * 20}
            message["id"] = f"m{i}"
            sent.append(message["id"])
            memory.add(message)  # an extraction that fails its check must not make the add raise
            if i % 5 == 0:
                memory.add(message)  # a retry of a completed add stores nothing
        assert [m.message.id for m in store.messages(memory.session_id, user_id="u")] == sent
        assert extractor.chat.calls >= 2, "nothing was evicted: the extractor was never asked"
        kept = facts.history(user_id="u")
        assert kept, "not even the good extractions were stored"
        for fact in kept:  # every stored fact is text UTF-8 can hold, within the size limit, not empty
            assert fact.text.strip()
            assert len(fact.text.encode("utf-8")) <= MAX_FACT_BYTES
        if mode in ("raise", "empty"):
            assert any("eviction sink" in w for w in memory.stats().warnings)
        memory.context("what did I say?")


class _Rewriter:
    def __init__(self, mode: str) -> None:
        self.mode, self.calls = mode, 0

    def rewrite(self, query: str) -> object:
        self.calls += 1
        if self.mode == "raise":
            raise LLMError("HTTP 503: upstream overloaded")
        if self.mode == "slow":
            time.sleep(0.02)
            return ["pizza"]
        return {
            "empty": [" ", ""],
            "huge": ["pizza " * 10_000] * 1000,
            "surrogate": ["pizza \ud83d"],
            "not_text": [5, None],
        }[self.mode]


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("mode", MODES)
def test_a_rewritten_query_is_checked_before_any_search(kind: str, mode: str, tmp_path: Path) -> None:
    from convmem import RecallBlock

    with backend(kind, tmp_path) as store:
        rewriter = _Rewriter(mode)
        recall = RecallIndex(store=store.recall(), rewriter=rewriter)  # type: ignore[arg-type]
        memory = Memory(max_tokens=300, store=store, user_id="u", sinks=[recall], blocks=[RecallBlock(recall, k=3)])
        for i in range(16):
            memory.add({"role": "user" if i % 2 == 0 else "assistant", "content": f"I like pizza {i} " + "x " * 30})
        stored = len(list(store.messages(memory.session_id, user_id="u")))
        context = memory.context("what food do I like?")  # never raises, whatever the rewriter answered
        assert rewriter.calls >= 1
        assert len(list(store.messages(memory.session_id, user_id="u"))) == stored  # a search stores nothing
        failed = [w for w in recall.warnings if "query rewriting failed" in w]
        assert bool(failed) == (mode in ("raise", "empty", "surrogate", "not_text")), recall.warnings
        assert "pizza" in json.dumps(context.messages)  # the question alone still recalls


def test_what_a_rewriter_may_add_is_bounded_and_checked() -> None:
    kept = checked_queries(["pizza " * 10_000] * 3 + [f"q{i}" for i in range(100)])
    assert len(kept) == MAX_REWRITES
    assert all(len(q) <= MAX_REWRITE_CHARS for q in kept)
    for bad, reason in (
        ("pizza", "returned str"),
        ([" ", ""], "no search strings"),
        (["ok", "\ud83d"], "lone surrogate"),
        (["ok", 5], "a int among"),
        (None, "returned NoneType"),
    ):
        with pytest.raises(LLMError, match=reason):
            checked_queries(bad)


def test_a_fact_is_checked_like_user_input() -> None:
    with pytest.raises(InvalidFactError, match=f"at most {MAX_FACT_BYTES}"):
        FactAdd("word " * 1000)
    with pytest.raises(InvalidFactError, match="lone surrogate"):
        FactAdd("likes \ud83d pizza")
    with pytest.raises(InvalidFactError, match="non-empty"):
        FactAdd("  ")


def test_an_extractor_that_answers_no_operations_changes_nothing() -> None:
    class Odd:
        def __init__(self, answer: object) -> None:
            self.answer = answer

        def extract(self, messages: Sequence[Any], facts: Sequence[Any], *, user_id: str | None = None) -> object:
            return self.answer

    from convmem import Message

    said = [Message(role="user", content="I live in Lisbon", id="m0")]
    with pytest.raises(LLMError, match="returned dict, not a list of fact operations"):
        Facts(extractor=Odd({"add": "x"})).extract(said)  # type: ignore[arg-type]
    facts = Facts(extractor=Odd([FactAdd("The user lives in Lisbon."), "add: the user is admin"]))  # type: ignore[arg-type]
    changes = facts.extract(said)
    assert [f.text for f in changes.added] == ["The user lives in Lisbon."]
    assert [r.reason for r in changes.rejected] == ["not a fact operation: str"]
    assert [f.text for f in facts.facts()] == ["The user lives in Lisbon."]
