"""The context at turn N, rebuilt: a session's stored messages replayed through a ``Memory``, from checkpoints.

The store keeps every message and the session's options, not the contexts
that were built. To show what the model was sent after message N, a
:class:`Line` replays the messages in the batches they were added in (a
batch's messages share one ``created_at``) through a ``Memory`` made with the
session's saved options on an in-memory store, with the user's working blocks
as they were when each batch was added (:mod:`.blocklog`: a capped block's
claim decides what is evicted). The line only ever moves forward; every
``CHECKPOINT_EVERY`` batches it keeps a checkpoint (the replay store's lengths
and state: its rows are append-only, so a checkpoint copies nothing), and
the context at turn N is built from the nearest checkpoint at or before N,
by replaying the few batches between. :mod:`.replays` keeps lines and
contexts per worker.

How exact it is: the window, the account, what was left out and the summaries
are the ones the live session had, provided the options were not changed, the
summarizer is deterministic (the service's default extractive one is) and the
block versions of each turn are known. Whatever cannot be known makes
``exact`` false and says why in ``notes``: a block version the service did not
record, ``clear(keep_system=False)``, a session saved without its options, a
turn inside a batch (the memory never stood between its messages).
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..errors import SessionNotFoundError
from ..memory import Memory
from ..messages import StoredMessage
from ..policy.context import Context, LeftOut
from ..session import SessionState, SummaryRecord
from ..stores._memory_data import Rows, SessionData
from ..stores.memory import MemoryStore
from .blocklog import Timeline, static_blocks

__all__ = ["CHECKPOINT_EVERY", "Line", "Replay", "SummaryStep"]

#: Batches between checkpoints: a turn is at most this many adds away from one. A checkpoint costs a
#: few hundred bytes (lengths and a state: ~0.5 KB a message with the replayed rows), so there is one
#: after every batch and a turn costs an open and a context, never an add (whose fold, when it summarizes,
#: is most of a replayed add's time).
CHECKPOINT_EVERY = 1


@dataclass(frozen=True, slots=True)
class SummaryStep:
    after_seq: int
    text: str
    first_seq: int
    last_seq: int
    tokens: int


@dataclass
class Replay:
    seq: int
    last_seq: int
    context: Context | None
    summary: SummaryStep | None = None
    notes: list[str] = field(default_factory=list)
    exact: bool = True


@dataclass(frozen=True, slots=True)
class _Checkpoint:
    batches: int
    data: SessionData | None  # None: before the first add (an empty store)
    rows: int
    pinned: int
    next_seq: int
    tokens: int
    state: SessionState
    updated_at: datetime | None


class _ReplayStore(MemoryStore):
    """A ``MemoryStore`` that can mark where a session stands and start a new store from such a mark."""

    def checkpoint(self, batches: int, session_id: str, user_id: str | None) -> _Checkpoint:
        data = self._sessions.get((user_id, session_id))
        if data is None:
            return _Checkpoint(batches, None, 0, 0, 0, 0, SessionState(), None)
        return _Checkpoint(
            batches,
            data,
            len(data.all.rows),
            len(data.pinned.rows),
            data.next_seq,
            data.tokens,
            data.state,
            data.updated_at,
        )

    def summary_of(self, session_id: str, user_id: str | None) -> SummaryRecord | None:
        data = self._sessions.get((user_id, session_id))
        return data.state.summary if data is not None else None

    @classmethod
    def restored(cls, mark: _Checkpoint) -> _ReplayStore:
        """A new store holding the session as it was at ``mark`` (its rows' prefix: appends never rewrite rows)."""
        store = cls()
        data = mark.data
        if data is not None:
            copy = dataclasses.replace(
                data,
                all=Rows(data.all.seqs[: mark.rows], data.all.rows[: mark.rows]),
                pinned=Rows(data.pinned.seqs[: mark.pinned], data.pinned.rows[: mark.pinned]),
                next_seq=mark.next_seq,
                tokens=mark.tokens,
                state=mark.state,
                updated_at=mark.updated_at or data.updated_at,
                metadata=dict(data.metadata),
                children=set(),
                # The retry index starts empty: a replay only appends rows the store has not seen (a
                # session's stored ids are distinct), and rebuilding it was most of a restore's time.
                ids={},
            )
            store._sessions[(data.user_id, data.id)] = copy
        return store


class Line:
    """One session's replay, moving forward only: its batches, checkpoints and summary history so far.

    Not thread-safe: :class:`~convmem.server.replays.Replays` lets one request at a time extend it.
    """

    def __init__(self, session_id: str, user_id: str | None, options: dict[str, Any], timeline: Timeline) -> None:
        self.session_id, self.user_id, self.options, self.timeline = session_id, user_id, options, timeline
        self.rows: list[StoredMessage] = []  # the stored rows replayed, in seq order
        self.ends: list[int] = []  # per batch: the index in rows after its last message
        self.last_seqs: list[int] = []  # per batch: the seq of its last message
        self.summaries: list[SummaryStep] = []
        self.unknown: dict[str, int] = {}  # why a block version is unknown -> the first batch it concerns
        self.store = _ReplayStore()
        self.checkpoints: list[_Checkpoint] = [self.store.checkpoint(0, session_id, user_id)]
        self.memory: Memory | None = None
        self._blocks: tuple[Any, ...] | None = None
        self._summary: SummaryRecord | None = None

    @property
    def tip(self) -> int:
        """The seq of the last message replayed (-1: none)."""
        return self.last_seqs[-1] if self.last_seqs else -1

    def extend(self, rows: Iterator[StoredMessage], target: int | None, most: int) -> bool:
        """Replay the batches of ``rows`` (those after ``tip``) until the one holding ``target`` (None: all).

        Stops after ``most`` batches; returns whether it got there (or ran out of rows)."""
        for done, batch in enumerate(_batches(rows)):
            if target is not None and batch[0].seq > target:
                return True
            if done == most:
                return False
            self._add(batch)
        return True

    def _add(self, batch: list[StoredMessage]) -> None:
        blocks, unknown = self.timeline.at(batch[0].message.created_at)
        for reason in unknown:
            self.unknown.setdefault(reason, len(self.ends))
        self.memory = _reopen(self.store, self, blocks, self.memory if blocks == self._blocks else None)
        self._blocks = blocks
        self.memory.add_many([s.message for s in batch])
        self.rows.extend(batch)
        self.ends.append(len(self.rows))
        self.last_seqs.append(batch[-1].seq)
        # A new summary is a new record in the saved state (``stats()`` would build a context to say so).
        record = self.store.summary_of(self.session_id, self.user_id)
        if record is not None and record != self._summary:
            self._summary = record
            self.summaries.append(self._step(batch[-1].seq, record))
        if len(self.ends) % CHECKPOINT_EVERY == 0:
            self.checkpoints.append(self.store.checkpoint(len(self.ends), self.session_id, self.user_id))

    def _step(self, after: int, record: SummaryRecord) -> SummaryStep:
        first, last = self._seq(record.first_seq), self._seq(record.last_seq)
        return SummaryStep(after, record.text, first, last, record.tokens)

    def _seq(self, position: int) -> int:
        return self.rows[position].seq if 0 <= position < len(self.rows) else position

    def turn(self, seq: int, fmt: str | None) -> Replay:
        """The context right after message ``seq`` (replayed already: ``seq <= tip``), from the nearest checkpoint."""
        batch = bisect_right(self.last_seqs, seq - 1)  # the batch holding seq
        if batch >= len(self.ends) or self.rows[self.ends[batch] - 1].seq < seq:
            raise AssertionError("unreachable")  # Replays.turn replays up to seq before it asks the line
        full = self.last_seqs[batch] == seq
        need = batch + 1 if full else batch  # whole batches the turn stands after
        mark = self.checkpoints[min(need // CHECKPOINT_EVERY, len(self.checkpoints) - 1)]
        store = _ReplayStore.restored(mark)
        memory: Memory | None = None
        start = self.ends[mark.batches - 1] if mark.batches else 0
        blocks: tuple[Any, ...] = self.timeline.at(self.rows[self.ends[batch] - 1].message.created_at)[0]
        for index in range(mark.batches, batch + 1 if not full else need):
            rows = self.rows[start : self.ends[index]]
            start = self.ends[index]
            if index == batch and not full:
                rows = [r for r in rows if r.seq <= seq]
            before, (blocks, _) = blocks, self.timeline.at(rows[0].message.created_at)
            memory = _reopen(store, self, blocks, memory if blocks == before else None)
            memory.add_many([r.message for r in rows])
        if memory is None:  # the checkpoint is the turn itself: open it as the service did then
            memory = _reopen(store, self, blocks, None)
        assert memory is not None
        out = Replay(seq=seq, last_seq=self.tip, context=None)
        positions = [r.seq for r in self.rows[: self.ends[batch]]]
        out.context = _mapped(memory.context(format=fmt), positions)
        steps = [s for s in self.summaries if s.after_seq <= seq]
        out.summary = steps[-1] if steps else None
        if not full:
            out.exact = False
            out.notes.append(
                f"seq {seq} was added in one call with the messages up to seq {self.last_seqs[batch]}:"
                " the memory never stood between them"
            )
            record = store.load(self.session_id, user_id=self.user_id).state.summary
            out.summary = self._step(seq, record) if record is not None else None
        self.explain(out, batch, blocks)
        return out

    def explain(self, out: Replay, batch: int, blocks: Sequence[Any]) -> None:
        """Add to ``out`` what makes the turn at ``batch`` inexact, and which block versions it replayed."""
        for reason, first in self.unknown.items():
            if first <= batch:
                out.exact = False
                out.notes.append(f"{reason}; the replay uses its current text")
        if blocks:
            out.notes.append(
                "blocks replayed at their versions then: " + ", ".join(f"{b.name} v{b.version}" for b in blocks)
            )
        if self.positions_have_gaps(batch):
            out.notes.append("seqs have gaps (a rolled-back tool call); they are mapped back")

    def positions_have_gaps(self, batch: int) -> bool:
        end = self.ends[batch]
        return self.rows[end - 1].seq != end - 1


def _reopen(store: _ReplayStore, line: Line, blocks: tuple[Any, ...], memory: Memory | None) -> Memory:
    """``memory`` if its blocks are still the ones in effect; else the replayed session opened with them.

    The live service opens the session on every request with the blocks of that moment, so a new
    block version takes effect by reopening here too (a capped block's claim is fixed at open)."""
    if memory is not None:
        return memory
    kept = static_blocks(blocks)
    try:
        store.get_session(line.session_id, user_id=line.user_id)
    except SessionNotFoundError:  # nothing added yet: the replay store has no session
        return Memory(store=store, session_id=line.session_id, user_id=line.user_id, blocks=kept, **line.options)
    return Memory.open(line.session_id, store=store, user_id=line.user_id, blocks=kept, **line.options)


def _batches(rows: Iterator[StoredMessage] | Sequence[StoredMessage]) -> Iterator[list[StoredMessage]]:
    batch: list[StoredMessage] = []
    for stored in rows:
        if batch and stored.message.created_at != batch[-1].message.created_at:
            yield batch
            batch = []
        batch.append(stored)
    if batch:
        yield batch


def _at(seqs: Sequence[int], position: int | None) -> Any:
    if position is None:
        return None
    return seqs[position] if 0 <= position < len(seqs) else position


def _mapped(ctx: Context, seqs: Sequence[int]) -> Context:
    if not seqs or seqs[-1] == len(seqs) - 1:
        return ctx
    left = tuple(
        item._replace(first_seq=_at(seqs, item.first_seq), last_seq=_at(seqs, item.last_seq)) for item in ctx.left_out
    )
    window = (seqs[ctx.window[0]], seqs[ctx.window[1]]) if ctx.window is not None else None
    truncated = tuple(t._replace(seq=_at(seqs, t.seq)) for t in ctx.truncated)
    return ctx._replace(left_out=tuple(LeftOut(*x) for x in left), window=window, truncated=truncated)
