"""Ranking steps that adapt to a conversation's shape: context decay, filling neighbours, roles, order, spread."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem.errors import ConfigurationError
from convmem.longterm.recall.index import RecallDoc
from convmem.longterm.recall.lexical import context_weight
from convmem.longterm.recall.ranking import Tuning
from convmem.longterm.recall.steps import asked_role, asks_many, spread

from .test_ranking import PLAIN, T0, ids, index


def doc(
    i: int, text: str, *, role: str = "user", session: str = "s1", when: datetime = T0, context: str = ""
) -> RecallDoc:
    return RecallDoc(f"m{i}", session, "u", i, role, text, when + timedelta(seconds=i), text, context)


# -- the previous message's weight, by the two lengths --------------------------------------------------------
def test_context_weight_decays_only_when_the_context_is_the_longer() -> None:
    assert context_weight(0.75, 10, 10, 2.0) == 0.75
    assert context_weight(0.75, 10, 5, 2.0) == 0.75  # a short question before a longer answer: full weight
    assert context_weight(0.75, 10, 40, 0.0) == 0.75  # decay 0: off
    assert context_weight(0.75, 10, 40, 1.0) == pytest.approx(0.75 / 4)
    assert context_weight(0.75, 10, 40, 2.0) == pytest.approx(0.75 / 16)
    assert context_weight(0.75, 0, 40, 1.0) == 0.0


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 2), st.integers(0, 500), st.integers(0, 500), st.floats(0, 4))
def test_context_weight_never_grows_and_never_goes_negative(
    weight: float, own: int, context: int, decay: float
) -> None:
    assert 0.0 <= context_weight(weight, own, context, decay) <= weight


def test_a_short_turn_is_not_buried_under_a_long_previous_answer() -> None:
    answer = "Here are some ideas for your garden: tomatoes, basil, beans and more. " * 8
    docs = [
        doc(0, answer, role="assistant"),
        doc(1, "I planted roses", context=answer),  # the user's own words, after a long answer about tomatoes
        doc(2, "tomatoes grow well here", session="s2"),
    ]
    flat = index(replace(PLAIN, context_weight=0.75), docs)
    decayed = index(replace(PLAIN, context_weight=0.75, context_decay=2.0), docs)
    by_flat = {h.doc.message_id: h for h in flat.search("tomatoes", user_id="u")}
    by_decay = {h.doc.message_id: h for h in decayed.search("tomatoes", user_id="u")}
    assert by_flat["m1"].score > by_flat["m2"].score  # it outranks a turn about tomatoes on the answer's words
    assert by_decay["m1"].score < 0.1 * by_decay["m2"].score
    assert ids(decayed, "roses") == ["m1"]


# -- neighbours that pass on only the words a turn lacks ---------------------------------------------------------
def test_a_neighbour_fills_in_the_words_a_turn_lacks() -> None:
    docs = [
        doc(0, "Where did you go camping?"),
        doc(1, "The Rockies, it was beautiful"),  # says none of the words: gains the question's
        doc(2, "camping gear and a camping stove", session="s2"),
        doc(3, "camping again soon", session="s2"),  # says "camping" itself: gains nothing from m2's "camping"
    ]
    whole = index(replace(PLAIN, neighbour=0.5), docs)
    filled = index(replace(PLAIN, neighbour=0.5, neighbour_fill=True), docs)
    by_whole = {h.doc.message_id: h for h in whole.search("camping", user_id="u")}
    by_fill = {h.doc.message_id: h for h in filled.search("camping", user_id="u")}
    assert dict(by_fill["m1"].boosts)["neighbour"] == pytest.approx(0.5 * by_fill["m0"].bm25)  # type: ignore[operator]
    assert "neighbour" in dict(by_whole["m3"].boosts)
    assert "neighbour" not in dict(by_fill["m3"].boosts)
    # A turn holding some of the words gains what its neighbour scores on the others.
    docs = [doc(0, "my camping trip to the lake"), doc(1, "the lake was cold")]
    hits = {
        h.doc.message_id: h
        for h in index(replace(PLAIN, neighbour=0.5, neighbour_fill=True), docs).search("camping lake", user_id="u")
    }
    lake_only = index(PLAIN, [doc(0, "my camping trip to the lake"), doc(1, "the lake was cold")])
    camping = lake_only._partitions["u"].lexical.term_scores(["camp"])
    assert camping is not None
    assert dict(hits["m1"].boosts)["neighbour"] == pytest.approx(0.5 * float(camping[0, 0]), rel=1e-5)


def test_filled_neighbours_respect_filters() -> None:
    docs = [doc(0, "camping trip plans"), doc(1, "The Rockies")]
    recall = index(replace(PLAIN, neighbour=0.5, neighbour_fill=True), docs)
    assert ids(recall, "camping trip") == ["m0", "m1"]
    assert [h.doc.message_id for h in recall.search("camping trip", user_id="u", exclude_window=("s1", 1))] == ["m0"]
    assert ids(recall, "camping trip", k=5) == ids(recall, "camping trip", k=5)


# -- whose turns a question asks about ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("question", "role"),
    [
        ("How many bikes do I own?", "user"),
        ("Where did my sister move?", "user"),
        ("What was the hotel you recommended?", "assistant"),
        ("Can you remind me what you told me about the tax deadline?", "assistant"),
        ("In our previous conversation, which state was the example?", "assistant"),
        ("What did Caroline paint?", None),
        ("Where does Melanie live?", None),
    ],
)
def test_asked_role(question: str, role: str | None) -> None:
    assert asked_role(question) == role


def test_a_question_in_the_first_person_prefers_what_the_user_said() -> None:
    docs = [
        doc(0, "Many riders own many bikes.", role="assistant"),
        doc(1, "I own a road bike", role="user"),
    ]
    assert ids(index(PLAIN, docs), "how many bikes do I own?")[0] == "m0"
    recall = index(replace(PLAIN, role_boost=2.0), docs)
    hits = recall.search("how many bikes do I own?", user_id="u")
    assert hits[0].doc.message_id == "m1"
    assert dict(hits[0].boosts) == {"role": 3.0}
    assert ids(recall, "what bikes did you suggest?")[0] == "m0"  # the assistant's turn, asked as "you"
    assert ids(recall, "how many bikes does Sam own?")[0] == "m0"  # neither: no role is preferred


# -- newest or oldest evidence ------------------------------------------------------------------------------------
def test_order_prefers_the_newest_or_the_oldest_as_asked() -> None:
    docs = [
        doc(0, "I drive a red Honda", when=T0),
        doc(1, "I drive a blue Tesla now", when=T0 + timedelta(days=90)),
        doc(2, "my commute is long", when=T0 + timedelta(days=180)),
    ]
    recall = index(replace(PLAIN, recency=1.0), docs)
    current = recall.search("what car do I currently drive?", user_id="u")
    assert current[0].doc.message_id == "m1"
    assert dict(current[0].boosts)["order"] == pytest.approx(1.5)  # halfway from the oldest to the newest
    before = recall.search("what car did I drive before?", user_id="u")
    assert before[0].doc.message_id == "m0"
    assert dict(before[0].boosts)["order"] == pytest.approx(2.0)
    plain = recall.search("what car do I drive?", user_id="u")
    assert all("order" not in dict(h.boosts) for h in plain)


# -- the spread over sittings -------------------------------------------------------------------------------------
def test_spread_takes_hits_from_more_sittings() -> None:
    ranked = [(0, 10.0), (1, 9.0), (2, 8.0), (3, 7.0)]
    assert spread(ranked, [1, 1, 1, 2], 1.0, 3) == ([(0, 10.0), (1, 9.0), (2, 8.0)], {})
    picked, lowered = spread(ranked, [1, 1, 1, 2], 0.5, 3)
    assert [n for n, _ in picked] == [0, 3, 1]  # m3's sitting had nothing yet; m1 then m2 are halved
    assert lowered == {1: 0.5}
    assert picked[2] == (1, 4.5)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0.01, 100), st.integers(0, 4)), min_size=1, max_size=30),
    st.floats(0.1, 1.0),
    st.integers(1, 30),
)
def test_spread_keeps_every_candidate_once_and_the_best_first(
    rows: list[tuple[float, int]], factor: float, k: int
) -> None:
    ranked = sorted(((i, s) for i, (s, _) in enumerate(rows)), key=lambda p: -p[1])
    sittings = [rows[n][1] for n, _ in ranked]
    picked, lowered = spread(ranked, sittings, factor, k)
    assert len(picked) == min(k, len(ranked))
    assert len({n for n, _ in picked}) == len(picked)
    assert picked[0] == ranked[0]  # nothing was taken before the first pick
    assert all(0 < m < 1 for m in lowered.values())


def test_spread_in_a_search_reaches_another_session() -> None:
    docs = [
        doc(0, "wedding of my cousin, a lovely wedding", session="a"),
        doc(1, "the wedding cake was great", session="a"),
        doc(2, "wedding photos from the wedding", session="a"),
        doc(3, "another wedding in June", session="b", when=T0 + timedelta(days=30)),
    ]
    plain = ids(index(PLAIN, docs), "wedding", k=2)
    assert "m3" not in plain  # both from session a
    recall = index(replace(PLAIN, session_spread=0.5), docs)
    hits = recall.search("wedding", user_id="u", k=2)
    assert [h.doc.message_id for h in hits] == [plain[0], "m3"]
    assert "session" not in dict(hits[1].boosts)  # the first of its sitting: not lowered
    with pytest.raises(ConfigurationError):
        Tuning(session_spread=1.0)
    with pytest.raises(ConfigurationError):
        Tuning(recency=-1.0)


@pytest.mark.parametrize(
    ("question", "many"),
    [
        ("How many weddings have I attended in this year?", True),
        ("How much money did I raise in total through all the charity events?", True),
        ("What is the total distance of the hikes I did on two consecutive weekends?", True),
        ("What is the average GPA of my undergraduate and graduate studies?", True),
        ("How much older am I than the average age of employees in my department?", True),
        ("How much earlier do I wake up on Fridays compared to other weekdays?", True),
        ("How many different museums or galleries did I visit in December?", True),
        ("What did Caroline paint?", False),
        ("Where did I park my car?", False),
        ("When did Melanie go camping?", False),
        ("What is my current job title?", False),
    ],
)
def test_asks_many_reads_questions_that_count_total_or_compare(question: str, many: bool) -> None:
    assert asks_many(question) is many


def test_spread_many_spreads_only_the_questions_that_count() -> None:
    docs = [
        doc(0, "wedding of my cousin, a lovely wedding", session="a"),
        doc(1, "the wedding cake was great", session="a"),
        doc(2, "wedding photos from the wedding", session="a"),
        doc(3, "another wedding in June", session="b", when=T0 + timedelta(days=30)),
    ]
    recall = index(replace(PLAIN, session_spread=0.5, spread_many=True), docs)
    counted = [h.doc.message_id for h in recall.search("how many weddings?", user_id="u", k=2)]
    assert "m3" in counted  # spread: the other session is reached
    one = [h.doc.message_id for h in recall.search("the wedding", user_id="u", k=2)]
    assert one == ids(index(PLAIN, docs), "the wedding", k=2)  # not spread: the plain ranking
    assert "m3" not in one


def test_a_question_naming_a_role_can_leave_the_neighbours_out() -> None:
    docs = [
        doc(0, "I bought a kayak", role="user"),
        doc(1, "Kayaks are great! Paddle, kayak, lake, kayak safety tips.", role="assistant"),
        doc(2, "Nice weather today", role="user"),
    ]
    tuning = replace(PLAIN, neighbour=0.5, role_boost=1.0)
    shared = {h.doc.message_id: h for h in index(tuning, docs).search("what kayak did I buy?", user_id="u")}
    assert "neighbour" in dict(shared["m2"].boosts)  # m2 gains from the assistant's kayak turn
    alone = index(replace(tuning, neighbour_asked=0.0), docs)
    hits = {h.doc.message_id: h for h in alone.search("what kayak did I buy?", user_id="u")}
    assert all("neighbour" not in dict(h.boosts) for h in hits.values())
    third = {h.doc.message_id: h for h in alone.search("what kayak did Sam buy?", user_id="u")}
    assert "neighbour" in dict(third["m2"].boosts)  # a question naming no role: neighbours as usual
