"""A store in plain files: one directory per session, its messages in an append-only JSONL file.

Layout::

    root/sessions/<session id>/messages.jsonl   one export line per message, seq order, append-only
    root/sessions/<session id>/session.json     info, state and counters, replaced atomically
    root/sessions/<session id>/lock             flock'd by every process that changes the session

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
* Message ids are unique per session (the SQLite store makes them unique
  per database). The first append to a session in a process reads that
  session's ids once to check this.

Example::

    store = FileStore("~/chats")
    memory = Memory(model="gpt-4o", store=store)
"""

from __future__ import annotations

import functools
import os
import shutil
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from ..errors import ConflictError, InvalidMessageError, SessionNotFoundError, StoreError
from ..messages import PINNED_ROLES, Message
from ._async import AsyncStoreWrapper
from ._common import (
    Segment,
    check_batch,
    check_deletable,
    export_header,
    export_line,
    fork_state,
    json_object,
    new_session_id,
    now,
    parse_export,
    pick,
    segments,
)
from ._filemeta import Meta, read_meta, write_meta
from ._jsonlfile import LineFile, fsync_dir, locked
from .base import LoadedSession, SessionInfo, SessionState, StoredMessage

__all__ = ["AsyncFileStore", "FileStore"]

P = ParamSpec("P")
T = TypeVar("T")
_MESSAGES, _META, _LOCK = "messages.jsonl", "session.json", "lock"


def _guarded(method: Callable[Concatenate[FileStore, P], T]) -> Callable[Concatenate[FileStore, P], T]:
    """Convert file system errors into StoreError naming the file: the one place they enter convmem."""

    def wrapper(self: FileStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            raise StoreError(f"file store {self.root}: {exc.filename or ''}: {exc.strerror or exc}") from exc

    functools.update_wrapper(wrapper, method)
    return wrapper


class FileStore:
    """A :class:`~convmem.stores.base.SessionStore` in a directory of JSONL files."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser()
        self._sessions = self.root / "sessions"
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"file store {self.root} is not a directory")
        try:
            self._sessions.mkdir(parents=True, exist_ok=True)
            for leftover in self._sessions.glob(".trash-*"):  # deletions a crash interrupted
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError as exc:
            raise StoreError(f"file store {self.root}: {exc.strerror or exc}") from exc
        self._ids: dict[str, tuple[int, int, set[str]]] = {}  # session -> (inode, offset, message ids)
        self._ids_lock = threading.Lock()
        self.rows_read = 0  # rows read by load(); shows (and lets tests check) that it skips the archive

    def __repr__(self) -> str:
        return f"FileStore({str(self.root)!r})"

    # -- paths, records, locks -------------------------------------------------------------
    def _dir(self, session_id: str, *, creating: bool = False) -> Path:
        if (
            not session_id
            or session_id.startswith(".")
            or "/" in session_id
            or "\0" in session_id
            or os.sep in session_id
            or len(session_id.encode()) > 200
        ):
            if creating:
                raise StoreError(f"file store {self.root}: session id {session_id!r} cannot be a directory name")
            raise SessionNotFoundError(session_id)  # no such session can exist; never touch another path
        return self._sessions / session_id

    def _lines(self, session_id: str) -> LineFile:
        return LineFile(self._dir(session_id) / _MESSAGES)

    def _meta(self, session_id: str) -> Meta | None:
        return read_meta(self._dir(session_id) / _META)

    def _all(self) -> Iterator[Meta]:
        for entry in sorted(os.listdir(self._sessions)):
            if not entry.startswith("."):
                meta = read_meta(self._sessions / entry / _META)
                if meta is not None:
                    yield meta

    def _resolve(self, session_id: str, user_id: str | None) -> str:
        meta = self._meta(session_id) if session_id else None
        if meta is not None and meta.user_id == user_id and not meta.deleted:
            return meta.id
        matches = []
        for entry in os.listdir(self._sessions):
            if session_id and entry.startswith(session_id) and not entry.startswith("."):
                found = read_meta(self._sessions / entry / _META)
                if found is not None and found.user_id == user_id and not found.deleted:
                    matches.append(found.id)
        return pick(session_id, matches)

    @contextmanager
    def _locked(self, session_id: str) -> Iterator[None]:
        try:
            with locked(self._dir(session_id) / _LOCK):
                yield
        except FileNotFoundError as exc:  # deleted while we waited
            if Path(exc.filename or "").parent == self._dir(session_id):
                raise SessionNotFoundError(session_id) from None
            raise

    @contextmanager
    def _session(self, session_id: str, user_id: str | None) -> Iterator[tuple[Meta, LineFile]]:
        """Lock the session, repair a torn last line, and yield its up-to-date record."""
        real = self._resolve(session_id, user_id)
        with self._locked(real):
            meta = self._meta(real)
            if meta is None or meta.user_id != user_id or meta.deleted:
                raise SessionNotFoundError(session_id)
            lines = self._lines(real)
            lines.repair(meta.synced)
            yield meta.caught_up(lines)[0], lines

    def _chain(self, meta: Meta) -> dict[str, tuple[Meta, LineFile]]:
        chain = {meta.id: (meta, self._lines(meta.id))}
        node = meta
        while node.parent_id is not None:
            parent = self._meta(node.parent_id)
            if parent is None:
                raise StoreError(f"file store {self.root}: session {node.id!r} lost its parent {node.parent_id!r}")
            lines = self._lines(parent.id)
            chain[parent.id] = (parent.caught_up(lines)[0], lines)
            node = parent
        return chain

    def _segments(self, chain: dict[str, tuple[Meta, LineFile]]) -> list[Segment]:
        return segments([(m.id, m.fork_seq) for m, _ in chain.values()])

    def _read(self, chain: dict[str, tuple[Meta, LineFile]], lo: int, hi: int | None) -> Iterator[StoredMessage]:
        for seg in self._segments(chain):
            span = seg.clip(lo, hi)
            if span is not None:
                lines = chain[seg.session_id][1]
                yield from lines.read(lines.find(span[0]), span[1])

    # -- sessions --------------------------------------------------------------------------
    @_guarded
    def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        meta = self._meta(self._resolve(session_id, user_id))
        if meta is None:
            raise SessionNotFoundError(session_id)
        return meta.caught_up(self._lines(meta.id))[0].info()

    @_guarded
    def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        found = [
            m.caught_up(self._lines(m.id))[0].info() for m in self._all() if m.user_id == user_id and not m.deleted
        ]
        found.sort(key=lambda i: (i.updated_at, i.id), reverse=True)
        return found[:limit]

    @_guarded
    def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        with self._session(session_id, user_id) as (meta, _):
            meta = replace(
                meta,
                title=meta.title if title is None else title,
                updated_at=now(),
                metadata=meta.metadata if metadata is None else json_object(metadata),
            )
            write_meta(self._dir(meta.id) / _META, meta)
            return meta.info()

    @_guarded
    def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        self._remove(self._resolve(session_id, user_id))

    def _remove(self, session_id: str) -> None:
        with self._locked(session_id):
            meta = self._meta(session_id)
            if meta is None:
                return
            children = [m.fork_seq or 0 for m in self._all() if m.parent_id == session_id]
            if children:
                # Forks still read this history: hide the session and keep only the rows they share.
                lines = self._lines(session_id)
                lines.rewrite(upto=max(children))
                write_meta(self._dir(session_id) / _META, replace(meta, deleted=True).recounted(lines))
                return
            trash = self._sessions / f".trash-{session_id}-{os.urandom(4).hex()}"
            os.rename(self._dir(session_id), trash)  # atomic: the session is gone at once
            fsync_dir(self._sessions)
            with self._ids_lock:
                self._ids.pop(session_id, None)
        shutil.rmtree(trash, ignore_errors=True)
        if meta.parent_id is not None:
            parent = self._meta(meta.parent_id)
            if parent is not None and parent.deleted:
                self._remove(parent.id)

    @_guarded
    def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]:
        cutoff = now() - older_than
        doomed = sorted(
            m.id
            for m in self._all()
            if m.user_id == user_id and not m.deleted and m.caught_up(self._lines(m.id))[0].updated_at < cutoff
        )
        for session_id in doomed:
            self._remove(session_id)
        return doomed

    @_guarded
    def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo:
        with self._session(session_id, user_id) as (source, _):
            if not 0 <= at_seq < source.next_seq:
                raise StoreError(
                    f"cannot fork session {source.id!r} at seq {at_seq}: its seqs run from 0 to {source.next_seq - 1}"
                )
            chain = self._chain(source)
            count = tokens = 0
            for row in self._read(chain, 0, at_seq):
                count, tokens = count + 1, tokens + row.tokens
            parent = source
            while parent.parent_id is not None and parent.fork_seq is not None and at_seq <= parent.fork_seq:
                parent = chain[parent.parent_id][0]  # branch where the history really lives
            stamp = now()
            fork = Meta(
                new_session_id(),
                user_id,
                stamp,
                stamp,
                source.title,
                source.model,
                dict(source.metadata),
                parent.id,
                at_seq,
                count,
                tokens,
                next_seq=at_seq + 1,
                state=fork_state(source.state, at_seq, messages=count),
            )
            # Hold the parent's lock (fork before ancestor) so it cannot be removed meanwhile.
            with self._locked(parent.id) if parent.id != source.id else nullcontext():
                self._dir(fork.id).mkdir()
                write_meta(self._dir(fork.id) / _META, fork)
            return fork.info()

    # -- messages --------------------------------------------------------------------------
    @_guarded
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
        path = self._dir(session_id) / _META
        meta = read_meta(path)
        lines = self._lines(session_id)
        if meta is None:
            stamp = now()
            meta = Meta(session_id, user_id, stamp, stamp, model=model)
            write_meta(path, meta)  # first, so that no line can exist without its owner
        elif meta.user_id != user_id or meta.deleted:
            raise SessionNotFoundError(session_id)  # never reveal, nor write into, another user's session
        lines.repair(meta.synced)
        meta = meta.caught_up(lines)[0]
        known = self._known_ids(meta, lines)
        for index, (message, _) in enumerate(messages):
            if message.id in known:
                raise InvalidMessageError(f"duplicate message id {message.id!r}", field="id", index=index)
        seqs = list(range(meta.next_seq, meta.next_seq + len(messages)))
        data = b"".join(export_line(StoredMessage(s, m, t)) for s, (m, t) in zip(seqs, messages, strict=True))
        start = lines.append(data)
        known.update(m.id or "" for m, _ in messages)
        with self._ids_lock:
            self._ids[session_id] = (os.stat(lines.path).st_ino, start + len(data), known)
        meta, _ = replace(meta, updated_at=now()).caught_up(lines)
        # Not fsync'd on purpose: the lines are, and a stale record is caught up from them.
        write_meta(path, meta, durable=False)
        return seqs

    def _known_ids(self, meta: Meta, lines: LineFile) -> set[str]:
        inode = os.stat(lines.path).st_ino if lines.path.exists() else 0
        with self._ids_lock:
            cached = self._ids.get(meta.id)
        if cached is not None and cached[0] == inode:
            _, offset, known = cached
        else:
            offset, known = 0, set()
            if meta.parent_id is not None:
                chain = self._chain(meta)
                known.update(r.message.id or "" for r in self._read(chain, 0, meta.fork_seq))
        tail, end = lines.scan(offset)
        known.update(t.id or "" for t in tail)
        with self._ids_lock:
            self._ids[meta.id] = (inode, end, known)
        return known

    @_guarded
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

    @_guarded
    def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        with self._session(session_id, user_id) as (meta, _):
            if meta.state.version != expected_version:
                raise ConflictError(
                    f"session {meta.id!r} state is at version {meta.state.version}, expected {expected_version}"
                )
            saved = replace(state, stats=json_object(state.stats, "session stats"), version=expected_version + 1)
            write_meta(self._dir(meta.id) / _META, replace(meta, state=saved, updated_at=now()))
            return saved

    @_guarded
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

    @_guarded
    def delete_messages(self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None) -> None:
        with self._session(session_id, user_id) as (meta, lines):
            doomed = set(seqs)
            forks = [(m.id, m.fork_seq or 0) for m in self._all() if m.parent_id == meta.id]
            check_deletable(meta.id, doomed, meta.fork_seq, forks)
            lines.rewrite(drop=doomed)
            write_meta(self._dir(meta.id) / _META, replace(meta, updated_at=now()).recounted(lines))
            with self._ids_lock:
                self._ids.pop(meta.id, None)

    # -- export / import -------------------------------------------------------------------
    @_guarded
    def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        with self._session(session_id, user_id) as (meta, _):
            rows = list(self._read(self._chain(meta), 0, None))
            return b"".join([export_header(meta.info(), meta.state, meta.next_seq), *map(export_line, rows)])

    @_guarded
    def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        parsed = parse_export(data)
        target = self._dir(parsed.id)
        if target.exists():
            raise StoreError(f"import: session id {parsed.id!r} is taken; nothing was imported")
        # Build the session aside and rename it into place: an import is visible whole or not at all.
        staging = self._sessions / f".import-{os.urandom(6).hex()}"
        staging.mkdir()
        try:
            lines = LineFile(staging / _MESSAGES)
            lines.append(b"".join(map(export_line, parsed.rows)))
            meta = Meta(
                parsed.id,
                user_id,
                parsed.created_at,
                parsed.updated_at,
                parsed.title,
                parsed.model,
                dict(parsed.metadata),
                next_seq=parsed.next_seq,
                state=parsed.state,
            ).recounted(lines)
            write_meta(staging / _META, replace(meta, updated_at=parsed.updated_at))
            try:
                os.rename(staging, target)
            except OSError:
                raise StoreError(f"import: session id {parsed.id!r} is taken; nothing was imported") from None
            fsync_dir(self._sessions)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return parsed.info(user_id)

    def close(self) -> None:
        """Nothing to release: every operation opens and closes its own files."""


class AsyncFileStore(AsyncStoreWrapper[FileStore]):
    """The async twin of :class:`FileStore`: the same store, each call run in a worker thread."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        super().__init__(FileStore(root))
        self.root = self.sync.root
