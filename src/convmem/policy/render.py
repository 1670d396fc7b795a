"""Render a context that fits: its messages in the order providers' prompt caches reward, in its format.

What comes in: a :class:`~convmem.policy.draft.Draft` that fits, and where Anthropic's cache marks go.
What happens: :func:`ordered` lays the messages out: the pinned messages, the stable system blocks,
the per-turn system blocks, the note of the blocks whose text users, tools or models wrote and the running
summary (user-position notes, never system messages), the
window units sent (the user blocks prepended to their carrier), the inputs, and the trailing user
blocks when no user message carries them. :func:`render` renders that list for the format;
:func:`render_request` adds the tools and the cache marks (:mod:`convmem.policy.controls`). An
OpenAI context built from what the window caches skips the list: it copies the window's rendered
Chat dicts (a C-level slice) and renders only what changes (the system parts, the carrier, the
inputs). What goes out: the request's messages and, for Anthropic, its ``system``; with
:func:`render_request`, its tools and other keyword arguments too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from typing import Any, NamedTuple

from ..errors import ConfigurationError
from ..formats import sent_estimate
from ..formats._carry import Note, carry
from ..messages import Message
from .draft import Assembly, Draft
from .placement import Placed, with_prefix
from .prefix import WindowTail
from .units import Window

__all__ = ["RenderedRequest", "Span", "ordered", "render", "render_request", "span"]


class Rendered(NamedTuple):
    """A request as rendered: its messages, its Anthropic ``system``, what the format could not carry
    (:class:`convmem.formats._carry.Note`) and the tokens of opaque content its account estimates."""

    messages: list[dict[str, Any]]
    system: str | list[dict[str, Any]] | None
    notes: list[Note]
    estimated: int


class RenderedRequest(NamedTuple):
    """A request as sent: its messages, its Anthropic ``system``, its tools and its other keyword arguments,
    what the format could not carry and the tokens of opaque content its account estimates (as :class:`Rendered`)."""

    messages: list[dict[str, Any]]
    system: str | list[dict[str, Any]] | None
    tools: Sequence[Mapping[str, Any]]
    params: dict[str, Any] | None
    notes: list[Note]
    estimated: int


class Span(NamedTuple):
    """The window messages a context sends (those of units ``start`` to ``stop``, by position in the window).

    Attributes:
        range: their first and last seq, or None when none is sent.
        size: how many they are.
        end: how many window messages precede the unit awaiting results (all of them when none does).
        tail: the messages after the carrier, counted from the end back.
    """

    range: tuple[int, int] | None
    size: int
    end: int
    tail: WindowTail


def span(window: Window, draft: Draft) -> Span:
    """The window messages ``draft`` sends. O(1), plus O(start) when the oldest units are left out."""
    units, start, stop = window.units, draft.start, draft.stop
    carrier = draft.placed.carrier
    tail = WindowTail(units, start, stop, carrier.where if carrier is not None and carrier.seq is not None else None)
    pending = window.pending
    end = len(window.rendered) - (len(pending.entries) if pending is not None else 0)
    window_range = (units[start].first_seq, units[stop - 1].last_seq) if stop > start else None
    return Span(window_range, end - _flat_offset(units, start), end, tail)


def ordered(request: Assembly, draft: Draft, sent: Span) -> list[Message]:
    """The messages of the context, in the order they are sent (see the module docstring)."""
    window, placed, truncated = request.window, draft.placed, draft.truncated
    units, start, stop = window.units, draft.start, draft.stop
    if truncated is None:
        pinned = [e.message for e in window.pinned]
        newest = [e.sent for e in units[stop - 1].entries] if stop > start else []
        inputs = [m for m, _ in request.inputs]
    else:
        pinned, newest, inputs = truncated.pinned, truncated.newest, truncated.inputs
    head = [*pinned, *_system_parts(draft)]
    body = [m for u in islice(units, start, max(start, stop - 1)) for m in u.sent] + newest
    carrier = placed.carrier
    if carrier is not None and carrier.seq is not None:
        position = len(body) - sent.tail.entries_after_carrier - 1
        body[position] = with_prefix(body[position], placed.user_text or "")
    messages = head + body + _with_carrier(inputs, placed)
    if placed.trailing is not None:
        messages.append(placed.trailing)
    return messages


def render(request: Assembly, draft: Draft, sent: Span, marks: Sequence[int] = ()) -> Rendered:
    """The request's messages in ``request.format``, and its Anthropic ``system`` (None in other formats).

    ``marks`` are the indexes in :func:`ordered` of the messages an Anthropic ``cache_control`` ends.

    Raises:
        ConfigurationError: the format is not one of :data:`convmem.formats.FORMATS`.
    """
    if request.format == "openai" and request.render_openai is not None and draft.truncated is None:
        notes: list[Note] = []
        return Rendered(_from_cache(request, draft, sent, request.render_openai, notes), None, notes, 0)
    return _render(request.format, ordered(request, draft, sent), marks, request.vendor)


def render_request(request: Assembly, draft: Draft, sent: Span, marks: Sequence[int] = ()) -> RenderedRequest:
    """The whole request: :func:`render`'s messages with the tools and the cache controls of ``request.cache``.

    ``marks`` (indexes in :func:`ordered`, priority order) become Anthropic ``cache_control`` marks (the last
    tool takes one too, and the automatic one its place among the four), or OpenAI
    ``prompt_cache_breakpoint`` parts for a model that takes them (:mod:`convmem.formats._breakpoints`).

    Raises:
        ConfigurationError: the format is not one of :data:`convmem.formats.FORMATS`, or a cache option
            it does not take.
    """
    cache, tools, format = request.cache, request.tools.rendered, request.format
    params = cache.params(format) or None
    if format == "anthropic":
        from ..formats.anthropic import _marks as _anthropic_marks

        notes: list[Note] = []
        kept: list[int] = []
        carried = carry(ordered(request, draft, sent), format, notes, kept)
        position = {index: at for at, index in enumerate(kept)}  # a message left out whole: marks move on
        marked = _anthropic_marks.render(
            carried,
            [position[i] for i in marks if i in position],
            drop_names=True,  # a name is counted, never refused; system blocks keep their cache_control
            tools=tools,
            mark_tools=bool(cache.breakpoints),
            ttl=cache.ttl,
            automatic=cache.breakpoints == "automatic",
        )
        top = {"cache_control": marked.cache_control} if marked.cache_control is not None else None
        request_ = marked.request
        return RenderedRequest(list(request_.messages), request_.system, marked.tools, top, notes, _estimated(carried))
    if not marks:
        plain = render(request, draft, sent)
        return RenderedRequest(plain.messages, None, tools, params, plain.notes, plain.estimated)
    from ..formats import _breakpoints

    if format == "openai" and request.render_openai is not None and draft.truncated is None:
        notes = []
        messages = _from_cache(request, draft, sent, request.render_openai, notes)
        ends, estimated = list(marks), 0  # one dict each
    else:
        listed = ordered(request, draft, sent)
        rendered = _render(format, listed, vendor=request.vendor)
        messages, notes, estimated = rendered.messages, rendered.notes, rendered.estimated
        ends = [_item_end(format, listed, index, len(messages)) for index in marks]
    placed = _breakpoints.place(messages, ends, cache.openai_limit(), format)
    return RenderedRequest(placed, None, tools, params, notes, estimated)


def _item_end(format: str, messages: list[Message], index: int, total: int) -> int:
    """The index of the last rendered item of ``messages[index]`` (a message may render as several).

    Rendering is message by message, so the items before (or after) it are those of the messages before
    (after) it: the shorter side is rendered. Chat is counted from the start: a tool result's moved
    images follow the last result of the call.
    """
    if format == "openai" or index < len(messages) // 2:
        return len(_render(format, messages[: index + 1])[0]) - 1
    return total - len(_render(format, messages[index + 1 :])[0]) - 1


def _system_parts(draft: Draft) -> list[Message]:
    """What comes after the pinned messages and before the window: the stable system blocks, the per-turn system
    blocks, the note of the blocks whose text is not the application's (a user note), the summary (a user note,
    :func:`~convmem.policy.draft.summary_message`, or a provider's compaction)."""
    placed, summary = draft.placed, draft.summary
    # Every system message comes before the notes (some chat templates take system messages only at the start).
    return [m for m in (placed.stable, placed.turn, placed.note, summary and summary.message) if m]


def _from_cache(
    request: Assembly,
    draft: Draft,
    sent: Span,
    render_openai: Callable[[Message], dict[str, Any]],
    notes: list[Note],
) -> list[dict[str, Any]]:
    """An OpenAI context from the window's cached Chat dicts: only what changes is rendered.

    The window holds nothing Chat cannot carry (such a message has no cached dict, and then this path is
    not taken); the summary (a provider's compaction) and the inputs may, and are carried.
    """
    window, placed = request.window, draft.placed
    messages = [_cached(e, render_openai) for e in window.pinned] if window.pinned else []
    messages += [render_openai(m) for m in carry(_system_parts(draft), "openai", notes)]
    offset = len(messages)
    if sent.size == sent.end == len(window.rendered):  # the whole window: extending from the deque skips islice
        messages += window.rendered  # type: ignore[arg-type]
    else:
        messages += islice(window.rendered, sent.end - sent.size, sent.end)  # type: ignore[arg-type]
    carrier = placed.carrier
    if carrier is not None and carrier.seq is not None and placed.carried is not None:
        messages[offset + sent.size - sent.tail.entries_after_carrier - 1] = render_openai(placed.carried)
    if request.inputs:
        inputs = carry(_with_carrier([m for m, _ in request.inputs], placed), "openai", notes)
        messages += [render_openai(m) for m in inputs]
    if placed.trailing is not None:
        messages.append(render_openai(placed.trailing))
    return messages


def _with_carrier(inputs: list[Message], placed: Placed) -> list[Message]:
    carrier = placed.carrier
    if carrier is None or carrier.seq is not None:
        return inputs
    out = list(inputs)
    out[carrier.where] = with_prefix(out[carrier.where], placed.user_text or "")
    return out


def _cached(entry: Any, render: Callable[[Message], dict[str, Any]]) -> dict[str, Any]:
    if entry.rendered is None:
        entry.rendered = render(entry.message)
    rendered: dict[str, Any] = entry.rendered
    return rendered


def _flat_offset(units: Any, index: int) -> int:
    """Number of messages in the first ``index`` units (O(index), only off the common path)."""
    if index == 0:
        return 0
    return sum(len(u.entries) for u in islice(units, 0, index))


def _render(format: str, messages: list[Message], marks: Sequence[int] = (), vendor: str | None = None) -> Rendered:
    """Render for ``format`` what it can carry; the indexes of ``marks`` follow the messages carried."""
    from ..formats import openai, responses

    if format not in ("openai", "anthropic", "responses"):
        raise ConfigurationError(f"unknown format {format!r}; expected openai, anthropic or responses")
    notes: list[Note] = []
    kept: list[int] = []
    carried = carry(messages, format, notes, kept)
    estimated = _estimated(carried)
    if format == "openai":
        # a tool result's images move to a user message
        return Rendered(openai.to_openai_messages(carried, vendor=vendor), None, notes, estimated)
    if format == "anthropic":
        from ..formats.anthropic import _marks as _anthropic_marks

        # A name is counted, never refused; system blocks keep their cache_control.
        position = {index: at for at, index in enumerate(kept)}  # a message left out whole: marks move on
        request = _anthropic_marks.render(carried, [position[i] for i in marks if i in position], drop_names=True)
        return Rendered(list(request.request.messages), request.request.system, notes, estimated)
    return Rendered(responses.to_responses(carried, drop_names=True), None, notes, estimated)


def _estimated(carried: Sequence[Message]) -> int:
    """The tokens of opaque provider content (encrypted, compacted) in what is sent: estimated, never counted."""
    return sum(sent_estimate(m) for m in carried if m.extra or m.tool_calls)
