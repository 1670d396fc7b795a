"""The replay loop: feed a transcript through a Memory, one turn at a time.

A *turn* ends wherever an application would call the model next:

* after a user message (the model answers it), or
* after the tool results that complete an assistant tool-call unit (the model
  reads the results and continues).

Everything added since the previous turn (assistant answers, system messages,
the tool-call message itself) belongs to the turn that ends there. Whatever
follows the last such point (usually the final assistant answer) forms one last
turn. After every turn replay calls ``context()``, as an agent loop would.

Example::

    result = replay_file(path, lines, "openai", memory, advance=lambda n: None)
    result.turns[-1].tokens
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidMessageError
from ..formats import Format
from ..memory import Memory
from ..messages import Message
from ..policy.context import Context
from ..usage import Stats
from ._transcript import Line, TranscriptError, chunked, parse_chunk, reason, where

__all__ = ["ReplayResult", "Turn", "replay_file"]


@dataclass(frozen=True, slots=True)
class Turn:
    """The figures of one turn, taken from ``context()`` and ``stats()`` right after it."""

    turn: int
    first_line: int
    last_line: int
    added: int  # messages added during this turn
    stored: int  # messages stored so far
    in_request: int  # messages (or Responses items) in the rendered request, system included
    tokens: int  # tokens of the request's messages, as the model's counter counts them
    budget: int
    reserved_output: int
    evicted: int  # messages evicted so far (archived + summarized)
    archived: int
    summarized: int
    summaries: int
    truncated: int  # oversized messages cut to fit in this context
    seconds: float  # add_many + context() for this turn; parsing the lines is not included


@dataclass(slots=True)
class ReplayResult:
    """Every turn, the final context and stats, and what replay noticed on the way."""

    turns: list[Turn] = field(default_factory=list)
    context: Context | None = None
    stats: Stats | None = None
    lines: int = 0
    seconds: float = 0.0  # wall time of the whole replay, parsing included
    notes: list[str] = field(default_factory=list)


class _Open:
    """The turn being accumulated."""

    def __init__(self) -> None:
        self.first_line: int | None = None
        self.last_line = 0
        self.added = 0
        self.seconds = 0.0


def _close(memory: Memory, turn: _Open, number: int, result: ReplayResult) -> None:
    start = time.perf_counter()
    ctx = memory.context()
    turn.seconds += time.perf_counter() - start
    stats = memory.stats()
    result.context, result.stats = ctx, stats
    result.turns.append(
        Turn(
            turn=number,
            first_line=turn.first_line or turn.last_line,
            last_line=turn.last_line,
            added=turn.added,
            stored=stats.messages,
            in_request=len(ctx.messages) + (1 if ctx.system else 0),
            tokens=ctx.tokens,
            budget=ctx.budget,
            reserved_output=ctx.account.reserved_output,
            evicted=stats.archived + stats.summarized,
            archived=stats.archived,
            summarized=stats.summarized,
            summaries=stats.summaries,
            truncated=len(ctx.truncated),
            seconds=turn.seconds,
        )
    )


def _ends_turn(messages: Sequence[Message], pending: set[str]) -> bool:
    for message in messages:
        if message.tool_calls:
            pending.clear()
            pending.update(call.id for call in message.tool_calls)
        elif message.role == "tool":
            pending.discard(message.tool_call_id or "")
    last = messages[-1]
    return last.role == "user" or (last.role == "tool" and not pending)


def replay_file(
    path: Path, lines: Sequence[Line], fmt: Format, memory: Memory, *, advance: Callable[[int], None]
) -> ReplayResult:
    """Replay ``lines`` through ``memory``; ``advance(n)`` is told after each batch of ``n`` lines.

    Raises:
        TranscriptError: a line does not parse, or the memory refuses its message(s);
            nothing of that line is stored.
    """
    started = time.perf_counter()
    result = ReplayResult(lines=len(lines))
    pending: set[str] = set()
    turn = _Open()
    for chunk in chunked(lines, fmt):
        messages = parse_chunk(path, chunk, fmt)
        if messages:
            start = time.perf_counter()
            try:
                memory.add_many(messages)
            except InvalidMessageError as exc:
                raise TranscriptError(path, where(chunk, len(messages), exc.index), reason(exc)) from None
            turn.seconds += time.perf_counter() - start
            turn.first_line = turn.first_line or chunk.first
            turn.last_line = chunk.last
            turn.added += len(messages)
            if _ends_turn(messages, pending):
                _close(memory, turn, len(result.turns) + 1, result)
                turn = _Open()
        advance(len(chunk.lines))
    if turn.added:
        _close(memory, turn, len(result.turns) + 1, result)
    if pending:
        result.notes.append(
            f"the transcript ends with {len(pending)} unanswered tool call(s); the context leaves them out"
        )
    result.seconds = time.perf_counter() - started
    return result
