"""A store in plain files: one directory per session, its messages in an append-only JSONL file.

Layout (``<user>``: see :func:`convmem.stores.files._layout.user_dir`; session ids are scoped by user)::

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

import os
import shutil
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import SessionLostError, SessionNotFoundError, StoreError
from ...messages import PINNED_ROLES, StoredMessage
from ...session import LoadedSession, SessionInfo, SessionState
from .._async import AsyncStoreWrapper
from .._export import export_line, export_session, parse_export
from .._forget import ForgetReceipt
from .._record import damaged_info
from .._writes import (
    admit,
    check_deletable,
    check_expected,
    check_fork,
    fork_home,
    fork_record,
    ids_checked,
    json_object,
    new_session_id,
    now,
    replayed,
    saved_state,
    taken,
    unfolded_span,
    written_state,
)
from ..base import AppendRequest
from ._ids import IdIndex
from ._jsonl import LineFile, fsync_dir
from ._layout import MESSAGES, META, Layout, guarded
from ._meta import BACKEND, Meta, write_meta

if TYPE_CHECKING:
    from .longterm import FileBlockStore, FileFactStore, FileRecallStore

__all__ = ["AsyncFileStore", "FileStore"]


@ids_checked
class FileStore:
    """A :class:`~convmem.stores.base.SessionStore` in a directory of JSONL files.

    Args:
        root: the directory (created if missing).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.files = Layout(root)  # the directory: paths, records, locks, reads; StoreError if unusable
        self.root = self.files.root
        self.rows_read = 0  # rows read by load(); shows (and lets tests check) that it skips the archive

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

    def path_of(self, session_id: str, *, user_id: str | None = None) -> Path:
        """The directory that holds a session's files (``messages.jsonl`` is greppable); it may not exist."""
        return self.files.dir(user_id, session_id)

    # -- messages --------------------------------------------------------------------------
    @guarded
    def append(self, request: AppendRequest) -> list[int]:
        saved = written_state(request)
        if not request.messages:
            return []  # a session is created by its first message, not by an empty batch
        session_id, user_id = request.session_id, request.user_id
        directory = self.files.dir(user_id, session_id, creating=True)
        for _ in range(3):  # the directory may vanish (a concurrent delete) between mkdir and lock
            directory.mkdir(parents=True, exist_ok=True)
            try:
                with self.files.locked(user_id, session_id):
                    return self._append_locked(request, saved)
            except SessionNotFoundError:
                if self.files.meta(user_id, session_id) is not None:
                    raise
        raise StoreError(f"file store {self.root}: session {session_id!r} keeps disappearing")

    def _append_locked(self, request: AppendRequest, saved: SessionState | None) -> list[int]:
        session_id, user_id, messages = request.session_id, request.user_id, request.messages
        directory = self.files.dir(user_id, session_id)
        meta = self.files.meta(user_id, session_id)
        lines = self.files.lines(user_id, session_id)
        live = meta is not None and not meta.deleted
        if live:
            assert meta is not None
            lines.repair(meta.synced)
            meta = self.files.indexed(meta.caught_up(lines)[0], lines)
        try:
            admit(
                request, meta.record().view() if meta is not None else None, deleted=meta is not None and meta.deleted
            )
        except SessionLostError:
            if meta is None:
                shutil.rmtree(directory, ignore_errors=True)  # the directory this call made: leave no trace
            raise
        if meta is not None:
            again = replayed(session_id, messages, self.files.stored(meta, [m.id or "" for m, _ in messages]))
            if again is not None:
                return again
            return self.files.write(meta, lines, messages, saved, created=False)
        stamp = now()
        meta = Meta(session_id, user_id, stamp, stamp, model=request.model)
        try:
            write_meta(directory / META, meta)  # first, so that no line can exist without its owner
            return self.files.write(meta, lines, messages, saved, created=True)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)  # nothing of a session whose first write failed
            raise

    @guarded
    def load(self, session_id: str, *, user_id: str | None = None, unfolded_limit: int = 0) -> LoadedSession:
        with self.files.session(session_id, user_id) as (meta, _):
            state = meta.state
            chain = self.files.chain(meta)
            pinned: list[StoredMessage] = []
            for seg in self.files.segments(chain):
                span = seg.clip(state.pinned_start, None)
                holder, lines = chain[seg.session_id]
                if span is not None:
                    pinned += [lines.read_at(off) for seq, off in holder.pinned if span[0] <= seq <= span[1]]
            window = [r for r in self.files.read(chain, state.window_start, None) if r.message.role not in PINNED_ROLES]
            unfolded: list[StoredMessage] = []
            tail = unfolded_span(state, unfolded_limit)
            if tail is not None:
                rows = self.files.read(chain, *tail)
                unfolded = list(deque((r for r in rows if r.message.role not in PINNED_ROLES), maxlen=unfolded_limit))
            self.rows_read += len(pinned) + len(window) + len(unfolded)
            return meta.record().loaded(state, pinned, window, unfolded)

    @guarded
    def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        with self.files.session(session_id, user_id) as (meta, _):
            check_expected(meta.id, (meta.next_seq, meta.state.version), None, expected_version)
            saved = saved_state(state, expected_version)
            write_meta(self.files.dir(user_id, meta.id) / META, replace(meta, state=saved, updated_at=now()))
            return saved

    @guarded
    def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> Iterator[StoredMessage]:
        meta = self.files.meta(user_id, self.files.resolve(session_id, user_id))
        if meta is None:
            raise SessionNotFoundError(session_id)
        return self._stream(self.files.chain(meta), from_seq, to_seq)

    def _stream(self, chain: dict[str, tuple[Meta, LineFile]], lo: int, hi: int | None) -> Iterator[StoredMessage]:
        try:
            yield from self.files.read(chain, lo, hi)
        except OSError as exc:
            raise StoreError(f"file store {self.root}: {exc.filename or ''}: {exc.strerror or exc}") from exc

    @guarded
    def delete_messages(
        self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None, expected_seq: int | None = None
    ) -> None:
        with self.files.session(session_id, user_id) as (meta, lines):
            check_expected(meta.id, (meta.next_seq, meta.state.version), expected_seq, None)
            doomed = set(seqs)
            forks = [(m.id, m.fork_seq or 0) for m in self.files.all(user_id) if m.parent_id == meta.id]
            check_deletable(meta.id, doomed, meta.fork_seq, forks)
            lines.rewrite(drop=doomed)
            directory = self.files.dir(user_id, meta.id)
            indexed = IdIndex(directory).rebuild(lines)
            write_meta(directory / META, replace(meta, updated_at=now(), indexed=indexed).recounted(lines))

    # -- sessions --------------------------------------------------------------------------
    def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        found = []
        for entry, meta in self.files.scan(user_id):
            if isinstance(meta, StoreError):
                found.append(damaged_info(entry, user_id, meta))
            elif not meta.deleted:
                try:
                    found.append(meta.caught_up(self.files.lines(user_id, meta.id))[0].record().info())
                except StoreError as exc:
                    found.append(damaged_info(meta.id, user_id, exc))
        found.sort(key=lambda i: (i.updated_at, i.id), reverse=True)
        return found[:limit]

    @guarded
    def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        with self.files.session(session_id, user_id) as (meta, _):
            meta = replace(
                meta,
                title=meta.title if title is None else title,
                updated_at=now(),
                metadata=meta.metadata if metadata is None else json_object(metadata),
            )
            write_meta(self.files.dir(user_id, meta.id) / META, meta)
            return meta.record().info()

    @guarded
    def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        self._remove(user_id, self.files.resolve(session_id, user_id))

    def _remove(self, user_id: str | None, session_id: str) -> None:
        directory = self.files.dir(user_id, session_id)
        with self.files.locked(user_id, session_id):
            meta = self.files.meta(user_id, session_id)
            if meta is None:
                return
            children = [m.fork_seq or 0 for m in self.files.all(user_id) if m.parent_id == session_id]
            if children:
                # Forks still read this history: hide the session and keep only the rows they share.
                lines = self.files.lines(user_id, session_id)
                lines.rewrite(upto=max(children))
                indexed = IdIndex(directory).rebuild(lines)
                write_meta(directory / META, replace(meta, deleted=True, indexed=indexed).recounted(lines))
                return
            trash = self.files.trash / os.urandom(8).hex()
            os.rename(directory, trash)  # atomic: the session is gone at once
            fsync_dir(directory.parent)
        shutil.rmtree(trash, ignore_errors=True)
        if meta.parent_id is not None:
            parent = self.files.meta(user_id, meta.parent_id)
            if parent is not None and parent.deleted:
                self._remove(user_id, parent.id)

    @guarded
    def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]:
        cutoff = now() - older_than
        doomed = sorted(m.id for m in self.files.all(user_id) if not m.deleted and self.files.updated(m) < cutoff)
        for session_id in doomed:
            self._remove(user_id, session_id)
        return doomed

    @guarded
    def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo:
        with self.files.session(session_id, user_id) as (source, _):
            check_fork(source.id, source.next_seq, at_seq)
            chain = self.files.chain(source)
            count = tokens = 0
            for row in self.files.read(chain, 0, at_seq):
                count, tokens = count + 1, tokens + row.tokens
            ancestors = [m for m, _ in chain.values()]
            parent = ancestors[fork_home([(m.id, m.fork_seq) for m in ancestors], at_seq)]
            fork_id = new_session_id()
            made = fork_record(
                source.record(),
                at_seq,
                key=fork_id,
                session_id=fork_id,
                parent=(parent.id, parent.id),
                shared=(count, tokens),
                when=now(),
            )
            fork = Meta.of(made)
            # Hold the parent's lock (fork before ancestor) so it cannot be removed meanwhile.
            with self.files.locked(user_id, parent.id) if parent.id != source.id else nullcontext():
                self.files.index_shared(user_id, parent.id)
                self.files.dir(user_id, fork.id).mkdir()
                write_meta(self.files.dir(user_id, fork.id) / META, fork)
            return made.info()

    # -- export / import -------------------------------------------------------------------
    @guarded
    def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        with self.files.session(session_id, user_id) as (meta, _):
            return export_session(meta.record(), list(self.files.read(self.files.chain(meta), 0, None)))

    @guarded
    def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        parsed = parse_export(data)
        target = self.files.dir(user_id, parsed.id, creating=True)
        if target.exists():  # the user's own session of that id
            raise taken(parsed.id)
        # Build the session aside and rename it into place: an import is visible whole or not at all.
        target.parent.mkdir(exist_ok=True)
        staging = target.parent / f".import-{os.urandom(6).hex()}"
        staging.mkdir()
        try:
            lines = LineFile(staging / MESSAGES)
            lines.append(b"".join(map(export_line, parsed.rows)))
            IdIndex(staging).add((r.seq, r.message.id) for r in parsed.rows)
            made = parsed.record(BACKEND, parsed.id, user_id)
            meta = Meta.of(made).recounted(lines)
            write_meta(staging / META, replace(meta, updated_at=parsed.updated_at, indexed=meta.synced))
            try:
                os.rename(staging, target)
            except OSError:
                raise taken(parsed.id) from None
            fsync_dir(target.parent)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return made.info()

    @guarded
    def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        meta = self.files.meta(user_id, self.files.resolve(session_id, user_id))
        if meta is None:
            raise SessionNotFoundError(session_id)
        return meta.caught_up(self.files.lines(user_id, meta.id))[0].record().info()

    # -- erasure (see convmem.stores._forget) -------------------------------------------------
    @guarded
    def forget(self, *, user_id: str | None, session_id: str | None = None, compact: bool = False) -> ForgetReceipt:
        """Erase the user, or the session with its forks: directories removed, logs rewritten (:mod:`._forget`)."""
        from . import _forget  # loads the long-term logs (numpy) only when something is erased

        counts, erased = _forget.erase(self.files, self.root, user_id, session_id, self._remove)
        return ForgetReceipt(user_id, session_id, counts, tuple(erased), compacted=compact)

    def compact(self) -> None:
        """Nothing to do: ``forget`` leaves no erased byte in the store's files."""

    # -- long-term memory (needs the ``recall`` extra) ---------------------------------------
    def facts(self) -> FileFactStore:
        """The facts in this store's directory (``longterm/facts.jsonl``)."""
        from .longterm import FileFactStore

        return FileFactStore(self)

    def blocks(self) -> FileBlockStore:
        """The working blocks in this store's directory (``longterm/blocks.jsonl``)."""
        from .longterm import FileBlockStore

        return FileBlockStore(self)

    def recall(self) -> FileRecallStore:
        """The recall documents and vectors in this store's directory (``longterm/recall/``)."""
        from .longterm import FileRecallStore

        return FileRecallStore(self)

    @guarded
    def close(self) -> None:
        """Nothing to release: every operation opens and closes its own files."""


class AsyncFileStore(AsyncStoreWrapper[FileStore]):
    """The async twin of :class:`FileStore`: the same store, each call run in a worker thread."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        super().__init__(FileStore(root))
        self.root = self.sync.root
