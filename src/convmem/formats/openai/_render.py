"""Messages -> Chat Completions message dicts: each field as the request type spells it.

What comes in: Messages, tool results after their calls. What happens: each Message becomes one message
dict: its parts, its calls (``function`` or ``custom``), its ``tool_call_id``, and of its
``extra["openai"]`` the keys the request type takes (a reply's ``annotations``, an empty ``refusal``, an
audio reply's data stay unsent); the vendor fields a Chat-compatible server needs back are sent to it:
DeepSeek's ``reasoning_content`` on a tool-call turn, Gemini's ``extra_content`` (its thought signature) on
each call. They are withheld from a known model of another provider (``vendor``), which refuses keys its
schema does not declare. A tool result's images and files cannot ride in a Chat tool message: the list
renderer moves them into a user message after the results (:func:`moved_images`). What goes out: the dicts,
or an InvalidMessageError naming the field (and the index, for a list).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...errors import InvalidMessageError
from ...messages import AudioPart, FilePart, ImagePart, Message, Part, TextPart, ToolCall
from .._carry import Note, carry
from .._common import custom_input, each, emit, fail, file_data_to, image_url_to, namespace
from ._parse import FMT, FUNCTION_ROLE

__all__ = ["TOOL_IMAGE_NOTE", "VENDOR_FIELDS", "moved_images", "to_openai", "to_openai_messages", "tool_image_label"]

#: Fields of Chat-compatible servers, by the providers whose models emit and need them back.
VENDOR_FIELDS: Mapping[str, frozenset[str]] = {
    "reasoning_content": frozenset({"deepseek"}),
    "extra_content": frozenset({"google"}),
}


def sends(field: str, vendor: str | None) -> bool:
    """True when the vendor field ``field`` goes to a model of ``vendor`` (None: a model convmem does not know)."""
    return vendor is None or vendor in VENDOR_FIELDS[field]


def to_openai(message: Message, *, vendor: str | None = None) -> dict[str, Any]:
    """Render one Message as a Chat Completions message dict (``vendor``: the target model's provider, if known).

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
    ns = namespace(message.extra, FMT, "")  # checked for every role; an assistant's and a function's are sent
    out: dict[str, Any] = {"role": FUNCTION_ROLE if ns.get("role") == FUNCTION_ROLE else message.role}
    if isinstance(content, tuple):
        out["content"] = each("content", content, _part_to)
    elif content is not None:
        out["content"] = content
    if message.name is not None:
        out["name"] = message.name
    if message.tool_calls:
        out["tool_calls"] = each("tool_calls", message.tool_calls, lambda call: _call_to(call, vendor))
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.role == "assistant":
        _assistant_extras(out, ns, vendor)
    elif out["role"] == FUNCTION_ROLE and ns.get("content", "") is None:
        out["content"] = None
    elif moved_images(message):
        fail(
            "a Chat tool message takes text only; render the list with to_openai_messages, which moves the "
            "images into a user message after the results",
            "content",
        )
    return out


def _assistant_extras(out: dict[str, Any], ns: Mapping[str, Any], vendor: str | None) -> None:
    """The request fields of an assistant message the model does not carry; response-only ones stay unsent."""
    if ns:
        reasoning = ns.get("reasoning_content")
        if isinstance(reasoning, str) and "tool_calls" in out and sends("reasoning_content", vendor):
            out["reasoning_content"] = reasoning  # DeepSeek's thinking mode refuses a tool-call turn without it
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


def _call_to(call: ToolCall, vendor: str | None) -> dict[str, Any]:
    text = custom_input(call)
    if text is not None:
        return {"id": call.id, "type": "custom", "custom": {"name": call.name, "input": text}}
    out = {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
    signature = namespace(call.extra, FMT, "").get("extra_content")
    if isinstance(signature, Mapping) and sends("extra_content", vendor):
        out["extra_content"] = dict(signature)  # Gemini's thought signature, required back on its calls
    return out


def to_openai_messages(
    messages: Iterable[Message], *, vendor: str | None = None, notes: list[Note] | None = None
) -> list[dict[str, Any]]:
    """Render Messages as a Chat Completions ``messages`` list; errors carry the index.

    What Chat cannot carry (another format's kept objects and calls) is replaced by its text or left out
    (:func:`convmem.formats._carry.carry`, whose notes go to ``notes``). A Chat ``tool`` message takes
    text only, so the images and files of a tool result (an Anthropic ``tool_result`` may hold them)
    travel in a user message right after the results of the call (see :func:`moved_images`).
    """
    out: list[dict[str, Any]] = []
    moved: list[dict[str, Any]] = []
    for i, m in enumerate(carry(list(messages), FMT, notes)):
        if moved and m.role != "tool":
            out += moved
            moved = []
        try:
            if m.role == "tool" and moved_images(m):
                tool, images = _split_tool(m)
                out.append(tool)
                moved.append(images)
            else:
                out.append(to_openai(m, vendor=vendor))
        except InvalidMessageError as exc:
            raise exc.at(i) from None
    return out + moved


TOOL_IMAGE_NOTE = "[the image(s) of this result follow in the next user message]"


def tool_image_label(call_id: str) -> str:
    """The text in front of the images of the result of ``call_id`` in their user message."""
    return f"[image(s) returned by tool call {call_id}]"


def moved_images(message: Message) -> bool:
    """True for a tool message whose images (and files) Chat Completions receives in a separate user message.

    The tool message then holds its text parts (or :data:`TOOL_IMAGE_NOTE` when it has none), and
    the user message :func:`tool_image_label` and the images: counters price both
    (``convmem.formats.sent_extras``).
    """
    content = message.content
    return (
        message.role == "tool"
        and isinstance(content, tuple)
        and any(isinstance(p, (ImagePart, FilePart)) for p in content)
    )


def _split_tool(m: Message) -> tuple[dict[str, Any], dict[str, Any]]:
    parts = m.content if isinstance(m.content, tuple) else ()
    texts = [p for p in parts if isinstance(p, TextPart)]
    others = [p for p in parts if not isinstance(p, TextPart)]
    content: Any = each("content", texts, _part_to) if texts else TOOL_IMAGE_NOTE
    tool = {"role": "tool", "content": content, "tool_call_id": m.tool_call_id}
    label = {"type": "text", "text": tool_image_label(m.tool_call_id or "")}
    return tool, {"role": "user", "content": [label, *each("content", others, _part_to)]}
