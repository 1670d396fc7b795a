"""What a format cannot carry of a conversation: replaced by its text where that is faithful, else left out.

What comes in: Messages (from any format) and the format a request is rendered in. What happens: each
Message is checked for what only another format holds: objects kept verbatim in another format's
``$layout`` (server tool traffic, thinking, compaction ...), calls kept verbatim as another format's
``$item`` (a Responses ``computer_call``), custom tool calls (only the two OpenAI formats have them),
a Chat reply's refusal or audio (the other formats have neither). A kept object whose text says what it
says (:func:`convmem.formats._native.faithful_text`: a compaction's summary, a search result, a text
document), a refusal and an audio reply's transcript become text parts in their place; everything else is
left out, and so are the results of a call left out, so no result is ever sent without its call. A
Message left with nothing to send is left out whole. Within its own format, a Responses
``compaction_trigger`` is sent only as the request's last item (the API takes it nowhere else), and a Chat
reply's tool call cut off mid-arguments (``finish_reason: "length"``) is never sent. A part a format has no
way to send (audio outside Chat, a file given by URL in Chat) is left out. What goes out: the
Messages to render, and a :class:`Note` for each thing left out (the memory reports them in
``Context.left_out``). A Message with nothing foreign comes back as it is (checked in O(1)).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..messages import AudioPart, FilePart, Message, Part, TextPart, ToolCall
from ._common import LAYOUT, custom_input
from ._native import ITEM, faithful_text

__all__ = ["TRUNCATED", "Note", "carry", "changes"]

_FORMATS = ("openai", "anthropic", "responses")
TRUNCATED = "$truncated"  # a Chat reply's calls cut off mid-arguments: kept, never sent as calls


class Note(NamedTuple):
    """Something of message ``at`` the format does not carry: ``what`` (``"anthropic web_search_tool_result"``)."""

    at: int
    what: str


def changes(message: Message, fmt: str) -> bool:
    """True when :func:`carry` would change ``message`` for ``fmt`` (O(1) for a text message without extras)."""
    content = message.content
    if isinstance(content, tuple) and any(_part_gone(p, fmt) for p in content):
        return True
    if fmt == "anthropic" and _empty_turn(message):
        return True
    # ``not tool_calls`` first: a text message (every add of a plain turn) then builds no generator.
    if not message.extra and (not message.tool_calls or not any(c.extra for c in message.tool_calls)):
        return False
    return _foreign(message, fmt)


def _empty_turn(message: Message) -> bool:
    """An assistant message with nothing Anthropic takes (it refuses empty content): no text, call or kept block."""
    if message.role != "assistant" or message.content or message.tool_calls:
        return False
    ns = message.extra.get("anthropic") if message.extra else None
    return not (isinstance(ns, Mapping) and LAYOUT in ns)


def _part_gone(part: Part, fmt: str) -> bool:
    """A part ``fmt`` has no way to send: audio outside Chat, a file by URL in Chat."""
    if isinstance(part, AudioPart):
        return fmt != "openai"
    return fmt == "openai" and isinstance(part, FilePart) and part.url is not None


def _foreign(message: Message, fmt: str) -> bool:
    extra = message.extra
    for other in _FORMATS:
        ns = extra.get(other)
        if not isinstance(ns, Mapping):
            continue
        if other != fmt and (LAYOUT in ns or ITEM in ns):
            return True
        if other == "openai" and (
            TRUNCATED in ns or (fmt != "openai" and (_chat_text(message, ns) or "function_call" in ns))
        ):
            return True
        if other == fmt == "responses" and any(_is_trigger(e) for e in ns.get(LAYOUT) or ()):
            return True
    return any(_call_gone(call, fmt) for call in message.tool_calls)


def carry(
    messages: Sequence[Message], fmt: str, notes: list[Note] | None = None, kept: list[int] | None = None
) -> list[Message]:
    """``messages`` as ``fmt`` can carry them (see the module docstring).

    What is left out is added to ``notes``; the index of each message carried (whole or in part), to ``kept``.
    """
    out: list[Message] = []
    gone: set[str] = set()  # the ids of the calls left out: their results follow them out
    last = len(messages) - 1
    for i, m in enumerate(messages):
        if m.role == "tool" and m.tool_call_id in gone:
            _note(notes, i, "the result of a call left out")
            continue
        carried = _carried(m, fmt, i, notes, gone, last=i == last) if changes(m, fmt) else m
        if carried is not None:
            out.append(carried)
            if kept is not None:
                kept.append(i)
    return out


def _carried(m: Message, fmt: str, i: int, notes: list[Note] | None, gone: set[str], *, last: bool) -> Message | None:
    extra = dict(m.extra)
    content: Any = m.content
    if isinstance(content, tuple) and any(_part_gone(p, fmt) for p in content):
        for part in content:
            if _part_gone(part, fmt):
                _note(notes, i, "an audio part" if isinstance(part, AudioPart) else "a file given by URL")
        content = tuple(p for p in content if not _part_gone(p, fmt))
    calls = list(m.tool_calls)
    for other in _FORMATS:
        ns = extra.get(other)
        if not isinstance(ns, Mapping):
            continue
        if other == fmt == "responses" and not last and any(_is_trigger(e) for e in ns.get(LAYOUT) or ()):
            layout = [e for e in ns[LAYOUT] if not _is_trigger(e)]
            extra[other] = {**ns, LAYOUT: layout}
            _note(notes, i, "responses compaction_trigger (sent only as the last item)")
        elif other != fmt and isinstance(ns.get(LAYOUT), list):
            content = _with_texts(content, ns[LAYOUT], other, i, notes)
        if other == "openai":
            if TRUNCATED in ns:
                _note(notes, i, "a tool call cut off mid-arguments (finish_reason length)")
            text = _chat_text(m, ns) if fmt != "openai" else None
            if text is not None and not content:
                content = (_text_part(text, ns, fmt),)
            if fmt != "openai" and isinstance(ns.get("function_call"), Mapping):
                _note(notes, i, "a legacy function_call (Chat only)")
        if other != fmt or other == "openai":
            extra[other] = _spent(extra[other])
    kept_calls: list[ToolCall] = []
    for call in calls:
        if _call_gone(call, fmt):
            gone.add(call.id)
            _note(notes, i, f"{_origin(call)} (no {fmt} equivalent)")
        else:
            kept_calls.append(call)
    if (
        not content
        and not kept_calls
        and not _own(extra, fmt)
        and not (isinstance(content, str) and m.role != "assistant")
    ):
        if m.role != "tool":
            return None  # nothing of it is sent (each thing was noted)
        content = ""  # a result whose call is sent, with nothing of its own this format takes
    return m.replace(content=content, tool_calls=tuple(kept_calls), extra=extra)


def _spent(ns: Mapping[str, Any]) -> dict[str, Any]:
    """``ns`` without what carrying replaced or left out, so that carrying the copy again changes nothing."""
    return {k: v for k, v in ns.items() if k not in (LAYOUT, ITEM, TRUNCATED)}


def _with_texts(content: Any, layout: list[Any], fmt: str, i: int, notes: list[Note] | None) -> Any:
    """``content`` with the faithful text of each kept object of ``layout`` in its place among the parts."""
    parts: list[Part] = [TextPart(content)] if isinstance(content, str) and content else list(content or ())
    out: list[Part] = []
    taken = 0
    for entry in layout:
        if entry == "p" and taken < len(parts):
            out.append(parts[taken])
            taken += 1
        elif isinstance(entry, Mapping):
            text = faithful_text(entry)
            if text:
                out.append(TextPart(text))
            else:
                _note(notes, i, f"{fmt} {entry.get('type')}")
    out += parts[taken:]
    if out == parts:
        return content
    return tuple(out)


def _chat_text(m: Message, ns: Mapping[str, Any]) -> str | None:
    """What a Chat reply says where it has no content: its refusal, or its audio's transcript."""
    if m.role != "assistant" or m.content:
        return None
    refusal = ns.get("refusal")
    if isinstance(refusal, str) and refusal:
        return refusal
    audio = ns.get("audio")
    if isinstance(audio, Mapping) and isinstance(audio.get("transcript"), str) and audio["transcript"]:
        return str(audio["transcript"])
    return None


def _text_part(text: str, ns: Mapping[str, Any], fmt: str) -> TextPart:
    if fmt == "responses" and isinstance(ns.get("refusal"), str) and ns.get("refusal"):
        return TextPart(text, extra={"responses": {"type": "refusal"}})
    return TextPart(text)


def _call_gone(call: ToolCall, fmt: str) -> bool:
    extra = call.extra
    if not extra:
        return False
    for other in _FORMATS:
        ns = extra.get(other)
        if other != fmt and isinstance(ns, Mapping) and ITEM in ns:
            return True
    return fmt == "anthropic" and custom_input(call) is not None


def _origin(call: ToolCall) -> str:
    for other in _FORMATS:
        ns = call.extra.get(other)
        if isinstance(ns, Mapping):
            item = ns.get(ITEM)
            if isinstance(item, Mapping):
                return f"{other} {item.get('type')}"
    return "a custom tool call"


def _own(extra: Mapping[str, Any], fmt: str) -> bool:
    """True when the message holds kept objects of ``fmt`` itself (then it is sent for them)."""
    ns = extra.get(fmt)
    return isinstance(ns, Mapping) and any(isinstance(e, Mapping) for e in ns.get(LAYOUT) or ())


def _is_trigger(entry: object) -> bool:
    return isinstance(entry, Mapping) and entry.get("type") == "compaction_trigger"


def notes_for(notes: list[Note] | None, index: int) -> bool:
    return notes is not None and any(note.at == index for note in notes)


def _note(notes: list[Note] | None, index: int, what: str) -> None:
    if notes is not None:
        notes.append(Note(index, what))
