"""Helpers shared by the three format modules: dict checks, data URLs, the parts Chat and Responses
spell alike (``input_audio``, an image given by URL, a file's data) and the ``extra`` scheme.

The ``extra`` scheme (the same for every format, namespace ``fmt`` = ``"openai"``,
``"anthropic"`` or ``"responses"``) is applied to a Message, a part or a ToolCall
and the provider dict it came from:

* ``extra[fmt]`` holds, verbatim, every key of the dict the model does not carry
  (``cache_control``, ``annotations``, ``status``, ``id``, ``refusal`` ...).
* A key the model *does* carry but whose value the model cannot tell from its
  default (``"content": null``, ``"tool_calls": []``) is kept there too; the
  renderer emits it only when the model field is empty, and raises otherwise.
* ``extra[fmt]["$absent"]`` lists keys the renderer emits by default but the
  original dict lacked (e.g. ``type`` on a Responses "easy" message with list content).
* A nested object (``image_url``, ``source``, ``function``, ``file`` ...) keeps its
  unknown keys under the same key: ``extra["openai"]["image_url"] = {...}``.
* ``extra[fmt]["type"]`` on a part selects an alternative block type that carries
  the same fields (``refusal`` for a text part, ``image`` for a file given by id).
* ``extra[fmt]["$layout"]`` on an assistant Message keeps provider objects that have
  no Message field (Anthropic ``thinking`` blocks, Responses ``reasoning`` items)
  verbatim, in their original order among the message's content and tool calls.

Renderers ignore the namespaces of other formats: those are provider annotations,
not content, so a Message parsed from OpenAI renders for Anthropic without them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, NoReturn, TypeVar

from ..errors import InvalidMessageError
from ..limits import check_json
from ..messages import AudioPart, FilePart, ImagePart, Message, ToolCall

ABSENT = "$absent"
LAYOUT = "$layout"
_DATA_URL = re.compile(r"data:([^,]*);base64,(.*)", re.DOTALL)
_S = TypeVar("_S")
_T = TypeVar("_T")


def fail(reason: str, field: str | None = None) -> NoReturn:
    """Raise an InvalidMessageError (a helper so that checks read as one line)."""
    raise InvalidMessageError(reason, field=field)


def relocate(exc: InvalidMessageError, prefix: str) -> InvalidMessageError:
    """Prefix the field of ``exc`` with ``prefix`` (e.g. ``content[2]``)."""
    inner = f".{exc.field}" if exc.field else ""
    return InvalidMessageError(exc.reason, field=f"{prefix}{inner}", index=exc.index)


def each(name: str, items: Iterable[_S], func: Callable[[_S], _T]) -> list[_T]:
    """Apply ``func`` to ``items``; an error's field is prefixed with ``name[i]``."""
    out = []
    for i, item in enumerate(items):
        try:
            out.append(func(item))
        except InvalidMessageError as exc:
            raise relocate(exc, f"{name}[{i}]") from None
    return out


def batch(items: Iterable[_S], func: Callable[[_S], _T]) -> list[_T]:
    """Apply ``func`` to ``items``; an error is located at the item's batch index."""
    out = []
    for i, item in enumerate(items):
        try:
            out.append(func(item))
        except InvalidMessageError as exc:
            raise exc.at(i) from None
    return out


def mapping(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        fail(f"must be an object, got {type(value).__name__}", field)
    return value


def string(d: Mapping[str, Any], key: str, field: str, *, required: bool = True) -> str | None:
    """Return ``d[key]`` checked to be a string (None when absent or null and not required)."""
    value = d.get(key)
    if value is None:
        if required:
            fail("is required", field)
        return None
    if not isinstance(value, str):
        fail(f"must be a string, got {type(value).__name__}", field)
    return value


def required_str(d: Mapping[str, Any], key: str, field: str) -> str:
    value = string(d, key, field)
    assert value is not None  # string() raised otherwise
    return value


def listing(value: object, field: str) -> list[Any]:
    if not isinstance(value, list):
        fail(f"must be a list, got {type(value).__name__}", field)
    return value


def parts(value: object, field: str) -> list[Any]:
    """A content value that is not a string must be a list of parts."""
    if not isinstance(value, list):
        fail(f"must be a string or a list of content parts, got {type(value).__name__}", field)
    return value


def copy_json(value: Any) -> Any:
    """Copy a JSON value so that no dict or list is shared between input, Message and output.

    Iterative, so hostile nesting reaches the message's own check (a named error), not a RecursionError.
    """
    if not isinstance(value, Mapping | list):
        return value
    root: Any = {} if isinstance(value, Mapping) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, Mapping) else enumerate(source)
        for key, child in items:
            if isinstance(child, Mapping | list):
                copy: Any = {} if isinstance(child, Mapping) else []
                stack.append((child, copy))
                child = copy
            if isinstance(target, dict):
                target[key] = child
            else:
                target.append(child)
    return root


def unknown(d: Mapping[str, Any], known: Collection[str]) -> dict[str, Any]:
    """The keys of ``d`` outside ``known``, copied; nulls of known keys are kept as variants."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        if key not in known or value is None:
            out[key] = copy_json(value)
    return out


def wrap(fmt: str, ns: Mapping[str, Any]) -> Mapping[str, Any]:
    """Namespace ``ns`` under ``fmt`` for an ``extra`` field (empty stays empty)."""
    return {fmt: ns} if ns else {}


def namespace(extra: Mapping[str, Any], fmt: str, field: str) -> Mapping[str, Any]:
    """Return ``extra[fmt]`` (empty when missing), checked to be a mapping."""
    if not extra:
        return extra
    ns = extra.get(fmt)
    if ns is None:
        return {}
    if not isinstance(ns, Mapping):
        fail(f"must be an object, got {type(ns).__name__}", f"{field}extra.{fmt}")
    return ns


def emit(
    out: dict[str, Any],
    ns: Mapping[str, Any],
    fmt: str,
    field: str,
    handled: Collection[str] = (),
    allowed: Collection[str] | None = None,
) -> None:
    """Apply namespace ``ns`` to the rendered dict ``out`` (see the module docstring).

    Args:
        out: the dict rendered from the model; modified in place.
        ns: ``extra[fmt]`` of the object rendered.
        fmt: the format name, for error fields.
        field: the field prefix of the object (``""``, ``"content[2]."`` ...).
        handled: keys of ``ns`` the caller already applied (nested objects, ``type``).
        allowed: the only keys the provider's request schema accepts on this object
            (None: every key). Other keys stay in ``extra`` (lossless export) but are
            never sent: response-only fields such as ``annotations``, ``id``, ``usage``.
    """
    for key, value in ns.items():
        if key in handled or (allowed is not None and key not in allowed and key not in (ABSENT, LAYOUT)):
            continue
        if key == ABSENT:
            for name in listing(value, f"{field}extra.{fmt}.{ABSENT}"):
                if name not in out:
                    fail(f"names {name!r}, which is not rendered", f"{field}extra.{fmt}.{ABSENT}")
                del out[name]
        elif key == LAYOUT:
            continue
        elif key in out:
            fail(f"conflicts with the {key!r} rendered from the message", f"{field}extra.{fmt}.{key}")
        else:
            out[key] = copy_json(value)


def absent(ns: dict[str, Any], d: Mapping[str, Any], keys: Collection[str]) -> None:
    """Record in ``ns`` which of the default-rendered ``keys`` the dict ``d`` lacks."""
    missing = [key for key in keys if key not in d]
    if missing:
        ns[ABSENT] = missing


def keep_nested(ns: dict[str, Any], key: str, inner: Mapping[str, Any], known: Collection[str]) -> None:
    """Keep the unknown keys of the nested object ``inner`` under ``ns[key]`` (see the module docstring)."""
    inner_ns = unknown(inner, known)
    if inner_ns:
        ns[key] = inner_ns


def nested(ns: Mapping[str, Any], key: str, fmt: str, field: str) -> Mapping[str, Any]:
    """The unknown keys kept for the nested object ``key`` (see the module docstring)."""
    value = ns.get(key)
    if value is None:
        return {}
    return mapping(value, f"{field}extra.{fmt}.{key}")


def apply_layout(
    layout: object, slots: Mapping[str, list[dict[str, Any]]], kept: Collection[str | None], field: str
) -> list[dict[str, Any]]:
    """Arrange rendered objects as an ``extra[fmt]["$layout"]`` says.

    Args:
        layout: the list of entries: a key of ``slots`` (take the next object of that
            slot) or an object whose ``type`` is in ``kept`` (emitted verbatim).
        slots: rendered objects by slot name, e.g. ``{"p": parts, "t": calls}``.
        kept: the types of objects a layout may carry verbatim.
        field: the error field of the layout.
    """
    used = dict.fromkeys(slots, 0)
    out: list[dict[str, Any]] = []
    for entry in listing(layout, field):
        if isinstance(entry, str) and entry in slots and used[entry] < len(slots[entry]):
            out.append(slots[entry][used[entry]])
            used[entry] += 1
        elif isinstance(entry, Mapping) and entry.get("type") in kept:
            out.append(copy_json(entry))
        else:
            fail(f"entry {entry!r} does not match the message's content and tool calls", field)
    if any(used[name] != len(objects) for name, objects in slots.items()):
        fail("does not place the content and every tool call of the message", field)
    return out


def split_data_url(url: str) -> tuple[str, str] | None:
    """``data:<media type>;base64,<data>`` -> (media type, data), else None."""
    if not url.startswith("data:"):
        return None
    match = _DATA_URL.fullmatch(url)
    return (match.group(1), match.group(2)) if match else None


def image_from_url(url: str, detail: str | None, extra: Mapping[str, Any]) -> ImagePart:
    """An image given by URL: a base64 data URL becomes ``data`` + ``media_type``, any other stays ``url``."""
    split = split_data_url(url)
    if split is None:
        return ImagePart(url=url, detail=detail, extra=extra)  # type: ignore[arg-type]  # ImagePart checks detail
    return ImagePart(data=split[1], media_type=split[0], detail=detail, extra=extra)  # type: ignore[arg-type]


def file_data_from(value: str | None) -> tuple[str | None, str | None]:
    """A file's ``file_data`` as (data, media type): a data URL split, anything else as it is, with no type."""
    split = split_data_url(value) if value is not None else None
    return (split[1], split[0]) if split else (value, None)


def audio_from(p: Mapping[str, Any], fmt: str) -> AudioPart:
    """An ``input_audio`` part, the same in Chat and Responses: ``{"type", "input_audio": {"data", "format"}}``."""
    inner = mapping(p.get("input_audio"), "input_audio")
    ns = unknown(p, ("type", "input_audio"))
    keep_nested(ns, "input_audio", inner, ("data", "format"))
    data = required_str(inner, "data", "input_audio.data")
    return AudioPart(data, required_str(inner, "format", "input_audio.format"), extra=wrap(fmt, ns))


def image_url_to(part: ImagePart, provider: str) -> str:
    """The URL an image is sent as: its own, or a data URL of its base64 data (a local path is refused)."""
    no_path(part.path, provider, "")
    return part.url if part.url is not None else data_url(part.media_type, part.data or "", "")


def file_data_to(part: FilePart) -> str | None:
    """A file's ``file_data`` as sent: its data, as a data URL when it has a media type; None without data."""
    if part.data is not None:
        return part.data if part.media_type is None else data_url(part.media_type, part.data, "")
    if part.media_type is not None:
        fail("is only rendered with base64 data", "media_type")
    return None


def data_url(media_type: str | None, data: str, field: str) -> str:
    """Build a data URL; base64 ``data`` needs a ``media_type`` to be sent as a URL."""
    if media_type is None:
        fail("is required to send base64 data as a data URL", f"{field}media_type")
    if "," in media_type:
        fail(f"must not contain ',' (got {media_type!r})", f"{field}media_type")
    return f"data:{media_type};base64,{data}"


def no_path(path: str | None, fmt: str, field: str) -> None:
    if path is not None:
        fail(
            f"a local image path cannot be sent to {fmt}; read the file and pass "
            "ImagePart(data=<base64>, media_type=...) instead",
            f"{field}path",
        )


def check_name(message: Message, fmt: str, drop_names: bool) -> None:
    if message.name is not None and not drop_names:
        fail(f"{fmt} has no name field; pass drop_names=True to leave names out", "name")


def custom_input(call: ToolCall) -> str | None:
    """The free-text input of a custom tool call (Chat ``"type": "custom"``, Responses ``custom_tool_call``), else None.

    Both OpenAI formats spell the same call, so each renders the other's (its arguments are the input as a
    JSON string); the other formats have no custom tools.
    """
    extra = call.extra
    if not extra:
        return None
    chat, responses = extra.get("openai"), extra.get("responses")
    if (isinstance(chat, Mapping) and chat.get("type") == "custom") or (
        isinstance(responses, Mapping) and responses.get("type") == "custom_tool_call"
    ):
        value = json.loads(call.arguments)
        if isinstance(value, str):
            return value
        fail("a custom tool call's arguments must encode its input text as a JSON string", "arguments")
    return None


def arguments_object(arguments: str, field: str) -> dict[str, Any]:
    """Decode tool-call arguments that must be a JSON object (Anthropic ``input``)."""
    value = json.loads(arguments)
    if not isinstance(value, dict):
        fail(f"must encode a JSON object, got {type(value).__name__}", field)
    return value


def object_arguments(value: Mapping[str, Any]) -> str:
    """Encode an Anthropic ``input`` object as ToolCall arguments (compact, UTF-8)."""
    check_json(value, "input")  # iteratively, before json.dumps recurses into it
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
