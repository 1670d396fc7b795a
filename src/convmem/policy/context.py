"""What ``context()`` returns: the messages for the next request, and an account of them.

The types are immutable named tuples: one is built on every turn, and a
named tuple costs a fraction of a frozen dataclass to create.

The account answers the questions a user debugging a prompt asks: how many
tokens each part costs, what the budget was, and what was left out and why.

Example::

    ctx = memory.context()
    client.chat.completions.create(model="gpt-4o", **ctx.request())
    print(ctx.account.window, ctx.left_out)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple, TypeAlias

__all__ = ["Account", "Context", "LeftOut", "LeftOutReason", "Truncation", "evicted_account"]

LeftOutReason: TypeAlias = Literal[
    "archived",  # evicted by the strategy; still stored and searchable
    "summarized",  # evicted and folded into the running summary
    "budget",  # active, but did not fit next to the blocks and the input this time
    "pending_tool_results",  # a tool call whose results have not all arrived
    "block_truncated",  # part of a block was cut to fit
    "block_dropped",  # a whole block was cut to fit
    "tool_unsupported",  # a provider's own tool this format cannot carry (an Anthropic server tool in Chat...)
    "not_carried",  # the format cannot carry it (another provider's own item); stored, sent in its own format
]


class LeftOut(NamedTuple):
    """Something that is not (or not wholly) in the context.

    Message ranges are reported as counts and seq ranges, never as lists, so
    that the account stays O(1) however long the history is.
    """

    reason: LeftOutReason
    messages: int = 0
    tokens: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    detail: str = ""


class Truncation(NamedTuple):
    """An irreducible message that was cut to fit (``on_overflow="truncate"``)."""

    seq: int | None  # None for the input
    original_tokens: int
    tokens: int


class Account(NamedTuple):
    """Tokens per part of the context, as the model's counter counts them.

    ``reused`` is the tokens at the start of this context identical to the previous context this
    memory object built in the same format (0 for its first): the part a provider's prompt cache
    can serve. ``breakpoints`` are the token offsets where the stable parts of this context end
    (the tool definitions, the pinned messages, the system part, what the next turn sends again
    unchanged, and inside a tool loop the whole request); ``format="anthropic"`` puts its
    ``cache_control`` marks there, and so does an OpenAI model that takes ``prompt_cache_breakpoint``.

    ``tools`` is what the request's tool definitions cost (every provider sends them first, so the
    offsets count them); ``tools_changed`` says they differ from those of the previous context in
    this format: every cached prefix of that one starts with the old tools, so ``reused`` is 0.
    ``exact`` is False when the counter or the tools' count is an estimate.
    """

    budget: int
    reserved_output: int
    pinned: int
    summary: int
    blocks: Mapping[str, int]
    window: int
    input: int
    overhead: int  # reply priming, plus the Anthropic continuation placeholder if any
    exact: bool
    counter: str
    reused: int = 0
    breakpoints: tuple[int, ...] = ()
    tools: int = 0
    tools_changed: bool = False

    @property
    def total(self) -> int:
        """Tokens of the request: its tools and messages (the reserve for the reply is not included)."""
        parts = self.pinned + self.summary + sum(self.blocks.values()) + self.window + self.input
        return self.tools + parts + self.overhead

    @property
    def free(self) -> int:
        """Tokens still unused after the messages and the reserved output."""
        return self.budget - self.reserved_output - self.total


class Context(NamedTuple):
    """The messages for the next request, rendered for one provider format.

    Attributes:
        format: ``openai``, ``anthropic`` or ``responses``.
        messages: the rendered messages (OpenAI chat dicts, Anthropic messages
            or Responses input items). Treat them as read-only: convmem reuses
            rendered dicts between turns instead of building them anew.
        system: the Anthropic ``system`` parameter (None for other formats): a string, or text blocks
            when any carries ``cache_control`` or there are several system messages.
        account: tokens per part and the budget.
        left_out: what is not in the context, and why.
        truncated: irreducible messages that were cut to fit.
        window: the seq range of the window messages included, if any.
        tools: the tool definitions, in the format's shape (empty: the request has none).
        params: the request's other keyword arguments (``prompt_cache_key``, ``prompt_cache_options``,
            Anthropic's top-level ``cache_control``), if any.
    """

    format: str
    messages: list[dict[str, Any]]
    system: str | list[dict[str, Any]] | None
    account: Account
    left_out: tuple[LeftOut, ...] = ()
    truncated: tuple[Truncation, ...] = ()
    window: tuple[int, int] | None = None
    warnings: tuple[str, ...] = ()
    tools: Sequence[Mapping[str, Any]] = ()
    params: Mapping[str, Any] | None = None

    @property
    def tokens(self) -> int:
        return self.account.total

    @property
    def budget(self) -> int:
        return self.account.budget

    def request(self) -> dict[str, Any]:
        """Keyword arguments for the provider SDK call (``messages=``, ``system=`` or ``input=``, ``tools=``...)."""
        out: dict[str, Any]
        if self.format == "anthropic":
            out = {"system": self.system, "messages": self.messages} if self.system else {"messages": self.messages}
        elif self.format == "responses":
            out = {"input": self.messages}
        else:
            out = {"messages": self.messages}
        if self.tools:
            out["tools"] = list(self.tools)
        if self.params:
            out.update(self.params)
        return out


def evicted_account(counts: Mapping[str, Any], summary: tuple[int, int] | None, window_start: int) -> list[LeftOut]:
    """What eviction left out, from a memory's running counts: folded into ``summary`` (its seq range) or archived."""
    out = []
    summarized = counts["summarized_messages"]
    archived = counts["evicted_messages"] - summarized
    if summary is not None and summarized:
        out.append(
            LeftOut("summarized", summarized, counts["summarized_tokens"], *summary, "folded into the running summary")
        )
    if archived:
        tokens = counts["evicted_tokens"] - counts["summarized_tokens"]
        detail = "evicted by the strategy; stored and searchable"
        out.append(LeftOut("archived", archived, tokens, counts["first_evicted"], window_start - 1, detail))
    return out
