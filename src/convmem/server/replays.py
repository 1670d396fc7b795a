"""A worker's turn replays, kept: each session's :class:`~.replay.Line` and the contexts already built.

The inspector asks for the last turn, the summary history and then one turn
per slider position. A context at turn N is computed once and kept (up to
``MAX_CONTEXTS``); a turn not seen yet is built from the nearest checkpoint of
the session's line, which is extended (never rebuilt) as the session grows.
The last turn needs no replay at all: it is the live session's own context,
opened with the block versions of its last message. Lines are kept up to
``MAX_ROWS`` replayed messages in all, least recently used dropped first.

A line stays valid while the stored session only grows: it is dropped when
the session's saved options or the user's block history change, or when a
replayed message is gone (a rollback, a delete), and every context built from
it with it. Requests for one session share its line: one at a time extends it,
``CHUNK`` batches per turn of the lock, so a turn already replayed is answered
while a long extension (the summary history) goes on.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ServiceError
from ..memory import Memory
from ..memory.options import open_options, stored_config
from ..session import LoadedSession, SessionInfo
from ..stores.base import SessionStore
from .blocklog import BlockLog, Timeline, static_blocks
from .replay import Line, Replay, SummaryStep

__all__ = ["MAX_CONTEXTS", "MAX_ROWS", "WAIT", "Replays", "replay_pending", "turn_error"]

#: Contexts kept per worker; one is the size of a request (a few KiB to a few hundred).
MAX_CONTEXTS = 256
#: Replayed messages kept per worker, over all lines (each row is held twice: as stored and as replayed).
MAX_ROWS = 100_000
#: Batches a request replays before letting another request for the same session have the line.
CHUNK = 64
#: Seconds a request replays before answering that the replay goes on (well within the request timeout);
#: what it replayed is kept, so asking again continues from there.
WAIT = 8.0


def turn_error(detail: str) -> ServiceError:
    """A turn that cannot be replayed because the session has no such message: a 422."""
    return ServiceError(422, "invalid-seq", "Invalid turn", detail)


def replay_pending(tip: int, last: int) -> ServiceError:
    """The line has not reached the turn yet within ``WAIT``: a 503 with how far it got (``replayed_to``) and
    ``last_seq``; the progress is kept, and the inspector shows it and asks again."""
    detail = f"replaying this session: at seq {tip} of {last}; ask again to continue"
    return ServiceError(503, "replay-pending", "Replay in progress", detail, replayed_to=tip, last_seq=last)


@dataclass
class _Entry:
    line: Line
    config: Mapping[str, Any] | None
    timeline: Timeline
    generation: int
    lock: threading.Lock


class Replays:
    """Lines and contexts of one worker, over the service's store and block log (thread-safe)."""

    def __init__(self, store: SessionStore, log: BlockLog) -> None:
        self.store, self.log = store, log
        self._entries: OrderedDict[tuple[str, str | None], _Entry] = OrderedDict()
        self._contexts: OrderedDict[tuple[Any, ...], Replay] = OrderedDict()
        self._lock = threading.Lock()
        self._generation = 0
        self.replayed_batches = 0  # batches replayed by this worker (the tests check what is not redone)

    def turn(self, info: SessionInfo, user: str | None, seq: int, fmt: str | None, *, limit: int) -> Replay:
        """The context right after message ``seq``; a 422 before any replay if there is no such turn."""
        loaded = self.store.load(info.id, user_id=user)
        last = _last(loaded)
        if seq > last:
            raise turn_error(f"no message with seq {seq}; the session's seqs run up to {last}")
        entry = self._entry(info, user, loaded)
        key = (info.id, user, entry.generation, seq, fmt)
        with self._lock:
            cached = self._contexts.get(key)
            if cached is not None:
                self._contexts.move_to_end(key)
                return cached
        if seq == last and loaded.state.window_start <= last:
            result = self._live(info, user, loaded, entry, fmt)
        else:
            _check_limit(info, limit)
            self._ensure(info, user, entry, seq, last)
            with entry.lock:
                result = entry.line.turn(seq, fmt)
            result.last_seq = last
            self._notes(loaded, result, live=False)
        with self._lock:
            self._contexts[key] = result
            while len(self._contexts) > MAX_CONTEXTS:
                self._contexts.popitem(last=False)
        return result

    def summaries(self, info: SessionInfo, user: str | None, *, limit: int) -> list[SummaryStep]:
        """Every running summary the session had, oldest first (the whole line, extended once)."""
        _check_limit(info, limit)
        loaded = self.store.load(info.id, user_id=user)
        entry = self._entry(info, user, loaded)
        self._ensure(info, user, entry, None, _last(loaded))
        with entry.lock:
            return list(entry.line.summaries)

    # -- lines ---------------------------------------------------------------------------------
    def _entry(self, info: SessionInfo, user: str | None, loaded: LoadedSession) -> _Entry:
        config = stored_config(loaded.state) or None
        timeline = self.log.timeline(user or "")
        with self._lock:
            entry = self._entries.get((info.id, user))
            if entry is not None and (
                entry.config != config
                or entry.timeline.signature != timeline.signature
                or info.message_count < len(entry.line.rows)
                or _last(loaded) < entry.line.tip
            ):
                entry = None
            if entry is None:
                self._generation += 1
                options, _ = open_options(loaded.state, {}, info.model)
                line = Line(info.id, user, options, timeline)
                entry = _Entry(line, config, timeline, self._generation, threading.Lock())
                self._entries[(info.id, user)] = entry
            self._entries.move_to_end((info.id, user))
            return entry

    def _ensure(self, info: SessionInfo, user: str | None, entry: _Entry, target: int | None, last: int) -> None:
        """Extend the line until it holds ``target`` (None: the whole session), ``CHUNK`` batches at a time.

        Raises:
            ServiceError: 503 ``replay-pending``, still short of it after ``WAIT`` seconds (the progress is kept).
        """
        deadline = time.monotonic() + WAIT
        while True:
            with entry.lock:
                line = entry.line
                if target is not None and line.tip >= target:
                    return
                rows = iter(self.store.messages(info.id, user_id=user, from_seq=max(0, line.tip)))
                if line.rows:
                    first = next(rows, None)
                    if first is None or first.seq != line.tip or first.message.id != line.rows[-1].message.id:
                        # a replayed message is gone (a rollback, then new messages): start over
                        entry.line = Line(info.id, user, line.options, line.timeline)
                        with self._lock:
                            self._generation += 1
                            entry.generation = self._generation
                        continue
                before = len(line.ends)
                finished = line.extend(rows, target, CHUNK)
                self.replayed_batches += len(line.ends) - before
            self._bound()
            if finished:
                return
            if time.monotonic() > deadline:  # checked after a chunk: every request moves the line on
                raise replay_pending(entry.line.tip, last)

    def _bound(self) -> None:
        with self._lock:
            while len(self._entries) > 1 and sum(len(e.line.rows) for e in self._entries.values()) > MAX_ROWS:
                self._entries.popitem(last=False)

    # -- the last turn: the live session's own context -----------------------------------------
    def _live(
        self, info: SessionInfo, user: str | None, loaded: LoadedSession, entry: _Entry, fmt: str | None
    ) -> Replay:
        rows = sorted((*loaded.pinned, *loaded.window), key=lambda s: s.seq)
        blocks, unknown = entry.timeline.at(rows[-1].message.created_at if rows else None)
        memory = Memory.open(info.id, store=self.store, user_id=user, blocks=static_blocks(blocks))
        last = _last(loaded)
        result = Replay(seq=last, last_seq=last, context=memory.context(format=fmt))
        record = loaded.state.summary
        if record is not None:
            made = [
                s.seq for s in rows if s.message.created_at is not None and s.message.created_at <= record.created_at
            ]
            after = max(made, default=record.last_seq)
            result.summary = SummaryStep(after, record.text, record.first_seq, record.last_seq, record.tokens)
        for reason in unknown:
            result.exact = False
            result.notes.append(f"{reason}; the context uses its current text")
        if blocks:
            result.notes.append("blocks at their versions then: " + ", ".join(f"{b.name} v{b.version}" for b in blocks))
        result.notes.append("the last turn is the live session's own context (no replay)")
        self._notes(loaded, result, live=True)
        return result

    def _notes(self, loaded: LoadedSession, result: Replay, *, live: bool) -> None:
        if not stored_config(loaded.state):
            result.exact = False
            result.notes.append("the session was saved without its options; defaults were used")
        if loaded.state.pinned_start > 0 and not live:
            result.exact = False
            result.notes.append("clear(keep_system=False) was called; the replay does not repeat it")


def _check_limit(info: SessionInfo, limit: int) -> None:
    if info.message_count > limit:
        detail = f"turn replay is limited to {limit} messages; this session has {info.message_count}"
        raise ServiceError(422, "replay-limit", "Session too long to replay", detail)


def _last(loaded: LoadedSession) -> int:
    """The session's last seq, from what opening it reads (never the archive)."""
    seqs = [s.seq for s in (*loaded.pinned, *loaded.window)]
    return max([*seqs, loaded.state.window_start - 1, loaded.state.folded_to])
