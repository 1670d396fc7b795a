"""The phase that places the blocks: which message carries the user blocks, and what each placement costs."""

from __future__ import annotations

from convmem.messages import Message, TextPart
from convmem.policy.placement import NOTHING_PLACED, Carrier, find_carrier, place_blocks, place_carrier
from convmem.policy.placement import default_block_template as template

from ._build import WORDS, assistant, block, inputs, tools, user, window


def test_the_last_user_input_carries_before_any_window_message() -> None:
    built = window(user(3), assistant(2))
    given = inputs(Message(role="user", content="first"), Message(role="user", content="second"))
    carrier = find_carrier([*given, *inputs(Message(role="assistant", content="aside"))], built.units, 0, 2)
    assert carrier == Carrier(None, 1, given[1][0], given[1][1])


def test_the_newest_user_message_of_the_range_carries_even_with_a_tool_loop_after_it() -> None:
    built = window(user(1, "old"), assistant(1), user(2, "new"), tools(2, 3))
    carrier = find_carrier([], built.units, 0, len(built.units))
    assert carrier is not None
    assert (carrier.seq, carrier.where, carrier.message.text, carrier.tokens) == (2, 2, "new new", 4)


def test_no_carrier_when_the_range_holds_no_user_message() -> None:
    built = window(user(1), tools(1, 2), assistant(1))
    assert find_carrier([], built.units, 1, 3) is None  # the user unit lies before the range
    assert find_carrier(inputs(Message(role="assistant", content="x")), built.units, 1, 3) is None


def test_system_blocks_go_in_two_messages_by_how_often_they_change() -> None:
    stable, turn = block("rules", 4), block("recall", 3, per_turn=True)
    placed = place_blocks(WORDS, [turn, stable], template, None)
    assert placed.stable == Message(role="system", content="<rules>\nrules rules rules rules\n</rules>")
    assert placed.turn == Message(role="system", content="<recall>\nrecall recall recall\n</recall>")
    assert (placed.stable_tokens, placed.turn_tokens, placed.user_tokens) == (8, 7, 0)
    assert (placed.user_text, placed.carrier, placed.trailing, placed.carried) == (None, None, None, None)


def test_user_blocks_ride_on_the_carrier_as_a_text_part_of_their_own() -> None:
    carrier = Carrier(5, 2, Message(role="user", content="hello there"), 4)
    placed = place_blocks(WORDS, [block("recall", 3, position="user")], template, carrier)
    text = "<recall>\nrecall recall recall\n</recall>"
    assert placed.carrier == carrier
    assert placed.carried == Message(role="user", content=(TextPart(text), TextPart("hello there")))
    assert placed.user_text == text
    assert placed.user_tokens == WORDS.count_message(placed.carried) - carrier.tokens == 5
    assert (placed.stable, placed.turn, placed.trailing) == (None, None, None)


def test_without_a_carrier_user_blocks_are_a_user_message_at_the_end_never_a_system_one() -> None:
    placed = place_blocks(WORDS, [block("recall", 3, position="user", per_turn=True)], template, None)
    assert placed.trailing == Message(role="user", content="<recall>\nrecall recall recall\n</recall>")
    assert placed.user_tokens == 7  # a message of its own: its overhead is the blocks' too
    assert (placed.stable, placed.turn, placed.carrier) == (None, None, None)


def test_no_blocks_place_nothing() -> None:
    assert place_blocks(WORDS, [], template, Carrier(None, 0, Message(role="user", content="x"), 3)) is NOTHING_PLACED
    assert NOTHING_PLACED.tokens == 0


def test_place_carrier_looks_for_a_carrier_only_for_user_blocks() -> None:
    built = window(user(2), assistant(1))
    system_only = place_carrier(WORDS, [block("rules", 2)], template, [], built.units, 0, 2)
    assert (system_only.carrier, system_only.trailing) == (None, None)
    on_window = place_carrier(WORDS, [block("recall", 1, position="user")], template, [], built.units, 0, 2)
    assert on_window.carrier is not None
    assert on_window.carrier.seq == 0
    # When the range starts after the user message (it was left out), the blocks go to the end.
    moved = place_carrier(WORDS, [block("recall", 1, position="user")], template, [], built.units, 1, 2)
    assert moved.carrier is None
    assert moved.trailing == Message(role="user", content="<recall>\nrecall\n</recall>")
