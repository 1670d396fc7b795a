"""A store in plain files: one directory per session, its messages in an append-only JSONL file.

Layout::

    root/sessions/<session id>/messages.jsonl   one export line per message, seq order, append-only
    root/sessions/<session id>/session.json     info, state and counters, replaced atomically
    root/sessions/<session id>/lock             flock'd by every process that changes the session
    root/sessions/<session id>/ids/             the message-id index (derived; rebuilt if lost)

The message file is human-readable and greppable (``grep -l invoice
root/sessions/*/messages.jsonl``), and its lines are exactly the lines of an
export. Design:

* An append writes whole lines and ``fsync``\\ s them before it returns, then
  updates ``session.json``. A crash between the two loses nothing: the
  record is caught up from the lines after its recorded offset.
* A torn last line (a crash in the middle of a write, never acknowledged)
  is cut off the next time a process takes the session's lock; a corrupt
  line anywhere else is reported with the file and line number.
* Reads never scan the archive: lines are sorted by seq, so the window is
  found by binary search over byte offsets, and the pinned lines' offsets
  are kept in ``session.json``.
* Processes coordinate with ``fcntl.flock`` on the session's lock file;
  several locks are always taken from a fork towards its ancestors.
* Message ids are unique per session and its shared history (the SQLite
  store makes them unique per database). A small id index per session
  (``ids/``, see :mod:`convmem.stores.files._ids`) answers the check by
  reading one bucket, not the history.

Example::

    store = FileStore("~/chats")
    memory = Memory(model="gpt-4o", store=store)
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import replace

from ...errors import ConflictError, InvalidMessageError, SessionNotFoundError, StoreError
from ...messages import PINNED_ROLES, Message
from .._async import AsyncStoreWrapper
from .._common import (
    check_batch,
    check_deletable,
    export_line,
    json_object,
    now,
)
from ..base import LoadedSession, SessionState, StoredMessage
from ._base import META, guarded
from ._ids import IdIndex
from ._jsonl import LineFile
from ._meta import Meta, read_meta, write_meta
from ._sessions import FileSessions

__all__ = ["AsyncFileStore", "FileStore"]


class FileStore(FileSessions):
    """A :class:`~convmem.stores.base.SessionStore` in a directory of JSONL files.

    Args:
        root: the directory (created if missing).
    """

    # -- messages --------------------------------------------------------------------------
    @guarded
    def append(
        self,
        session_id: str,
        messages: Sequence[tuple[Message, int]],
        *,
        user_id: str | None = None,
        model: str | None = None,
    ) -> list[int]:
        check_batch(messages)
        if not messages:
            return []  # a session is created by its first message, not by an empty batch
        directory = self._dir(session_id, creating=True)
        for _ in range(3):  # the directory may vanish (a concurrent delete) between mkdir and lock
            directory.mkdir(exist_ok=True)
            try:
                with self._locked(session_id):
                    return self._append_locked(session_id, messages, user_id, model)
            except SessionNotFoundError:
                if self._meta(session_id) is not None:
                    raise
        raise StoreError(f"file store {self.root}: session {session_id!r} keeps disappearing")

    def _append_locked(
        self, session_id: str, messages: Sequence[tuple[Message, int]], user_id: str | None, model: str | None
    ) -> list[int]:
        path = self._dir(session_id) / META
        meta = read_meta(path)
        lines = self._lines(session_id)
        if meta is None:
            stamp = now()
            meta = Meta(session_id, user_id, stamp, stamp, model=model)
            write_meta(path, meta)  # first, so that no line can exist without its owner
        elif meta.user_id != user_id or meta.deleted:
            raise SessionNotFoundError(session_id)  # never reveal, nor write into, another user's session
        lines.repair(meta.synced)
        meta = self._indexed(meta.caught_up(lines)[0], lines)
        ids = [m.id or "" for m, _ in messages]
        taken = IdIndex(self._dir(session_id)).find(ids)
        for seg in self._segments(self._chain(meta))[:-1]:  # the history shared with ancestors
            taken |= IdIndex(self._dir(seg.session_id)).find(ids, seg.hi)
        if taken:
            index = next(i for i, message_id in enumerate(ids) if message_id in taken)
            raise InvalidMessageError(f"duplicate message id {ids[index]!r}", field="id", index=index)
        seqs = list(range(meta.next_seq, meta.next_seq + len(messages)))
        lines.append(b"".join(export_line(StoredMessage(s, m, t)) for s, (m, t) in zip(seqs, messages, strict=True)))
        IdIndex(self._dir(session_id)).add(zip(seqs, ids, strict=True))
        meta, _ = replace(meta, updated_at=now()).caught_up(lines)
        # Not fsync'd on purpose: the lines are, and a stale record is caught up from them.
        write_meta(path, replace(meta, indexed=meta.synced), durable=False)
        return seqs

    @guarded
    def load(self, session_id: str, *, user_id: str | None = None, unfolded_limit: int = 0) -> LoadedSession:
        with self._session(session_id, user_id) as (meta, _):
            state = meta.state
            chain = self._chain(meta)
            pinned: list[StoredMessage] = []
            for seg in self._segments(chain):
                span = seg.clip(state.pinned_start, None)
                holder, lines = chain[seg.session_id]
                if span is not None:
                    pinned += [lines.read_at(off) for seq, off in holder.pinned if span[0] <= seq <= span[1]]
            window = [r for r in self._read(chain, state.window_start, None) if r.message.role not in PINNED_ROLES]
            unfolded: list[StoredMessage] = []
            if unfolded_limit and state.window_start > state.folded_to + 1:
                rows = self._read(chain, state.folded_to + 1, state.window_start - 1)
                unfolded = list(deque((r for r in rows if r.message.role not in PINNED_ROLES), maxlen=unfolded_limit))
            self.rows_read += len(pinned) + len(window) + len(unfolded)
            return LoadedSession(meta.info(), state, pinned, window, unfolded)

    @guarded
    def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        with self._session(session_id, user_id) as (meta, _):
            if meta.state.version != expected_version:
                raise ConflictError(
                    f"session {meta.id!r} state is at version {meta.state.version}, expected {expected_version}"
                )
            saved = replace(state, stats=json_object(state.stats, "session stats"), version=expected_version + 1)
            write_meta(self._dir(meta.id) / META, replace(meta, state=saved, updated_at=now()))
            return saved

    @guarded
    def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> Iterator[StoredMessage]:
        meta = self._meta(self._resolve(session_id, user_id))
        if meta is None:
            raise SessionNotFoundError(session_id)
        return self._stream(self._chain(meta), from_seq, to_seq)

    def _stream(self, chain: dict[str, tuple[Meta, LineFile]], lo: int, hi: int | None) -> Iterator[StoredMessage]:
        try:
            yield from self._read(chain, lo, hi)
        except OSError as exc:
            raise StoreError(f"file store {self.root}: {exc.filename or ''}: {exc.strerror or exc}") from exc

    @guarded
    def delete_messages(self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None) -> None:
        with self._session(session_id, user_id) as (meta, lines):
            doomed = set(seqs)
            forks = [(m.id, m.fork_seq or 0) for m in self._all() if m.parent_id == meta.id]
            check_deletable(meta.id, doomed, meta.fork_seq, forks)
            lines.rewrite(drop=doomed)
            indexed = IdIndex(self._dir(meta.id)).rebuild(lines)
            write_meta(self._dir(meta.id) / META, replace(meta, updated_at=now(), indexed=indexed).recounted(lines))


class AsyncFileStore(AsyncStoreWrapper[FileStore]):
    """The async twin of :class:`FileStore`: the same store, each call run in a worker thread."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        super().__init__(FileStore(root))
        self.root = self.sync.root
