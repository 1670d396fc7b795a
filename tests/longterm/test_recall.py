"""Recall over the archive: BM25, dense, hybrid, filters, isolation, failures at archive time."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import Memory, Message
from convmem.errors import ConfigurationError, LLMError
from convmem.longterm.recall.embedders import HashingEmbedder
from convmem.longterm.recall.fusion import rrf, zscore
from convmem.longterm.recall.index import Keys, RecallDoc, RecallIndex
from convmem.longterm.recall.lexical import BM25Index, stem, tokenize

from .._quick import examples
from .embedders import FlakyEmbedder

T0 = datetime(2024, 3, 1, tzinfo=timezone.utc)


def doc(
    i: int, text: str, *, user: str | None = "u", session: str = "s1", role: str = "user", day: int = 0
) -> RecallDoc:
    return RecallDoc(f"m{i}", session, user, i, role, text, T0 + timedelta(days=day, seconds=i), text)


CORPUS = [
    "I adopted a puppy named Biscuit last week",
    "My sister lives in Lisbon and works as a nurse",
    "We went hiking in the Alps during the summer",
    "The puppy chewed my favourite running shoes",
    "I started a pottery class on Tuesdays",
    "Lisbon has the best custard tarts",
]


def test_tokenizer_and_stemmer() -> None:
    assert tokenize("The puppies WERE running!") == ["puppy", "run"]
    assert [stem(w) for w in ["moved", "moving", "moves", "hiking", "boxes", "glass", "this"]] == [
        "move",
        "move",
        "move",
        "hike",
        "box",
        "glass",
        "this",
    ]
    assert tokenize("\ufb01sh \uff26ish") == ["fish", "fish"]  # NFKC: ligature, full-width letter


@settings(max_examples=examples(200), deadline=None)
@given(st.text())
def test_any_query_text_is_safe(query: str) -> None:
    recall = RecallIndex(embedder=HashingEmbedder(32))
    recall.add([doc(i, t) for i, t in enumerate(CORPUS)])
    for mode in ("lexical", "dense", "hybrid"):
        recall.search(query, user_id="u", mode=mode)  # type: ignore[arg-type]


@pytest.mark.parametrize("query", ['"unbalanced', "NEAR(puppy lisbon)", "pup*", "((()", "AND OR NOT", "-", "'; DROP"])
def test_fts_syntax_is_just_words(query: str) -> None:
    recall = RecallIndex()
    recall.add([doc(i, t) for i, t in enumerate(CORPUS)])
    recall.search(query, user_id="u")
    hits = recall.search("NEAR(puppy* Biscuit", user_id="u", k=2)
    assert hits[0].doc.text.startswith("I adopted a puppy")


def test_bm25_ranks_and_grows_incrementally() -> None:
    recall = RecallIndex()
    recall.add([doc(i, t) for i, t in enumerate(CORPUS)])
    hits = recall.search("where does my sister live?", user_id="u", k=3)
    assert hits[0].doc.message_id == "m1"
    assert hits[0].lexical_rank == 1
    assert hits[0].dense_rank is None
    recall.add([doc(10, "my sister moved to Porto")])
    assert {h.doc.message_id for h in recall.search("sister moved", user_id="u", k=2)} == {"m1", "m10"}
    assert recall.add([doc(10, "my sister moved to Porto")]) == 0  # idempotent per message id
    assert len(recall) == 7


def test_bm25_statistics_match_the_formula() -> None:
    index = BM25Index()
    index.add(["a", "b"])
    index.add(["a", "a", "c"])
    numbers, scores = index.scores(["a", "c"])
    n, avgdl, k1, b = 2, 2.5, 1.2, 0.75
    idf_a = np.log(1 + (n - 2 + 0.5) / 2.5)
    idf_c = np.log(1 + (n - 1 + 0.5) / 1.5)

    def part(tf: float, dl: float, idf: float) -> float:
        return float(idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)))

    expected = {0: part(1, 2, idf_a), 1: part(2, 3, idf_a) + part(1, 3, idf_c)}
    assert dict(zip(numbers.tolist(), scores.tolist(), strict=True)) == pytest.approx(expected, rel=1e-5)


def test_filters() -> None:
    recall = RecallIndex(embedder=HashingEmbedder(64))
    docs = [
        doc(0, "puppy walk in the park", session="a", role="user", day=0),
        doc(1, "puppy food brands", session="a", role="assistant", day=1),
        doc(2, "puppy training classes", session="b", role="user", day=2),
        doc(3, "puppy vaccination dates", session="b", role="tool", day=3),
    ]
    recall.add(docs)
    for mode in ("lexical", "dense", "hybrid"):

        def ids(**filters: object) -> set[str]:
            return {h.doc.message_id for h in recall.search("puppy", user_id="u", mode=mode, **filters)}  # noqa: B023

        assert ids() == {"m0", "m1", "m2", "m3"}
        assert ids(session_id="a") == {"m0", "m1"}
        assert ids(session_id=["b", "zzz"]) == {"m2", "m3"}
        assert ids(roles=["user"]) == {"m0", "m2"}
        assert ids(since=T0 + timedelta(days=1), until=T0 + timedelta(days=3)) == {"m1", "m2"}
        assert ids(exclude_window=("b", 3)) == {"m0", "m1", "m2"}
        assert ids(exclude_window=("a", 0), roles=["user", "tool"]) == {"m2", "m3"}
        assert ids(session_id="nope") == set()


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["alice", "bob", None]), st.sampled_from(CORPUS)), min_size=1, max_size=30))
def test_isolation(rows: list[tuple[str | None, str]]) -> None:
    recall = RecallIndex(embedder=HashingEmbedder(32))
    recall.add([doc(i, text, user=user) for i, (user, text) in enumerate(rows)])
    for user in ("alice", "bob", None, "carol"):
        for mode in ("lexical", "dense", "hybrid"):
            hits = recall.search("puppy sister Lisbon hiking", user_id=user, k=50, mode=mode)  # type: ignore[arg-type]
            assert all(h.doc.user_id == user for h in hits)
            if mode == "dense":
                assert len(hits) == sum(1 for u, _ in rows if u == user)


def test_memory_sink_indexes_evicted_units_with_context() -> None:
    recall = RecallIndex()
    memory = Memory(
        max_tokens=1000,
        user_id="alice",
        strategy="sliding_window",
        strategy_options={"max_messages": 2},
        sinks=[recall],
    )
    memory.add({"role": "system", "content": "You are helpful."})
    memory.add({"role": "user", "content": "Did you see the match last night?"})
    memory.add({"role": "assistant", "content": "Yes, what a finish!"})
    memory.add({"role": "user", "content": "unrelated"})
    memory.add({"role": "user", "content": "more"})
    assert recall.count(user_id="alice") == 2  # the system message is pinned, never archived
    hit = recall.search("match last night", user_id="alice", k=2)
    assert [h.doc.text for h in hit] == ["Did you see the match last night?", "Yes, what a finish!"]
    assert hit[1].doc.context == "Did you see the match last night?"
    assert recall.search("match", user_id="bob") == []
    memory.clear()
    assert recall.count(user_id="alice") == 4  # clear archives the window into long-term memory too


def test_keys_enrichment() -> None:
    message = Message(role="user", name="Caroline", content="I went to a support group", id="x", created_at=T0)
    assert Keys(speaker=True, date=True).build(message, None) == "Caroline: I went to a support group (1 March 2024)"
    assert Keys().build(message, None) == "I went to a support group"


@pytest.mark.parametrize("mode", ["raise", "dim", "nan", "ragged"])
def test_embedder_failure_keeps_the_message_and_retries_later(mode: str) -> None:
    embedder = FlakyEmbedder(mode)
    recall = RecallIndex(embedder=embedder)
    memory = Memory(
        max_tokens=1000, user_id="u", strategy="sliding_window", strategy_options={"max_messages": 1}, sinks=[recall]
    )
    memory.add({"role": "user", "content": "my puppy is called Biscuit"})
    memory.add({"role": "user", "content": "next"})
    assert any("LLMError" in w for w in memory.stats().warnings)
    assert recall.pending() == 1
    assert [h.doc.text for h in recall.search("puppy", user_id="u", mode="lexical")] == ["my puppy is called Biscuit"]
    with pytest.raises(LLMError):
        recall.add([doc(5, "direct add")])
    hybrid = recall.search("puppy", user_id="u")  # the retry fails again: lexical results, with a warning
    assert [h.doc.message_id for h in hybrid][:1] == [memory.messages()[0].id]
    assert any("still without a vector" in w for w in recall.warnings)
    embedder.broken = False
    assert recall.flush() == 2
    assert recall.pending() == 0
    assert recall.search("puppy Biscuit", user_id="u", mode="dense")[0].doc.text == "my puppy is called Biscuit"


def test_deferred_embedding_happens_at_search_not_on_archive() -> None:
    embedder = FlakyEmbedder("raise")
    embedder.broken = False
    recall = RecallIndex(embedder=embedder, defer=True, batch_size=2)
    recall.add([doc(i, t) for i, t in enumerate(CORPUS)])
    assert embedder.calls == 0
    assert recall.pending() == len(CORPUS)
    recall.search("puppy", user_id="u")
    assert recall.pending() == 0
    assert embedder.calls == 3 + 1  # three batches of two, then the query


def test_mode_needs_an_embedder() -> None:
    with pytest.raises(ConfigurationError):
        RecallIndex(mode="dense")
    with pytest.raises(ConfigurationError):
        RecallIndex().search("x", user_id="u", mode="hybrid")
    with pytest.raises(ConfigurationError):
        RecallIndex(fusion="max")  # type: ignore[arg-type]


def test_fusion() -> None:
    assert [item for item, _ in rrf([[3, 1, 2], [1, 4]])] == [1, 3, 4, 2]
    assert [item for item, _ in rrf([[1], [2]], weights=[1, 2])] == [2, 1]
    with pytest.raises(ConfigurationError, match="weights"):  # in the tree since the raise test found it
        rrf([[1]], weights=[1, 2])
    numbers, scores = zscore(
        [(np.array([0, 2]), np.array([4.0, 1.0]), 4), (np.array([0, 1, 2, 3]), np.array([0.1, 0.9, 0.2, 0.0]), 4)],
        [1.0, 1.0],
    )
    assert numbers.tolist() == [0, 1, 2, 3]
    assert int(numbers[np.argmax(scores)]) == 0
    assert zscore([(np.array([], dtype=np.int64), np.array([]), 0)], [1.0])[0].size == 0


def test_hashing_embedder_is_deterministic_across_processes() -> None:
    here = HashingEmbedder(16).embed(["the puppy ran"])
    code = (
        "from convmem.longterm.recall.embedders import HashingEmbedder\n"
        "print(HashingEmbedder(16).embed(['the puppy ran']).tolist())"
    )
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert np.allclose(here, np.array(eval(there), dtype=np.float32))
    assert np.isclose(np.linalg.norm(here), 1.0)


def test_missing_numpy_names_the_extra() -> None:
    code = "import sys; sys.modules['numpy'] = None\nimport convmem.longterm.recall.index"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert "pip install 'convmem[recall]'" in run.stderr
    plain = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['numpy'] = None\nimport convmem\nconvmem.Memory"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert plain.returncode == 0, plain.stderr  # the engine itself never needs numpy


def test_fact_enriched_keys_find_what_the_words_do_not_say() -> None:
    from convmem.longterm.facts.book import Facts

    from .fakes import RuleExtractor

    facts = Facts(extractor=RuleExtractor())
    recall = RecallIndex(keys=Keys(facts=facts))
    memory = Memory(
        max_tokens=1000,
        user_id="u",
        strategy="sliding_window",
        strategy_options={"max_messages": 1},
        sinks=[facts, recall],  # facts first, so the index sees the extracted facts
    )
    memory.add({"role": "user", "content": "remember employer = Acme Robotics"})
    memory.add({"role": "user", "content": "next"})
    hit = recall.search("employer", user_id="u", k=1)[0]
    assert hit.doc.text == "remember employer = Acme Robotics"
    assert "employer is Acme Robotics" in hit.doc.key


async def test_async_memory_feeds_the_same_sinks_and_blocks() -> None:
    from convmem import AsyncMemory
    from convmem.longterm import FactsBlock, RecallBlock
    from convmem.longterm.facts.book import AsyncFacts, Facts

    from .fakes import AsyncRuleExtractor

    recall, facts = RecallIndex(embedder=HashingEmbedder(32)), AsyncFacts(extractor=AsyncRuleExtractor())
    sync_facts = Facts()
    memory = AsyncMemory(
        max_tokens=2000,
        user_id="alice",
        strategy="sliding_window",
        strategy_options={"max_messages": 1},
        sinks=[facts, recall],
        blocks=[RecallBlock(recall, k=2), FactsBlock(sync_facts)],
    )
    sync_facts.add("Alice is left-handed", user_id="alice")
    await memory.add({"role": "user", "content": "remember city = Lisbon"})
    await memory.add({"role": "user", "content": "my bike is red"})
    await memory.add({"role": "user", "content": "ok"})
    assert [f.text for f in await facts.facts(user_id="alice")] == ["city is Lisbon"]
    ctx = await memory.context("what colour is my bike?")
    text = str(ctx.messages)
    assert "my bike is red" in text
    assert "left-handed" in text
