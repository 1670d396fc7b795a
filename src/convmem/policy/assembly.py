"""Context assembly: fit pinned + summary + blocks + window + input into the budget, exactly.

Pure: it reads the window, already-rendered block texts and the turn's tools (rendered and
counted, :mod:`convmem.policy.controls`) and returns a :class:`Context`; it never changes the
window and never does I/O.

:func:`assemble` runs four named phases, each a function of its own module with a small typed
input and output (tested alone in ``tests/policy/``):

1. **place** (:func:`~convmem.policy.draft.first_draft`, :mod:`convmem.policy.placement`): take
   what can be sent, and place the blocks: the system ones in their messages, the user ones on
   their *carrier*, the latest user message;
2. **cut** (:mod:`convmem.policy.cut`): when that does not fit, give up places in the order of
   sacrifice below, fitting the blocks first (:func:`~convmem.policy.cut.fit_blocks`);
3. **measure** (:func:`measure`): the account, and the prefix shared with the previous context;
4. **render** (:mod:`convmem.policy.render`): the messages, in order, for the format, with the
   tools and the cache marks.

The budget is spent in this order. The tool definitions go in first (every
provider sends them first, and none can be cut); then the *irreducible* part:
pinned system messages, the newest complete unit, the input and priority-0
blocks. The rest fits around it; when it does not, convmem gives up, in turn:
the lowest-priority blocks (truncated, then dropped), the oldest window units
(left out for this turn only, still active), and the summary. A block with a
``reserve`` (a recall block's reserved share of the budget) gives up only what
lies beyond it before the oldest window units go: a recalled message that
matches the input outranks the oldest turns of the window, up to the reserve.
Itemized blocks lose whole items, the lowest-ranked first. If the
irreducible part alone is too big, ``on_overflow`` decides: ``"raise"``
raises :class:`ContextOverflowError`, ``"truncate"`` cuts the largest
irreducible texts with a visible marker. The total, counted by the model's own
counter with its per-message overhead, plus the reserved output, never
exceeds the budget.

The order is chosen for providers' prompt caches, which bill a repeated
request prefix at a discount: pinned messages, then what changes rarely (the
stable system blocks, the running summary: they change at eviction), then the
window (append-only between evictions), and last what changes every turn: the
per-turn blocks, next to the newest user message (see
:mod:`convmem.policy.placement`). The account reports the prefix shared with
the previous context and where the stable parts end (:mod:`convmem.policy.prefix`).

In the common case (everything fits) assembly is O(1) in Python plus a C-level
copy of the window's cached OpenAI dicts, and O(the current tool loop) for the
user blocks and the prefix measure.

Example::

    context = assemble(Assembly(window=window, counter=counter, budget=8000, reserve=1000))
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigurationError
from ..formats import FORMATS
from ..formats._carry import Note
from .blockfit import BlockText, block_tokens
from .context import Account, Context, LeftOut
from .cut import cut, cut_irreducible
from .draft import Assembly, Draft, Overflow, SummaryText, first_draft, summary_message
from .placement import default_block_template
from .prefix import Layout, Stable, describe, reused
from .render import Span, render_request, span

__all__ = [
    "Assembly",
    "BlockText",
    "Overflow",
    "SummaryText",
    "assemble",
    "default_block_template",
    "measure",
    "summary_message",
]


def assemble(request: Assembly, previous: dict[str, Layout] | None = None) -> Context:
    """Build the context for the next request. See the module docstring for its phases and the order of sacrifice.

    ``previous`` holds the layout of the last context built in each format: the account's ``reused``
    is measured against it, and this context's layout replaces it.

    Raises:
        ConfigurationError: ``request.format`` is not one of the three.
        ContextOverflowError: the irreducible part does not fit and ``on_overflow`` is ``"raise"``, or
            it does not fit even truncated.
    """
    if request.format not in FORMATS:  # before anything is measured, so ``previous`` stays as it was
        raise ConfigurationError(f"unknown format {request.format!r}; expected openai, anthropic or responses")
    overhead = request.overhead()
    tools = request.tools  # sent first by every provider, never cut
    available = request.budget - request.reserve - overhead - tools.tokens
    draft = first_draft(request)
    if draft.total > available:
        draft = cut(request, draft, available)
    if draft.total > available:
        draft = cut_irreducible(request, draft, available)
    sent = span(request.window, draft)
    layout, stable, account = measure(
        request, draft, sent, overhead, previous.get(request.format) if previous is not None else None
    )
    if previous is not None:
        previous[request.format] = layout
    marks = stable.indexes if request.cache.marks(request.format) else ()
    rendered = render_request(request, draft, sent, marks)
    left_out, warnings = draft.left_out + tools.left_out + not_carried(rendered.notes), draft.warnings
    if rendered.estimated:
        # Opaque provider content (encrypted search results, a compaction ...) is counted by an estimate.
        account = account._replace(exact=False)
        warnings += (f"{rendered.estimated} tokens of opaque provider content are estimated (never under)",)
    return Context(
        request.format,
        rendered.messages,
        rendered.system,
        account,
        left_out,
        draft.truncations,
        sent.range,
        warnings,
        rendered.tools,
        rendered.params,
    )


def not_carried(notes: Sequence[Note]) -> tuple[LeftOut, ...]:
    """One ``not_carried`` entry per kind of thing the format left out, with how many messages held one."""
    by_what: dict[str, set[int]] = {}
    for note in notes:
        by_what.setdefault(note.what, set()).add(note.at)
    return tuple(LeftOut("not_carried", len(held), 0, None, None, what) for what, held in by_what.items())


def measure(
    request: Assembly, draft: Draft, sent: Span, overhead: int, previous: Layout | None
) -> tuple[Layout, Stable, Account]:
    """The context's layout, where its stable parts end, and its account (``reused`` measured against ``previous``).

    A truncated context's pinned part gets a key equal to no other, so nothing after it counts as reused.
    The tools come first in every provider's prompt: the layout starts with them, and every offset counts them.
    """
    window, placed, truncated = request.window, draft.placed, draft.truncated
    summary, summary_tokens = draft.summary, draft.summary_tokens
    pinned_key = (
        (len(window.pinned), window.pinned[-1].seq if window.pinned else None) if truncated is None else object()
    )
    # The inputs as sent; their tokens as given (the request's end counts the truncated ones).
    inputs = (
        request.inputs
        if truncated is None
        else list(zip(truncated.inputs, (t for _, t in request.inputs), strict=True))
    )
    tools = request.tools
    layout, stable = describe(
        tools=(tools.key, tools.tokens),
        pinned=(pinned_key, draft.pinned_tokens),
        pinned_count=len(window.pinned),
        placed=placed,
        summary=((summary.first_seq, summary.last_seq, summary.text) if summary else None, summary_tokens),
        window_range=sent.range if truncated is None else None,
        window_tokens=draft.window_tokens,
        n_window=sent.size,
        after=sent.tail,
        inputs=inputs,
        request_end=draft.pinned_tokens + summary_tokens + placed.tokens + draft.window_tokens + draft.input_tokens,
    )
    offsets = stable.offsets
    if tools.tokens:
        offsets = (tools.tokens, *(offset + tools.tokens for offset in offsets))
    counter = request.counter
    account = Account(
        request.budget,
        request.reserve,
        draft.pinned_tokens,
        summary_tokens,
        block_tokens(counter, draft.blocks, placed.tokens),
        draft.window_tokens,
        draft.input_tokens,
        overhead,
        counter.exact and tools.exact,
        counter.name,
        reused(previous, layout, draft.window_tokens, sent.tail),
        offsets,
        tools.tokens,
        previous is not None and previous.system[0] != layout.system[0],
    )
    return layout, stable, account
