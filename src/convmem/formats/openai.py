"""OpenAI Chat Completions messages <-> :class:`~convmem.messages.Message`, losslessly.

One Chat Completions message dict is one Message::

    to_openai(from_openai(d)) == d        # every valid *request* dict d
    from_openai(to_openai(m)) == m        # every Message m the format can express

A reply's fields that a request does not take (``annotations``, an empty ``refusal``,
``audio`` beyond its ``id``, unknown keys) are kept in ``extra["openai"]`` -- the
stored message and its export keep them -- but never rendered: the request type
refuses them. An assistant's non-empty ``refusal``, legacy ``function_call`` and
audio ``id`` are sent (and counted). A tool result's images cannot ride in a Chat
tool message: :func:`to_openai_messages` moves them into a user message after the
results (:func:`moved_images`); :func:`to_openai` refuses such a message alone.

Mapping:

* ``content`` a string stays a string; a list stays a tuple of parts (a list of one
  text part is still a list). ``text`` -> TextPart, ``image_url`` -> ImagePart (a
  ``data:<type>;base64,`` URL becomes ``data`` + ``media_type``, any other URL stays
  ``url``), ``input_audio`` -> AudioPart, ``file`` -> FilePart (``file_data`` split
  like a data URL when it is one), ``refusal`` -> TextPart with
  ``extra={"openai": {"type": "refusal"}}``.
* ``tool_calls[i]`` -> ToolCall; ``type`` must be ``"function"`` (custom tools raise).
* Everything else (``refusal``, ``audio``, ``annotations``, ``function_call``, keys
  of nested objects ...) is kept verbatim in ``extra["openai"]`` following the
  scheme described in ``convmem.formats._common``; ``"content": null`` and
  ``"tool_calls": []`` are kept there as well, so they come back as they were.

Raises InvalidMessageError (naming the field) for: unknown roles and part types,
non-function tool calls, arguments that are not JSON, tool messages without
``tool_call_id``, a local image ``path`` and file parts given by ``url``.
``metadata``, ``id``, ``created_at``, ``width`` and ``height`` are never rendered.

Example::

    m = from_openai({"role": "user", "content": "hi"})
    assert to_openai(m) == {"role": "user", "content": "hi"}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import InvalidMessageError
from ..messages import AudioPart, FilePart, ImagePart, Message, Part, TextPart, ToolCall
from ._common import (
    audio_from,
    batch,
    each,
    emit,
    fail,
    file_data_from,
    file_data_to,
    image_from_url,
    image_url_to,
    keep_nested,
    listing,
    mapping,
    namespace,
    required_str,
    string,
    unknown,
    wrap,
)
from ._common import parts as content_parts

__all__ = ["from_openai", "from_openai_messages", "to_openai", "to_openai_messages"]

FMT = "openai"
_PLAIN_ROLES = frozenset({"system", "developer", "user", "assistant"})
_MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id"})


# --- dict -> Message ---------------------------------------------------------------------------


def from_openai(d: Mapping[str, Any]) -> Message:
    """Parse one Chat Completions message dict.

    Args:
        d: a message such as ``{"role": "user", "content": "hi"}``.

    Returns:
        The equivalent Message; unmodelled keys are kept in ``extra["openai"]``.

    Raises:
        InvalidMessageError: the dict is not a valid message; ``field`` names the key.
    """
    # Fast path: the plain text message that makes up most of every conversation.
    if type(d) is dict and len(d) == 2:
        text = d.get("content")
        role = d.get("role")
        if type(text) is str and role in _PLAIN_ROLES:
            return Message(role=role, content=text)
    d = mapping(d, "message")
    role = required_str(d, "role", "role")
    raw = d.get("content")
    content: str | tuple[Part, ...] | None
    if raw is None or isinstance(raw, str):
        content = raw
    else:
        content = tuple(each("content", content_parts(raw, "content"), _part_from))
    ns = unknown(d, _MESSAGE_KEYS)
    raw_calls = d.get("tool_calls")
    calls: tuple[ToolCall, ...] = ()
    if raw_calls is not None:
        calls = tuple(each("tool_calls", listing(raw_calls, "tool_calls"), _call_from))
        if not calls:
            ns["tool_calls"] = []
    return Message(
        role=role,  # type: ignore[arg-type]  # Message validates the role
        content=content,
        tool_calls=calls,
        tool_call_id=string(d, "tool_call_id", "tool_call_id", required=role == "tool"),
        name=string(d, "name", "name", required=False),
        extra=wrap(FMT, ns),
    )


def _part_from(p: object) -> Part:
    p = mapping(p, "")
    kind = p.get("type")
    if kind == "text":
        return TextPart(required_str(p, "text", "text"), extra=wrap(FMT, unknown(p, ("type", "text"))))
    if kind == "refusal":
        ns = unknown(p, ("type", "refusal"))
        ns["type"] = "refusal"
        return TextPart(required_str(p, "refusal", "refusal"), extra=wrap(FMT, ns))
    if kind == "image_url":
        inner = mapping(p.get("image_url"), "image_url")
        url = required_str(inner, "url", "image_url.url")
        ns = unknown(p, ("type", "image_url"))
        keep_nested(ns, "image_url", inner, ("url", "detail"))
        detail = string(inner, "detail", "image_url.detail", required=False)
        return image_from_url(url, detail, wrap(FMT, ns))
    if kind == "input_audio":
        return audio_from(p, FMT)
    if kind == "file":
        inner = mapping(p.get("file"), "file")
        ns = unknown(p, ("type", "file"))
        keep_nested(ns, "file", inner, ("file_data", "file_id", "filename"))
        data, media_type = file_data_from(string(inner, "file_data", "file.file_data", required=False))
        return FilePart(
            data=data,
            media_type=media_type,
            file_id=string(inner, "file_id", "file.file_id", required=False),
            filename=string(inner, "filename", "file.filename", required=False),
            extra=wrap(FMT, ns),
        )
    return fail(f"unknown content part type {kind!r}", "type")


def _call_from(c: object) -> ToolCall:
    c = mapping(c, "")
    if c.get("type") != "function":
        fail(f"only 'function' tool calls are supported, got {c.get('type')!r}", "type")
    fn = mapping(c.get("function"), "function")
    ns = unknown(c, ("id", "type", "function"))
    keep_nested(ns, "function", fn, ("name", "arguments"))
    return ToolCall(
        required_str(c, "id", "id"),
        required_str(fn, "name", "function.name"),
        required_str(fn, "arguments", "function.arguments"),
        extra=wrap(FMT, ns),
    )


def from_openai_messages(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Parse a list of Chat Completions messages; errors carry the item index."""
    return batch(items, from_openai)


# --- Message -> dict ---------------------------------------------------------------------------


def to_openai(message: Message) -> dict[str, Any]:
    """Render one Message as a Chat Completions message dict.

    Raises:
        InvalidMessageError: the message holds something Chat Completions cannot express.
    """
    content = message.content
    # Fast path: a plain text message with nothing else to render.
    if (
        type(content) is str
        and not message.extra
        and not message.tool_calls
        and message.name is None
        and message.role != "tool"
    ):
        return {"role": message.role, "content": content}
    out: dict[str, Any] = {"role": message.role}
    if isinstance(content, tuple):
        out["content"] = each("content", content, _part_to)
    elif content is not None:
        out["content"] = content
    if message.name is not None:
        out["name"] = message.name
    if message.tool_calls:
        out["tool_calls"] = each("tool_calls", message.tool_calls, _call_to)
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    ns = namespace(message.extra, FMT, "")  # checked for every role; only an assistant's is sent
    if message.role == "assistant":
        _assistant_extras(out, ns)
    elif message.role == "tool" and isinstance(content, tuple) and any(isinstance(p, ImagePart) for p in content):
        fail(
            "a Chat tool message takes text only; render the list with to_openai_messages, which moves the "
            "images into a user message after the results",
            "content",
        )
    return out


def _assistant_extras(out: dict[str, Any], ns: Mapping[str, Any]) -> None:
    """The request fields of an assistant message the model does not carry; response-only ones stay unsent."""
    if ns:
        emit(out, ns, FMT, "", allowed=("content",) if "content" not in out else ())
        refusal = ns.get("refusal")
        if isinstance(refusal, str) and refusal:  # an empty refusal is what every reply carries
            out["refusal"] = refusal
        call = ns.get("function_call")
        if isinstance(call, Mapping) and isinstance(call.get("name"), str) and isinstance(call.get("arguments"), str):
            out["function_call"] = {"name": call["name"], "arguments": call["arguments"]}
        audio = ns.get("audio")
        if isinstance(audio, Mapping) and isinstance(audio.get("id"), str):
            out["audio"] = {"id": audio["id"]}  # a reply's audio data is never sent back, only its id
    if out.get("content") is None and not ({"tool_calls", "function_call", "refusal"} & out.keys()):
        out["content"] = ""  # the API requires content unless the message calls a function


def _part_to(part: Part) -> dict[str, Any]:
    ns = namespace(part.extra, FMT, "")
    if isinstance(part, TextPart):
        kind = ns.get("type", "text")
        if kind not in ("text", "refusal"):
            fail(f"must be 'text' or 'refusal' for a text part, got {kind!r}", f"extra.{FMT}.type")
        return {"type": kind, kind: part.text}
    if isinstance(part, ImagePart):
        inner: dict[str, Any] = {"url": image_url_to(part, "OpenAI")}
        if part.detail is not None:
            inner["detail"] = part.detail
        return {"type": "image_url", "image_url": inner}
    if isinstance(part, AudioPart):
        return {"type": "input_audio", "input_audio": {"data": part.data, "format": part.format}}
    if part.url is not None:
        fail("OpenAI Chat Completions cannot reference a file by URL; use data or file_id", "url")
    file: dict[str, Any] = {}
    data = file_data_to(part)
    if data is not None:
        file["file_data"] = data
    if part.file_id is not None:
        file["file_id"] = part.file_id
    if part.filename is not None:
        file["filename"] = part.filename
    return {"type": "file", "file": file}


def _call_to(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def to_openai_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Render Messages as a Chat Completions ``messages`` list; errors carry the index.

    A Chat ``tool`` message takes text only, so the images of a tool result (an
    Anthropic ``tool_result`` may hold them) travel in a user message right after
    the results of the call (see :func:`moved_images`).
    """
    out: list[dict[str, Any]] = []
    moved: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if moved and m.role != "tool":
            out += moved
            moved = []
        try:
            if m.role == "tool" and moved_images(m):
                tool, images = _split_tool(m)
                out.append(tool)
                moved.append(images)
            else:
                out.append(to_openai(m))
        except InvalidMessageError as exc:
            raise exc.at(i) from None
    return out + moved


TOOL_IMAGE_NOTE = "[the image(s) of this result follow in the next user message]"


def tool_image_label(call_id: str) -> str:
    """The text in front of the images of the result of ``call_id`` in their user message."""
    return f"[image(s) returned by tool call {call_id}]"


def moved_images(message: Message) -> bool:
    """True for a tool message whose images Chat Completions receives in a separate user message.

    The tool message then holds its text parts (or :data:`TOOL_IMAGE_NOTE` when it has none), and
    the user message :func:`tool_image_label` and the images: counters price both
    (``convmem.formats.sent_extras``).
    """
    content = message.content
    return message.role == "tool" and isinstance(content, tuple) and any(isinstance(p, ImagePart) for p in content)


def _split_tool(m: Message) -> tuple[dict[str, Any], dict[str, Any]]:
    parts = m.content if isinstance(m.content, tuple) else ()
    texts = [p for p in parts if isinstance(p, TextPart)]
    others = [p for p in parts if not isinstance(p, TextPart)]
    content: Any = each("content", texts, _part_to) if texts else TOOL_IMAGE_NOTE
    tool = {"role": "tool", "content": content, "tool_call_id": m.tool_call_id}
    label = {"type": "text", "text": tool_image_label(m.tool_call_id or "")}
    return tool, {"role": "user", "content": [label, *each("content", others, _part_to)]}
