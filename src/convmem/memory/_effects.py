"""The effects a memory's flows yield: each piece of I/O a memory needs, described as a value.

A flow (:mod:`convmem.memory._flows`) yields one of these and gets back its
result, or has the failure thrown in; ``Memory._perform`` performs it on a
sync store, summarizer or sink, ``AsyncMemory._perform`` awaits it (both
driven by :func:`convmem._effects.drive` / :func:`~convmem._effects.adrive`).
Every store effect acts on the memory's own session and user unless it names
a session (only opening does, before the memory exists)::

    Append     store.append(messages, expected seq and version, state)   -> the seqs given
    Load       store.load(unfolded_limit)                                -> LoadedSession
    Read       store.messages(from_seq, to_seq)                          -> list[StoredMessage]
    Delete     store.delete_messages(seqs, expected_seq)                 -> None
    Find       store.get_session(a unique id prefix)                     -> SessionInfo
    SaveState  store.save_state(state, expected_version=state.version)   -> the state saved
    Summarize  the strategy's summarizer on a FoldRequest                -> the summary (or its error)
    Absorb     one eviction sink on the evicted units                    -> None
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..messages import Message, StoredMessage
from ..session import SessionState
from ._core import FoldRequest
from .sinks import AsyncEvictionSink, EvictionSink

__all__ = ["Absorb", "Append", "Delete", "Effect", "Find", "Load", "Read", "SaveState", "StoreEffect", "Summarize"]


@dataclass(frozen=True, slots=True)
class Append:
    """``store.append`` under the writer's view; the value sent back is the seqs."""

    messages: Sequence[tuple[Message, int]]
    expected_seq: int
    expected_version: int
    state: SessionState | None


@dataclass(frozen=True, slots=True)
class Load:
    """``store.load``; the value sent back is the :class:`~convmem.session.LoadedSession`.

    ``session_id`` names the session when no memory holds it yet (opening); None is the memory's own.
    """

    unfolded_limit: int
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class Read:
    """``store.messages`` from ``from_seq`` to ``to_seq`` (None: the newest); the value sent back is a list."""

    from_seq: int = 0
    to_seq: int | None = None


@dataclass(frozen=True, slots=True)
class Delete:
    """``store.delete_messages``, only if the session's next seq is still ``expected_seq``."""

    seqs: list[int]
    expected_seq: int


@dataclass(frozen=True, slots=True)
class Find:
    """``store.get_session``: the session a unique id prefix names; the value sent back is its SessionInfo."""

    session_id: str


@dataclass(frozen=True, slots=True)
class SaveState:
    """``store.save_state``, expecting the version ``state`` was read at; the value sent back is the saved state."""

    state: SessionState


@dataclass(frozen=True, slots=True)
class Summarize:
    """The summarizer folds ``request``; the value sent back is its text (its failure is thrown back)."""

    request: FoldRequest


@dataclass(frozen=True, slots=True)
class Absorb:
    """``sink`` takes the evicted ``units`` (a failure is thrown back: the flow warns and goes on)."""

    sink: EvictionSink | AsyncEvictionSink
    units: list[list[StoredMessage]]


StoreEffect = Append | Load | Read | Delete | Find | SaveState
Effect = StoreEffect | Summarize | Absorb
