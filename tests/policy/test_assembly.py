"""The pipeline of phases, and its measure: the account, and the prefix shared with the previous context."""

from __future__ import annotations

from typing import Any

import pytest

from convmem.errors import ConfigurationError
from convmem.messages import Message
from convmem.policy.assembly import assemble, measure
from convmem.policy.cut import cut_irreducible
from convmem.policy.draft import first_draft
from convmem.policy.render import span

from ._build import WORDS, assistant, block, inputs, request, user, window


def test_the_account_adds_up_to_the_draft_and_the_overhead() -> None:
    built = window(user(4), assistant(4), pinned=["be brief"])
    blocks = [block("rules", 3), block("facts", 5), block("recall", 2, position="user")]
    assembly = request(built, blocks=blocks, inputs=inputs(Message(role="user", content="next one")))
    draft = first_draft(assembly)
    _, _, account = measure(assembly, draft, span(built, draft), 3, None)
    assert account.total == draft.total + 3
    assert sum(account.blocks.values()) == draft.placed.tokens
    assert (account.pinned, account.window, account.input) == (4, 12, 4)
    assert account.reused == 0  # nothing to compare with


def test_reuse_is_measured_against_the_previous_layout_of_the_same_format() -> None:
    built = window(user(4), assistant(4), pinned=["be brief"])
    previous: dict[str, object] = {}
    first = assemble(request(built, blocks=[block("rules", 3)]), previous)  # type: ignore[arg-type]
    assert set(previous) == {"openai"}
    again = assemble(request(built, blocks=[block("rules", 3)]), previous)  # type: ignore[arg-type]
    assert again.account.reused == first.account.total - first.account.overhead
    other = assemble(request(built, format="responses", blocks=[block("rules", 3)]), previous)  # type: ignore[arg-type]
    assert other.account.reused == 0  # its own format has no previous context yet
    assert set(previous) == {"openai", "responses"}


def test_a_truncated_context_shares_no_prefix_with_any_other() -> None:
    """Its pinned messages may be cut: their key is equal to no other, so no provider cache is assumed."""
    built = window(user(100), pinned=["be brief"])
    assembly = request(built)
    draft = first_draft(assembly)
    layout, _, _ = measure(assembly, draft, span(built, draft), 3, None)
    truncated = cut_irreducible(assembly, draft, 60)
    cut_layout, _, account = measure(assembly, truncated, span(built, truncated), 3, layout)
    assert account.reused == 0
    _, _, again = measure(assembly, truncated, span(built, truncated), 3, cut_layout)
    assert again.reused == 0
    assert cut_layout.first is None  # the window's range is not compared either


def test_assemble_cuts_only_when_over_and_truncates_only_what_is_still_over() -> None:
    built = window(user(30), assistant(30), user(60))  # 32, 32 and 62 tokens
    fits = assemble(request(built, budget=200))
    assert (fits.left_out, fits.truncated, fits.window) == ((), (), (0, 2))
    # Room for the newest unit and one more: the oldest go, up to the next user message.
    cut_window = assemble(request(built, budget=3 + 62 + 32))
    assert cut_window.window == (2, 2)
    assert cut_window.truncated == ()
    truncated = assemble(request(built, budget=3 + 40))
    assert truncated.truncated == ((2, 62, truncated.account.window),)
    assert truncated.tokens <= 43
    assert WORDS.count_message(Message(role="user", content=truncated.messages[-1]["content"])) <= 40


def test_an_unknown_format_is_refused_before_the_previous_layouts_change() -> None:
    built = window(user(4))
    previous: dict[str, Any] = {}
    assemble(request(built), previous)
    kept = dict(previous)
    with pytest.raises(ConfigurationError, match="unknown format 'gemini'"):
        assemble(request(built, format="gemini"), previous)
    assert previous == kept
