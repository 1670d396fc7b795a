"""The first phase: what of an assembly can be sent, and what it costs, before anything is cut."""

from __future__ import annotations

from convmem.formats.anthropic import CONTINUATION_PLACEHOLDER
from convmem.messages import Message
from convmem.policy.context import LeftOut
from convmem.policy.draft import SummaryText, first_draft, summary_message

from ._build import WORDS, assistant, block, inputs, request, user, window


def test_the_draft_holds_everything_that_can_be_sent_and_its_exact_total() -> None:
    built = window(user(3), assistant(4), pinned=["be brief"])
    summary = summary_message("they met", 0, 1)
    summary_text = SummaryText("they met", 0, 1, WORDS.count_message(summary), summary)
    draft = first_draft(
        request(
            built,
            summary=summary_text,
            blocks=[block("rules", 2), block("recall", 1, position="user")],
            inputs=inputs(Message(role="user", content="and now")),
        )
    )
    assert (draft.start, draft.stop) == (0, 2)
    assert draft.pinned_tokens == 4  # "be brief" + 2
    assert draft.window_tokens == 5 + 6
    assert draft.input_tokens == 4
    # The system block's message, and the user block on the input (its words and tags, no overhead).
    assert draft.placed.tokens == 6 + 3
    assert draft.placed.carrier is not None
    assert draft.placed.carrier.seq is None  # the input carries
    assert draft.total == 4 + summary_text.tokens + 9 + 11 + 4
    assert (draft.left_out, draft.truncated, draft.warnings) == ((), None, ())


def test_a_unit_awaiting_results_is_left_out_after_what_eviction_left_out() -> None:
    built = window(user(2), pending=True)
    evicted = LeftOut("archived", 3, 30, 0, 2, "evicted")
    draft = first_draft(request(built, evicted=[evicted]))
    pending = built.units[-1]
    assert draft.stop == 1  # the pending unit is the last one, not sent
    assert draft.window_tokens == built.tokens - pending.tokens == 4
    assert draft.left_out == (
        evicted,
        LeftOut("pending_tool_results", 2, pending.tokens, 1, 2, "awaiting results for calls ['open1']"),
    )


def test_empty_blocks_are_not_placed() -> None:
    draft = first_draft(request(window(user(1)), blocks=[block("empty", 0), block("rules", 1)]))
    assert [b.name for b in draft.blocks] == ["rules"]
    assert draft.placed.stable == Message(role="system", content="<rules>\nrules\n</rules>")


def test_the_overhead_is_the_reply_priming_and_in_anthropic_the_continuation_placeholder() -> None:
    built = window(user(1))
    placeholder = WORDS.count_message(Message(role="user", content=CONTINUATION_PLACEHOLDER))
    assert request(built).overhead() == 3
    assert request(built, format="responses").overhead() == 3
    assert request(built, format="anthropic").overhead() == 3 + placeholder
