"""The context at turn N, rebuilt: replay a session's stored messages through a fresh ``Memory``.

The store keeps every message and the session's options, not the contexts
that were built. To show what the model was sent after message N, the
inspector replays messages 0..N, in the batches they were added in (a batch's
messages share one ``created_at``), through a ``Memory`` made with the
session's saved options on an in-memory store, and asks it for its context.
The running summary's history comes from the same replay.

How exact it is: the window, the account, what was left out and the summaries
are the ones the live session had, provided the options were not changed and
the summarizer is deterministic (the service's default extractive one is).
What cannot be replayed is reported in ``notes``: working blocks are shown with
their current text; an ``input`` given to ``context()`` was never stored;
``clear()``, a rolled-back tool call and a summarizer that is not the
default leave marks the replay reports instead of guessing at them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..longterm.blocks.base import Block
from ..memory import Memory
from ..memory.options import open_options, stored_config
from ..messages import StoredMessage
from ..policy.context import Context, LeftOut
from ..stores.base import SessionStore
from ..stores.memory import MemoryStore

__all__ = ["Replay", "SummaryStep", "replay"]


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
    summaries: list[SummaryStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    exact: bool = True


def replay(
    store: SessionStore,
    session_id: str,
    user_id: str | None,
    *,
    upto: int | None,
    format: str | None = None,
    blocks: Sequence[Block] = (),
    limit: int = 20_000,
) -> Replay:
    """Replay ``session_id`` up to seq ``upto`` (the whole session if None); see the module docstring.

    Raises:
        ValueError: ``upto`` is past the last message, or the session is longer than ``limit``.
    """
    info = store.get_session(session_id, user_id=user_id)
    if info.message_count > limit:
        raise ValueError(f"turn replay is limited to {limit} messages; this session has {info.message_count}")
    state = store.load(info.id, user_id=user_id).state
    options, _ = open_options(state, {}, info.model)
    out = Replay(seq=-1, last_seq=-1, context=None)
    if not stored_config(state):
        out.exact, out.notes = False, ["the session was saved without its options; defaults were replayed"]
    if blocks:
        out.notes.append("working blocks are shown with their current text")
    if state.pinned_start > 0:
        out.exact = False
        out.notes.append("clear(keep_system=False) was called; the replay does not repeat it")
    memory = Memory(store=MemoryStore(), session_id=info.id, user_id=user_id, blocks=blocks, **options)
    seqs: list[int] = []  # replayed position -> stored seq (a rolled-back call leaves a gap)
    summaries = 0
    for batch in _batches(store.messages(info.id, user_id=user_id)):
        if upto is not None and batch[0].seq > upto:
            break
        batch = [s for s in batch if upto is None or s.seq <= upto]
        memory.add_many([s.message for s in batch])
        seqs.extend(s.seq for s in batch)
        out.seq = batch[-1].seq
        if memory.stats().summaries != summaries:
            summaries = memory.stats().summaries
            record = memory.store.load(info.id, user_id=user_id).state.summary
            if record is not None:
                out.summaries.append(
                    SummaryStep(
                        out.seq, record.text, _at(seqs, record.first_seq), _at(seqs, record.last_seq), record.tokens
                    )
                )
    out.last_seq = _last(store, info.id, user_id, out.seq)
    if upto is not None and out.seq != upto:
        raise ValueError(f"no message with seq {upto}; the session's seqs run up to {out.last_seq}")
    if seqs and seqs[-1] != len(seqs) - 1:
        out.notes.append("seqs have gaps (a rolled-back tool call); they are mapped back")
    if seqs:
        out.context = _mapped(memory.context(format=format), seqs)
    return out


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
    if seqs[-1] == len(seqs) - 1:
        return ctx
    left = tuple(
        item._replace(first_seq=_at(seqs, item.first_seq), last_seq=_at(seqs, item.last_seq)) for item in ctx.left_out
    )
    window = (seqs[ctx.window[0]], seqs[ctx.window[1]]) if ctx.window is not None else None
    truncated = tuple(t._replace(seq=_at(seqs, t.seq)) for t in ctx.truncated)
    return ctx._replace(left_out=tuple(LeftOut(*x) for x in left), window=window, truncated=truncated)


def _last(store: SessionStore, session_id: str, user_id: str | None, seen: int) -> int:
    loaded = store.load(session_id, user_id=user_id)
    return max([seen, *(s.seq for s in (*loaded.pinned, *loaded.window)), loaded.state.window_start - 1])
