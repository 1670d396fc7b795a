"""The message codec is lossless: every field, every part, timestamps with microseconds and zones."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convmem import InvalidMessageError, Message
from convmem.session import SessionState, SummaryRecord
from convmem.stores.codec import (
    decode_datetime,
    decode_message,
    decode_state,
    dumps,
    encode_datetime,
    encode_message,
    encode_state,
    loads,
)
from convmem.testing import json_values, messages, rich_messages

from .._quick import examples


@settings(max_examples=examples(100))
@given(messages)
def test_a_message_survives_encoding_and_encodes_to_the_same_bytes(message: Message) -> None:
    line = dumps(encode_message(message))
    assert "\n" not in line
    back = decode_message(loads(line))
    assert back == message
    assert back.created_at == message.created_at
    assert getattr(back.created_at, "tzinfo", None) == getattr(message.created_at, "tzinfo", None)
    assert dumps(encode_message(back)) == line


@settings(max_examples=examples(100))
@given(st.dictionaries(st.text(max_size=5), json_values, max_size=4), st.integers(-1, 10**6))
def test_a_state_survives_encoding(stats: dict[str, object], start: int) -> None:
    summary = SummaryRecord("text", 0, start, 12, datetime(2024, 1, 1, 0, 0, 0, 999999, tzinfo=timezone.utc))
    state = SessionState(
        window_start=start + 1, folded_to=start, pinned_start=3, summary=summary, stats=stats, version=7
    )
    assert decode_state(loads(dumps(encode_state(state, with_version=True)))) == state
    assert decode_state(loads(dumps(encode_state(state))), version=7) == state


def test_timestamps_keep_microseconds_offsets_zones_and_naivety() -> None:
    new_york = ZoneInfo("America/New_York")
    cases = [
        datetime(2024, 3, 10, 2, 30, tzinfo=new_york),  # skipped by the spring change
        datetime(2024, 11, 3, 1, 30, tzinfo=new_york, fold=1),  # repeated in the autumn, second time
        datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=timezone(timedelta(hours=5, minutes=45))),
        datetime(2024, 1, 1, 0, 0, 0, 1),
    ]
    for when in cases:
        text = encode_datetime(when)
        back = decode_datetime(text)
        assert (back.replace(tzinfo=None), back.utcoffset(), back.tzinfo) == (
            when.replace(tzinfo=None),
            when.utcoffset(),
            when.tzinfo,
        )
        assert encode_datetime(back) == text
    assert encode_datetime(cases[1]) == "2024-11-03T01:30:00.000000-05:00[America/New_York]"
    with pytest.raises(ValueError, match="zone"):
        decode_datetime("2024-01-01T00:00:00.000000+00:00[Nowhere/Atlantis]")


def test_the_rich_messages_use_every_part_type() -> None:
    encoded = [encode_message(m) for m, _ in rich_messages()]
    part_types = {p["type"] for e in encoded for p in e.get("content", []) if isinstance(p, dict)}
    assert part_types == {"text", "image", "audio", "file"}
    assert encoded[4]["content"] == []
    assert "content" not in encoded[2]


def test_bad_input_names_the_field() -> None:
    with pytest.raises(InvalidMessageError, match="unknown field"):
        decode_message({"role": "user", "content": "x", "colour": "red"})
    with pytest.raises(InvalidMessageError, match="part type"):
        decode_message({"role": "user", "content": [{"type": "video"}]})
    with pytest.raises(InvalidMessageError, match="created_at"):
        decode_message({"role": "user", "content": "x", "created_at": "yesterday"})
    with pytest.raises(InvalidMessageError, match="role"):
        decode_message({"role": "robot", "content": "x"})
