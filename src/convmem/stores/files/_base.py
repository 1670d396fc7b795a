"""The part of the file store every operation shares: paths, session records, locks, and reads.

``guarded`` is the one place where file system errors (``OSError``) become
:class:`~convmem.errors.StoreError` naming the file. Reads follow a
session's fork chain: its own file from ``fork_seq + 1``, its ancestors'
files below that.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from ...errors import SessionNotFoundError, StoreError
from .._common import (
    Segment,
    pick,
    segments,
)
from ..base import SessionInfo, StoredMessage
from ._ids import IdIndex
from ._jsonl import LineFile, locked
from ._meta import Meta, read_meta

__all__ = ["LOCK", "MESSAGES", "META", "FilesBase", "guarded"]

P = ParamSpec("P")
T = TypeVar("T")
B = TypeVar("B", bound="FilesBase")
MESSAGES, META, LOCK = "messages.jsonl", "session.json", "lock"


def guarded(method: Callable[Concatenate[B, P], T]) -> Callable[Concatenate[B, P], T]:
    """Convert file system errors into StoreError naming the file: the one place they enter convmem."""

    def wrapper(self: B, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            raise StoreError(f"file store {self.root}: {exc.filename or ''}: {exc.strerror or exc}") from exc

    functools.update_wrapper(wrapper, method)
    return wrapper


class FilesBase:
    """The directory, lookups, locks and reads shared by every file-store operation."""

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
        self.rows_read = 0  # rows read by load(); shows (and lets tests check) that it skips the archive

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

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
        return LineFile(self._dir(session_id) / MESSAGES)

    def _meta(self, session_id: str) -> Meta | None:
        return read_meta(self._dir(session_id) / META)

    def _all(self) -> Iterator[Meta]:
        for entry in sorted(os.listdir(self._sessions)):
            if not entry.startswith("."):
                meta = read_meta(self._sessions / entry / META)
                if meta is not None:
                    yield meta

    def _resolve(self, session_id: str, user_id: str | None) -> str:
        meta = self._meta(session_id) if session_id else None
        if meta is not None and meta.user_id == user_id and not meta.deleted:
            return meta.id
        matches = []
        for entry in os.listdir(self._sessions):
            if session_id and entry.startswith(session_id) and not entry.startswith("."):
                found = read_meta(self._sessions / entry / META)
                if found is not None and found.user_id == user_id and not found.deleted:
                    matches.append(found.id)
        return pick(session_id, matches)

    @contextmanager
    def _locked(self, session_id: str) -> Iterator[None]:
        try:
            with locked(self._dir(session_id) / LOCK):
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
    def _indexed(self, meta: Meta, lines: LineFile) -> Meta:
        """``meta`` with the id index caught up to its message file (call with the session's lock held)."""
        if meta.indexed == meta.synced:
            return meta
        return replace(meta, indexed=IdIndex(self._dir(meta.id)).catch_up(lines, meta.indexed))

    @guarded
    def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        meta = self._meta(self._resolve(session_id, user_id))
        if meta is None:
            raise SessionNotFoundError(session_id)
        return meta.caught_up(self._lines(meta.id))[0].info()

    @guarded
    def close(self) -> None:
        """Nothing to release: every operation opens and closes its own files."""
