"""Reading a JSONL transcript: one provider message (or Responses item) per line.

The reader turns a file into *chunks*, each a group of lines that becomes one
``add_many`` call, so every error can be traced back to the lines it came from:

* OpenAI Chat Completions: one line, one Message.
* Anthropic Messages: one line, one or more Messages (a user message holding
  several ``tool_result`` blocks expands to one tool Message per block).
* OpenAI Responses: a run of assistant-side items (an assistant ``message``,
  ``reasoning`` and consecutive ``function_call`` items) is one chunk, because
  the parser only keeps parallel calls in one assistant Message (one unit) when
  it sees them together; every other item is a chunk of its own.

Example::

    lines = read_lines(path)
    fmt = detect(path, lines)              # or the --format the user gave
    for chunk in chunked(lines, fmt):
        messages = parse_chunk(path, chunk, fmt)
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidMessageError, TranscriptError
from ..formats import Format, detect_format, parse_messages
from ..messages import Message

__all__ = ["Chunk", "Line", "TranscriptError", "chunked", "detect", "parse_chunk", "read_lines", "where"]


@dataclass(frozen=True, slots=True)
class Line:
    """One decoded, non-blank line of the transcript."""

    number: int  # 1-based, counting blank lines too, as an editor shows it
    item: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Chunk:
    """Lines that are parsed together and added with one ``add_many``."""

    lines: tuple[Line, ...]

    @property
    def first(self) -> int:
        return self.lines[0].number

    @property
    def last(self) -> int:
        return self.lines[-1].number


def read_lines(path: Path) -> list[Line]:
    """Decode every non-blank line of ``path`` as one JSON object.

    Raises:
        TranscriptError: the file cannot be read, is not UTF-8, or a line is not a JSON object.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TranscriptError(path, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise TranscriptError(path, None, exc.strerror or str(exc)) from None
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise TranscriptError(path, number, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(item, dict):
            raise TranscriptError(path, number, f"expected a JSON object (one message), got {_json_type(item)}")
        lines.append(Line(number, item))
    if not lines:
        raise TranscriptError(path, None, "the transcript holds no messages")
    return lines


def detect(path: Path, lines: Sequence[Line]) -> Format:
    """Return the one format every line fits; plain ``{"role", "content"}`` lines fit all three.

    Raises:
        TranscriptError: two lines carry markers of different formats.
    """
    found: Format | None = None
    found_at = 0
    for line in lines:
        fmt = detect_format(line.item)
        if fmt is None or fmt == found:
            continue
        if found is not None:
            raise TranscriptError(
                path,
                line.number,
                f"this line is in {fmt} format, but line {found_at} is in {found} format; pass --format to choose",
            )
        found, found_at = fmt, line.number
    return found or "openai"


def _joins_call_run(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    if kind in ("function_call", "reasoning"):
        return True
    return item.get("role") == "assistant" and kind in (None, "message")


def chunked(lines: Sequence[Line], fmt: Format) -> Iterator[Chunk]:
    """Group ``lines`` into chunks as the module docstring describes."""
    if fmt != "responses":
        for line in lines:
            yield Chunk((line,))
        return
    run: list[Line] = []
    for line in lines:
        if _joins_call_run(line.item):
            run.append(line)
            continue
        if run:
            yield Chunk(tuple(run))
            run = []
        yield Chunk((line,))
    if run:
        yield Chunk(tuple(run))


def where(chunk: Chunk, messages: int, index: int | None) -> int:
    """The line that message ``index`` of a chunk parsed into ``messages`` Messages came from."""
    if index is not None and len(chunk.lines) == messages and 0 <= index < messages:
        return chunk.lines[index].number
    # A chunk whose items and messages do not map one to one is either one
    # line (Anthropic expansion) or a run of call items that merged into one message.
    return chunk.first


def parse_chunk(path: Path, chunk: Chunk, fmt: Format) -> list[Message]:
    """Parse the items of ``chunk`` in ``fmt``.

    Raises:
        TranscriptError: an item is not a valid message in ``fmt``.
    """
    try:
        return parse_messages([line.item for line in chunk.lines], fmt)
    except InvalidMessageError as exc:
        index = exc.index if exc.index is not None and exc.index < len(chunk.lines) else 0
        raise TranscriptError(path, chunk.lines[index].number, reason(exc)) from None


def reason(exc: InvalidMessageError) -> str:
    """The reason of ``exc`` with its field, without the batch index (the line replaces it)."""
    return f"field {exc.field!r}: {exc.reason}" if exc.field else exc.reason


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "a number" if isinstance(value, (int, float)) and not isinstance(value, bool) else "a boolean"
