"""Recall's ranking steps (feedback, neighbours, dates) and the explanation every hit carries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from convmem.errors import ConfigurationError
from convmem.longterm import RecallBlock
from convmem.longterm.blocks.base import Turn
from convmem.longterm.recall.embedders import HashingEmbedder
from convmem.longterm.recall.index import RecallDoc, RecallIndex
from convmem.longterm.recall.ranking import Tuning, dense_steps, lexical_signals
from convmem.stores.sqlite.longterm import SQLiteRecallStore

T0 = datetime(2023, 6, 27, 10, 0, tzinfo=timezone.utc)
PLAIN = Tuning(  # every step off: tests switch on one
    context_weight=0.0,
    neighbour=0.0,
    date_boost=0.0,
    when_boost=0.0,
    dense_steps=0.0,
    context_decay=0.0,
    role_boost=0.0,
    neighbour_asked=1.0,
    recency=0.0,
    session_spread=0.0,
)


def doc(i: int, text: str, *, session: str = "s1", when: datetime = T0, context: str = "") -> RecallDoc:
    return RecallDoc(f"m{i}", session, "u", i, "user", text, when + timedelta(seconds=i), text, context)


def ids(recall: RecallIndex, query: str, k: int = 5) -> list[str]:
    return [h.doc.message_id for h in recall.search(query, user_id="u", k=k)]


def index(tuning: Tuning, docs: list[RecallDoc], **options: object) -> RecallIndex:
    recall = RecallIndex(tuning=tuning, **options)  # type: ignore[arg-type]
    recall.add(docs)
    return recall


def test_neighbours_bring_in_the_reply_next_to_a_match() -> None:
    docs = [
        doc(0, "Where did you go on your camping trip?"),
        doc(1, "The Rockies, it was beautiful"),
        doc(2, "I bought a new tent for camping", session="s2"),
        doc(3, "Unrelated chatter about lunch", session="s2"),
    ]
    assert "m1" not in ids(index(PLAIN, docs), "camping trip")
    recall = index(replace(PLAIN, neighbour=0.3), docs)
    hits = recall.search("camping trip", user_id="u", k=5)
    reply = next(h for h in hits if h.doc.message_id == "m1")
    assert reply.bm25 == 0.0
    assert dict(reply.boosts)["neighbour"] == pytest.approx(0.3 * hits[0].bm25, rel=1e-5)  # type: ignore[operator]
    # m3 neighbours the weaker match m2: it comes last.
    assert [h.doc.message_id for h in hits] == ["m0", "m2", "m1", "m3"]
    # Neighbours never cross sessions: m2's neighbour is m3, not m1.
    assert recall._partitions["u"].neighbours()[0].tolist() == [-1, 0, -1, 2]


def test_neighbours_respect_filters() -> None:
    docs = [doc(0, "camping trip plans"), doc(1, "The Rockies")]
    recall = index(replace(PLAIN, neighbour=0.5), docs)
    assert ids(recall, "camping trip") == ["m0", "m1"]
    # The window excludes m1 (seq >= 1): it gets nothing, though its neighbour matches.
    hits = recall.search("camping trip", user_id="u", exclude_window=("s1", 1))
    assert [h.doc.message_id for h in hits] == ["m0"]


def test_dates_the_query_names_boost_messages_said_then_or_mentioning_it() -> None:
    docs = [
        doc(0, "Melanie painted a sunset", when=datetime(2023, 9, 2, tzinfo=timezone.utc)),
        doc(1, "Melanie painted a lake", when=datetime(2023, 10, 13, tzinfo=timezone.utc)),
        doc(2, "Melanie painted a horse last month", when=datetime(2023, 11, 20, tzinfo=timezone.utc)),
    ]
    question = "What did Melanie paint in October 2023?"
    assert ids(index(PLAIN, docs), question)[0] == "m0"  # ties: the oldest first
    recall = index(replace(PLAIN, date_boost=1.0), docs)
    hits = recall.search(question, user_id="u")
    assert [h.doc.message_id for h in hits] == ["m1", "m2", "m0"]  # said in October; mentions October
    assert dict(hits[0].boosts) == {"date": 2.0}
    assert hits[0].lexical == pytest.approx(2 * hits[0].bm25)  # type: ignore[operator]
    assert "date" not in dict(hits[2].boosts)


def test_relative_dates_in_the_query_use_now() -> None:
    docs = [
        doc(0, "We hiked a lot", when=datetime(2023, 6, 1, tzinfo=timezone.utc)),
        doc(1, "We hiked a lot", when=datetime(2023, 6, 21, tzinfo=timezone.utc)),
    ]
    recall = index(replace(PLAIN, date_boost=1.0), docs)
    assert ids(recall, "did we hike last week?")[0] == "m0"
    hits = recall.search("did we hike last week?", user_id="u", now=T0)
    assert hits[0].doc.message_id == "m1"


def test_when_questions_prefer_messages_with_a_date() -> None:
    docs = [doc(0, "Caroline loves the support group"), doc(1, "Caroline went to the support group yesterday")]
    assert ids(index(PLAIN, docs), "When did Caroline go to the support group?")[0] == "m0"
    recall = index(replace(PLAIN, when_boost=1.0), docs)
    assert ids(recall, "When did Caroline go to the support group?")[0] == "m1"
    assert ids(recall, "Does Caroline like the support group?")[0] == "m0"  # not a "when" question


def test_feedback_finds_what_the_query_does_not_say() -> None:
    docs = [
        doc(0, "I adopted a puppy named Biscuit"),
        doc(1, "Biscuit chewed my running shoes"),
        doc(2, "My running shoes are blue"),
        doc(3, "Lisbon has the best custard tarts"),
    ]
    assert "m1" not in ids(index(PLAIN, docs), "puppy")
    recall = index(replace(PLAIN, prf_docs=1, prf_terms=1, prf_weight=0.5), docs)
    hits = recall.search("puppy", user_id="u")
    assert [h.doc.message_id for h in hits] == ["m0", "m1"]
    assert "feedback" in dict(hits[1].boosts)
    assert hits[1].bm25 == 0.0


def test_context_weight_indexes_the_previous_message() -> None:
    docs = [doc(0, "Yes, last Sunday!", context="Did you go to the beach?"), doc(1, "The weather is nice")]
    assert ids(index(PLAIN, docs), "beach") == []
    assert ids(index(replace(PLAIN, context_weight=0.5), docs), "beach") == ["m0"]


def test_hits_explain_their_scores() -> None:
    docs = [doc(i, t) for i, t in enumerate(["my sister lives in Lisbon", "Lisbon tarts", "hiking in the Alps"])]
    recall = RecallIndex(embedder=HashingEmbedder(64))
    recall.add(docs)
    hybrid = recall.search("where does my sister live", user_id="u", k=2)
    top = hybrid[0]
    assert top.doc.message_id == "m0"
    assert top.bm25 is not None
    assert top.bm25 > 0
    assert top.dense is not None
    assert -1.0 <= top.dense <= 1.0
    assert top.fused == top.score
    assert top.lexical_rank == 1
    assert top.reason.startswith("rank 1 of ")
    assert "fused" in top.reason
    assert "dense" in top.reason
    explained = top.explain()
    assert explained["bm25"] == top.bm25
    assert explained["dense"] == top.dense
    assert explained["fused"] == top.fused
    lexical = recall.search("where does my sister live", user_id="u", mode="lexical")[0]
    assert lexical.dense is None
    assert lexical.fused is None
    assert lexical.score == lexical.lexical
    assert "by lexical score" in lexical.reason
    dense = recall.search("where does my sister live", user_id="u", mode="dense")[0]
    assert dense.bm25 is None
    assert dense.dense == dense.score


def test_rerank_lets_the_embedder_reorder_only_lexical_candidates() -> None:
    docs = [doc(i, t) for i, t in enumerate(["sister Lisbon", "sister nurse", "Lisbon tarts", "hiking Alps"])]
    recall = RecallIndex(embedder=HashingEmbedder(64), rerank=2, tuning=PLAIN)
    recall.add(docs)
    hits = recall.search("sister", user_id="u", k=4)
    assert {h.doc.message_id for h in hits} == {"m0", "m1"}
    full = RecallIndex(embedder=HashingEmbedder(64))
    full.add(docs)
    assert len(full.search("sister", user_id="u", k=4)) == 4
    with pytest.raises(ConfigurationError):
        RecallIndex(rerank=0)


def test_recall_block_says_why_it_dropped_candidates() -> None:
    recall = RecallIndex()
    texts = ["the locker code is 4812", "the locker code is 4812", "a locker code upstairs", "a locker"]
    recall.add([doc(i, t) for i, t in enumerate(texts)])
    block = RecallBlock(recall, k=2, order="score")
    items = block.render_items(Turn("locker code", user_id="u"))
    assert [(text.split(": ", 1)[1], rank) for text, rank in items] == [(texts[0], 1), (texts[2], 2)]
    reasons = [(d.hit.doc.message_id, d.reason) for d in block.last_dropped]
    assert reasons == [("m1", "repeats the input or a text shown above"), ("m3", "ranked below the block's k=2")]
    assert block.last_dropped[0].explain()["kept"] is False


@pytest.mark.parametrize(
    "bad",
    [{"context_weight": -1.0}, {"neighbour": -0.1}, {"k1": 0.0}, {"b": 1.5}, {"prf_docs": -1}, {"date_boost": -2.0}],
)
def test_tuning_rejects_bad_constants(bad: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        Tuning(**bad)  # type: ignore[arg-type]


def test_store_lexical_search_gets_the_same_steps(tmp_path: Path) -> None:
    docs = [
        doc(0, "Melanie painted a sunset", when=datetime(2023, 9, 2, tzinfo=timezone.utc)),
        doc(1, "Melanie painted a lake", when=datetime(2023, 10, 13, tzinfo=timezone.utc)),
        doc(2, "It was lovely", when=datetime(2023, 10, 13, 0, 1, tzinfo=timezone.utc)),
    ]
    store = SQLiteRecallStore(tmp_path / "recall.db")
    try:
        recall = RecallIndex(store=store, tuning=replace(PLAIN, date_boost=1.0, neighbour=0.5))
        recall.add(docs)
        hits = {h.doc.message_id: h for h in recall.search("What did Melanie paint in October 2023?", user_id="u")}
        assert max(hits.values(), key=lambda h: h.score).doc.message_id == "m1"
        assert hits["m2"].bm25 == 0.0  # FTS5 did not match it: the neighbour and the date brought it in
        assert dict(hits["m2"].boosts) == {"neighbour": pytest.approx(0.5 * hits["m1"].bm25), "date": 2.0}
    finally:
        store.close()


class TableEmbedder:
    """Vectors chosen per text (unit rows), so dense similarities are known exactly."""

    name, dim = "table", 3

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed(self, texts: Sequence[str]) -> Any:
        rows = np.asarray([self.table[t] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_dense_steps_apply_neighbours_and_dates_to_the_dense_signal() -> None:
    october, september = datetime(2023, 10, 13, tzinfo=timezone.utc), datetime(2023, 9, 2, tzinfo=timezone.utc)
    docs = [
        doc(0, "a quiet afternoon", when=september),
        doc(1, "the lake at dusk", when=september),
        doc(2, "the lake at dawn", when=october),
        doc(3, "nothing much", session="s2", when=october),
    ]
    query = "What did she paint in October 2023?"
    table = {
        query: [1.0, 0.0, 0.0],
        docs[0].key: [0.0, 1.0, 0.0],  # cosine 0
        docs[1].key: [0.8, 0.6, 0.0],  # cosine 0.8
        docs[2].key: [0.6, 0.8, 0.0],  # cosine 0.6, said in October
        docs[3].key: [-1.0, 0.0, 0.0],  # cosine -1: counts as 0 for its neighbours
    }
    base = replace(PLAIN, neighbour=0.5, date_boost=1.0)
    off = RecallIndex(embedder=TableEmbedder(table), tuning=base)
    on = RecallIndex(embedder=TableEmbedder(table), tuning=replace(base, dense_steps=1.0))
    for recall in (off, on):
        recall.add(docs)
    dense_off = {h.doc.message_id: h for h in off.search(query, user_id="u", k=4, mode="dense")}
    # Dense mode alone has no lexical steps: the raw cosines rank.
    assert [h.doc.message_id for h in on.search(query, user_id="u", k=4, mode="dense")] == ["m1", "m2", "m0", "m3"]
    partition = on._partitions["u"]
    signals = lexical_signals(partition, query, on.tuning, None)
    assert signals.boost.tolist() == [1.0, 1.0, 2.0, 2.0]  # October: m2, m3
    numbers = np.arange(4)
    sims = np.asarray([dense_off[f"m{i}"].dense for i in range(4)], np.float32)
    _, stepped = dense_steps(partition, (numbers, sims), signals, on.tuning)
    # m0: 0 + 0.5 x m1's 0.8; m1: 0.8 + 0.5 x max(0, 0.6); m2: (0.6 + 0.5 x 0.8) x 2; m3: (0 + 0) x 2.
    assert stepped.tolist() == pytest.approx([0.4, 1.1, 2.0, 0.0], abs=1e-6)
    assert dense_steps(partition, (numbers, sims), signals, off.tuning)[1] is sims  # off: untouched
    # In hybrid mode the October message now wins the dense signal; each hit still shows its raw cosine.
    hits = {h.doc.message_id: h for h in on.search(query, user_id="u", k=4)}
    assert hits["m2"].dense == pytest.approx(0.6, abs=1e-6)
    assert hits["m2"].dense_rank == 1
    assert {h.doc.message_id: h.dense_rank for h in off.search(query, user_id="u", k=4)}["m2"] == 2
    with pytest.raises(ConfigurationError):
        Tuning(dense_steps=-1.0)
