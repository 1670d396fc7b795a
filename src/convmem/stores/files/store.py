"""A store in plain files: one directory per session, its messages in an append-only JSONL file.

Layout (``<user>``: see :func:`convmem.stores.files._base.user_dir`; session ids are scoped by user)::

    root/users/<user>/<session id>/messages.jsonl   one export line per message, seq order, append-only
    root/users/<user>/<session id>/session.json     info, state and counters, replaced atomically
    root/users/<user>/<session id>/lock             flock'd by every process that changes the session
    root/users/<user>/<session id>/ids/             the message-id index (derived; rebuilt if lost)

The message file is human-readable and greppable (``grep -l invoice
root/users/*/*/messages.jsonl``; :meth:`FileStore.path_of` names a session's
directory), and its lines are exactly the lines of an export. Design:

* An append writes whole lines and ``fsync``\\ s them before it returns, then
  updates ``session.json``. A crash between the two loses nothing: the
  record is caught up from the lines after its recorded offset. Appends and
  state cannot share one transaction here, so an append that carries a state
  (see :mod:`convmem.stores.base`) cuts its lines back off if the record with
  that state cannot be written (a full disk): either both are durable, or the
  file is as it was. A crash between the two leaves the new lines under the
  previous state, which is a consistent session (the writer never
  acknowledged them; a retry of the batch stores nothing).
* A torn last line (a crash in the middle of a write, never acknowledged)
  is cut off the next time a process takes the session's lock; a corrupt
  line anywhere else is reported with the file and line number.
* Reads never scan the archive: lines are sorted by seq, so the window is
  found by binary search over byte offsets, and the pinned lines' offsets
  are kept in ``session.json``.
* Processes coordinate with ``fcntl.flock`` on the session's lock file;
  several locks are always taken from a fork towards its ancestors.
* Message ids are unique per session and its shared history, like on every
  backend. A small id index per session (``ids/``, see
  :mod:`convmem.stores.files._ids`) answers the check by reading one bucket,
  not the history; a hit is confirmed by reading its line.

Example::

    store = FileStore("~/chats")
    memory = Memory(model="gpt-4o", store=store)
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import replace

from ...errors import SessionLostError, SessionNotFoundError, StoreError
from ...messages import PINNED_ROLES, Message, StoredMessage
from ...session import LoadedSession, SessionState
from .._async import AsyncStoreWrapper
from .._common import (
    check_batch,
    check_deletable,
    export_line,
    json_object,
    now,
)
from .._writes import check_expected, replayed, state_for_write
from ._base import META, guarded
from ._ids import IdIndex, IndexDamaged, scan_ids
from ._jsonl import LineFile
from ._meta import Meta, write_meta
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
        expected_seq: int | None = None,
        expected_version: int | None = None,
        state: SessionState | None = None,
    ) -> list[int]:
        check_batch(messages)
        if not messages:
            return []  # a session is created by its first message, not by an empty batch
        saved = state_for_write(state, expected_version)
        view = (expected_seq, expected_version, saved)
        directory = self._dir(user_id, session_id, creating=True)
        for _ in range(3):  # the directory may vanish (a concurrent delete) between mkdir and lock
            directory.mkdir(parents=True, exist_ok=True)
            try:
                with self._locked(user_id, session_id):
                    return self._append_locked(session_id, messages, user_id, model, *view)
            except SessionNotFoundError:
                if self._meta(user_id, session_id) is not None:
                    raise
        raise StoreError(f"file store {self.root}: session {session_id!r} keeps disappearing")

    def _append_locked(
        self,
        session_id: str,
        messages: Sequence[tuple[Message, int]],
        user_id: str | None,
        model: str | None,
        expected_seq: int | None,
        expected_version: int | None,
        saved: SessionState | None,
    ) -> list[int]:
        directory = self._dir(user_id, session_id)
        meta = self._meta(user_id, session_id)
        lines = self._lines(user_id, session_id)
        live = meta is not None and not meta.deleted
        if live:
            assert meta is not None
            lines.repair(meta.synced)
            meta = self._indexed(meta.caught_up(lines)[0], lines)
        try:
            found = (meta.next_seq, meta.state.version) if live and meta is not None else None
            check_expected(session_id, found, expected_seq, expected_version)
        except SessionLostError:
            if meta is None:
                shutil.rmtree(directory, ignore_errors=True)  # the directory this call made: leave no trace
            raise
        if meta is not None and meta.deleted:
            raise SessionNotFoundError(session_id)  # hidden while its forks live; its id stays taken
        if meta is not None:
            again = replayed(session_id, messages, self._stored(meta, [m.id or "" for m, _ in messages]))
            if again is not None:
                return again
            return self._write(meta, lines, messages, saved, created=False)
        stamp = now()
        meta = Meta(session_id, user_id, stamp, stamp, model=model)
        try:
            write_meta(directory / META, meta)  # first, so that no line can exist without its owner
            return self._write(meta, lines, messages, saved, created=True)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)  # nothing of a session whose first write failed
            raise

    def _write(
        self,
        meta: Meta,
        lines: LineFile,
        messages: Sequence[tuple[Message, int]],
        saved: SessionState | None,
        *,
        created: bool,
    ) -> list[int]:
        """Append the batch; with a state, write the record too, or cut the lines back off (one outcome)."""
        directory = self._dir(meta.user_id, meta.id)
        size = lines.size()
        seqs = list(range(meta.next_seq, meta.next_seq + len(messages)))
        data = b"".join(export_line(StoredMessage(s, m, t)) for s, (m, t) in zip(seqs, messages, strict=True))
        try:
            lines.append(data)
        except OSError:
            with contextlib.suppress(OSError):
                lines.truncate(size)  # a write cut short may have left whole lines of the batch: none stays
            raise
        try:
            IdIndex(directory).add(zip(seqs, (m.id for m, _ in messages), strict=True))
            meta, _ = replace(meta, updated_at=now(), state=saved or meta.state).caught_up(lines)
            # A record without a new state is derived data (caught up from the lines): no directory fsync.
            write_meta(directory / META, replace(meta, indexed=meta.synced), durable=saved is not None)
        except OSError:
            if saved is None and not created:
                return seqs  # the lines are durable; the record catches up from them on the next read
            lines.truncate(size)  # the state could not be saved with its messages: neither stays
            raise
        return seqs

    def _stored(self, meta: Meta, ids: list[str]) -> dict[str, StoredMessage]:
        """The rows of the session's history (its shared history too) that hold any of ``ids``."""
        found: dict[str, StoredMessage] = {}
        chain = self._chain(meta)
        for seg in self._segments(chain):
            lines = chain[seg.session_id][1]
            for message_id, seqs in self._locate(meta, seg.session_id, lines, ids, seg.hi).items():
                for seq in seqs:
                    if seq >= seg.lo:
                        row = next(lines.read(lines.find(seq), seq), None)
                        if row is not None and row.message.id == message_id:  # index entries may be stale
                            found[message_id] = row
        return found

    def _locate(self, meta: Meta, session_id: str, lines: LineFile, ids: list[str], hi: int) -> dict[str, list[int]]:
        """The index's answer; a damaged index is rebuilt (the session's own, whose lock is held) or bypassed."""
        index = IdIndex(self._dir(meta.user_id, session_id))
        try:
            return index.locate(ids, hi)
        except IndexDamaged:
            if session_id != meta.id:  # an ancestor's, whose lock is not held: read its shared lines instead
                return scan_ids(lines, ids, hi)
            index.rebuild(lines)
            try:
                return index.locate(ids, hi)
            except IndexDamaged:  # damaged again as it was written (a failing disk): read the lines instead
                return scan_ids(lines, ids, hi)

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
            return LoadedSession(meta.info(), state, pinned, window, unfolded, meta.next_seq)

    @guarded
    def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        with self._session(session_id, user_id) as (meta, _):
            check_expected(meta.id, (meta.next_seq, meta.state.version), None, expected_version)
            saved = replace(state, stats=json_object(state.stats, "session stats"), version=expected_version + 1)
            write_meta(self._dir(user_id, meta.id) / META, replace(meta, state=saved, updated_at=now()))
            return saved

    @guarded
    def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> Iterator[StoredMessage]:
        meta = self._meta(user_id, self._resolve(session_id, user_id))
        if meta is None:
            raise SessionNotFoundError(session_id)
        return self._stream(self._chain(meta), from_seq, to_seq)

    def _stream(self, chain: dict[str, tuple[Meta, LineFile]], lo: int, hi: int | None) -> Iterator[StoredMessage]:
        try:
            yield from self._read(chain, lo, hi)
        except OSError as exc:
            raise StoreError(f"file store {self.root}: {exc.filename or ''}: {exc.strerror or exc}") from exc

    @guarded
    def delete_messages(
        self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None, expected_seq: int | None = None
    ) -> None:
        with self._session(session_id, user_id) as (meta, lines):
            check_expected(meta.id, (meta.next_seq, meta.state.version), expected_seq, None)
            doomed = set(seqs)
            forks = [(m.id, m.fork_seq or 0) for m in self._all(user_id) if m.parent_id == meta.id]
            check_deletable(meta.id, doomed, meta.fork_seq, forks)
            lines.rewrite(drop=doomed)
            directory = self._dir(user_id, meta.id)
            indexed = IdIndex(directory).rebuild(lines)
            write_meta(directory / META, replace(meta, updated_at=now(), indexed=indexed).recounted(lines))


class AsyncFileStore(AsyncStoreWrapper[FileStore]):
    """The async twin of :class:`FileStore`: the same store, each call run in a worker thread."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        super().__init__(FileStore(root))
        self.root = self.sync.root
