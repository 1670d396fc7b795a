"""Turn replays over HTTP: each turn is the context the service served then, built once, incrementally.

The ground truth is what ``POST .../context`` answered right after each add,
with the user's working blocks as they were then (a capped block is edited
between adds, so its claim changes what is evicted and summarized). Every
turn the inspector can ask for, in any order, must give that context with
``exact: true``; what was replayed once is not replayed again.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convmem.longterm.blocks.store import BlockRecord
from convmem.server import replay as replay_module

from .._quick import examples
from .conftest import Api, make_api

USER = "replayer"
Q = {"user_id": USER}
OPTIONS = {"model": "gpt-4o", "max_tokens": 420, "max_output_tokens": 60, "strategy": "summary_buffer"}
NUMBERS = itertools.count()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Any:
    made = make_api(tmp_path_factory.mktemp("replays"))
    yield made
    made.http.close()
    made.service.close()


def auth(api: Api) -> dict[str, str]:
    return api.headers(api.key_a)


def create(api: Api, user: str = USER) -> str:
    sid = f"s{next(NUMBERS)}"
    response = api.http.post("/v1/sessions", params={"user_id": user}, json={**OPTIONS, "id": sid}, headers=auth(api))
    assert response.status_code == 201, response.text
    return sid


def put_block(api: Api, value: str, max_tokens: int | None, user: str = USER) -> None:
    current = api.http.get("/v1/blocks/notes", params={"user_id": user}, headers=auth(api))
    version = current.json()["version"] if current.status_code == 200 else 0
    body = {"value": value, "expected_version": version, "max_tokens": max_tokens}
    response = api.http.put("/v1/blocks/notes", params={"user_id": user}, json=body, headers=auth(api))
    assert response.status_code == 200, response.text


def add(api: Api, sid: str, texts: list[str], user: str = USER) -> None:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
    response = api.http.post(
        f"/v1/sessions/{sid}/messages", params={"user_id": user}, json={"messages": messages}, headers=auth(api)
    )
    assert response.status_code == 201, response.text


def served(api: Api, sid: str, user: str = USER) -> dict[str, Any]:
    response = api.http.post(f"/v1/sessions/{sid}/context", params={"user_id": user}, json={}, headers=auth(api))
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def turn(api: Api, sid: str, seq: int, user: str = USER) -> dict[str, Any]:
    response = api.http.get(f"/v1/sessions/{sid}/turns/{seq}", params={"user_id": user}, headers=auth(api))
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def same_context(replayed: dict[str, Any], live: dict[str, Any]) -> None:
    """What the model got, to the token. Not ``account.reused``: that is the prefix the serving memory shared
    with its own previous context (a kept memory's cache accounting), which a replay has no previous of."""
    for name in ("messages", "system", "left_out", "truncated", "window", "request"):
        assert replayed[name] == live[name], name
    assert {**replayed["account"], "reused": 0} == {**live["account"], "reused": 0}
    assert replayed["account"]["reused"] == 0


def text(n: int, words: int) -> str:
    return " ".join(f"w{n}x{i}" for i in range(words))


# A step: ("add", sizes of the batch's messages) or ("block", words, cap).
STEP = st.one_of(
    st.tuples(st.just("add"), st.lists(st.integers(3, 60), min_size=1, max_size=3)),
    st.tuples(st.just("block"), st.integers(1, 6), st.sampled_from([None, 30, 80])),  # within the cap
)


@pytest.mark.slow
@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# At least one add: a session of block edits alone has no turn to replay.
@given(
    steps=st.lists(STEP, min_size=4, max_size=24).filter(lambda steps: any(s[0] == "add" for s in steps)),
    order=st.randoms(use_true_random=False),
)
def test_every_turn_is_the_context_served_then_with_the_blocks_of_then(shared: Api, steps: Any, order: Any) -> None:
    user = f"u{next(NUMBERS)}"  # a user of its own: blocks are per user
    sid = create(shared, user)
    truth: dict[int, dict[str, Any]] = {}
    seq = -1
    for n, step in enumerate(steps):
        if step[0] == "block":
            put_block(shared, text(n, step[1]), step[2], user)
            continue
        add(shared, sid, [text(n * 10 + i, size) for i, size in enumerate(step[1])], user)
        seq += len(step[1])
        truth[seq] = served(shared, sid, user)
    seqs = list(truth)
    order.shuffle(seqs)
    for at in seqs:
        got = turn(shared, sid, at, user)
        assert got["exact"] is True, got["notes"]
        same_context(got["context"], truth[at])
    assert turn(shared, sid, seqs[0], user) == turn(shared, sid, seqs[0], user)


def test_a_capped_block_edited_later_does_not_change_the_past(api: Api) -> None:
    """The issue's case: today's blocks fed into every past add showed a summary the model never got."""
    sid = create(api)
    put_block(api, "short note", 120)
    truth = {}
    for i in range(14):
        add(api, sid, [text(i, 30)])
        truth[i] = served(api, sid)
    put_block(api, "a longer note now", 40)  # a smaller claim: more of the window would have fit
    for i in (3, 9, 12):
        got = turn(api, sid, i)
        assert got["exact"] is True
        assert any("notes v1" in note for note in got["notes"])
        same_context(got["context"], truth[i])
    assert turn(api, sid, 13)["context"]["account"]["blocks"] == truth[13]["account"]["blocks"]


def test_a_block_version_the_service_did_not_record_makes_the_replay_inexact(api: Api) -> None:
    sid = create(api)
    for i in range(6):
        add(api, sid, [text(i, 20)])
    scope = f"tenant-a:{USER}"
    api.service.backend.blocks.save_block(
        BlockRecord(scope, "persona", "set behind the service", 0), expected_version=0
    )
    for seq in (2, 5):
        got = turn(api, sid, seq)
        assert got["exact"] is False
        assert any("'persona' is at version 1, which the service did not record" in n for n in got["notes"])


def test_what_was_replayed_once_is_not_replayed_again(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay_module, "CHECKPOINT_EVERY", 4)
    sid = create(api)
    for i in range(40):
        add(api, sid, [text(i, 12)])
    replays = api.service.sessions.replays
    turn(api, sid, 39)  # the last turn: the live session's context, no replay
    assert replays.replayed_batches == 0
    summaries = api.http.get(f"/v1/sessions/{sid}/summaries", params=Q, headers=auth(api)).json()
    assert replays.replayed_batches == 40
    assert summaries, "the session folded"
    for seq in (20, 5, 33, 20, 0):
        turn(api, sid, seq)
    assert replays.replayed_batches == 40  # turns are built from checkpoints beside the line, never the line again
    for i in range(40, 44):
        add(api, sid, [text(i, 12)])
    turn(api, sid, 42)
    assert replays.replayed_batches == 43  # only the new batches, not the whole session again
    again = api.http.get(f"/v1/sessions/{sid}/summaries", params=Q, headers=auth(api)).json()
    assert again[: len(summaries)] == summaries


def test_a_turn_past_the_end_is_refused_before_any_replay(api: Api) -> None:
    sid = create(api)
    for i in range(5):
        add(api, sid, [text(i, 8)])
    for seq in (5, 9007199254740992):
        response = api.http.get(f"/v1/sessions/{sid}/turns/{seq}", params=Q, headers=auth(api))
        assert response.status_code == 422, response.text
        assert "run up to 4" in response.json()["detail"]
    assert api.service.sessions.replays.replayed_batches == 0


def test_a_rollback_then_new_messages_starts_the_line_over(api: Api) -> None:
    sid = create(api)
    add(api, sid, [text(0, 10)])
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "name": "f", "arguments": "{}"}]}
    for i in range(1, 6):
        add(api, sid, [text(i, 10)])
    turn(api, sid, 3)
    body = {"messages": [call], "format": "convmem"}
    assert api.http.post(f"/v1/sessions/{sid}/messages", params=Q, json=body, headers=auth(api)).status_code == 201
    turn(api, sid, 5)
    assert api.http.post(f"/v1/sessions/{sid}/rollback", params=Q, headers=auth(api)).status_code == 200
    truth = {}
    for i in range(7, 10):
        add(api, sid, [text(i, 10)])
        truth[i] = served(api, sid)
    for seq in (7, 8):
        got = turn(api, sid, seq)
        same_context(got["context"], truth[seq])
        assert any("seqs have gaps" in n for n in got["notes"])


def test_a_turn_inside_a_batch_says_it_is_not_exact(api: Api) -> None:
    sid = create(api)
    add(api, sid, [text(0, 10), text(1, 10), text(2, 10)])
    add(api, sid, [text(3, 10)])
    got = turn(api, sid, 1)
    assert got["exact"] is False
    assert any("added in one call" in n for n in got["notes"])
    assert turn(api, sid, 2)["exact"] is True


def test_the_replay_cache_is_bounded(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    from convmem.server import replays

    monkeypatch.setattr(replays, "MAX_ROWS", 7)
    monkeypatch.setattr(replays, "MAX_CONTEXTS", 3)
    sids = [create(api) for _ in range(3)]
    for sid in sids:
        for i in range(6):
            add(api, sid, [text(i, 6)])
        turn(api, sid, 2)
        turn(api, sid, 3)
    cache = api.service.sessions.replays
    assert len(cache._entries) == 1  # each line replayed seqs 0..3: two would hold 8 rows
    assert len(cache._contexts) == 3


def test_turns_between_sparse_checkpoints_are_the_served_ones(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay_module, "CHECKPOINT_EVERY", 3)  # turns replay up to two batches past a checkpoint
    sid = create(api)
    truth = {}
    seq = -1
    for i in range(20):
        if i in (5, 13):
            put_block(api, text(i, 3 + i // 4), 30 + i)
        add(api, sid, [text(i, 25)] * (1 + i % 2))
        seq += 1 + i % 2
        truth[seq] = served(api, sid)
    for at in sorted(truth, reverse=True):
        got = turn(api, sid, at)
        assert got["exact"] is True, got["notes"]
        same_context(got["context"], truth[at])


def test_a_long_replay_answers_how_far_it_got_and_continues_when_asked_again(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    from convmem.server import replays

    monkeypatch.setattr(replays, "WAIT", 0.0)  # give up after one chunk
    monkeypatch.setattr(replays, "CHUNK", 5)
    sid = create(api)
    truth = {}
    for i in range(30):
        add(api, sid, [text(i, 15)])
        truth[i] = served(api, sid)
    progress = []
    while True:
        response = api.http.get(f"/v1/sessions/{sid}/turns/22", params=Q, headers=auth(api))
        if response.status_code == 200:
            break
        assert response.status_code == 503, response.text
        problem = response.json()
        assert problem["type"].endswith("/replay-pending")
        assert problem["last_seq"] == 29
        progress.append(problem["replayed_to"])
    assert progress == [4, 9, 14, 19]  # each request moved the line on by one chunk, none started over
    same_context(response.json()["context"], truth[22])
    pending = api.http.get(f"/v1/sessions/{sid}/summaries", params=Q, headers=auth(api))
    assert (pending.status_code, pending.json()["replayed_to"]) == (503, 27)
