"""The part of the file store every operation shares: paths, session records, locks, and reads.

``guarded`` is the one place where file system errors (``OSError``) become
:class:`~convmem.errors.StoreError` naming the file. Reads follow a
session's fork chain: its own file from ``fork_seq + 1``, its ancestors'
files below that (a fork's ancestors belong to the same user).

Each user has a directory of sessions (``users/<user>/<session id>/``, see
:func:`user_dir`), so session ids are scoped by user and one user's listing
never reads another's. A store written before that layout (``sessions/<id>/``)
is moved into it, session by session, when it is opened.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar
from urllib.parse import quote

from ...errors import SessionNotFoundError, StoreError
from ...messages import StoredMessage
from ...session import SessionInfo
from .._record import Segment, segments
from .._writes import pick
from ._ids import IdIndex
from ._jsonl import LineFile, locked
from ._meta import Meta, read_meta

__all__ = ["LOCK", "MESSAGES", "META", "FilesBase", "guarded", "user_dir"]

P = ParamSpec("P")
T = TypeVar("T")
B = TypeVar("B", bound="FilesBase")
MESSAGES, META, LOCK = "messages.jsonl", "session.json", "lock"


def user_dir(user_id: str | None) -> str:
    """The directory name of a user's sessions: ``-`` for no user, ``u`` + the id percent-encoded, or a hash.

    Injective, and never ``.``, ``..`` nor hidden; a user id too long for a file
    name is hashed (the record in each session still names the user exactly).
    """
    if user_id is None:
        return "-"
    quoted = quote(user_id, safe="", errors="surrogatepass")
    if len(quoted) <= 200:
        return "u" + quoted
    return "h" + hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()


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
        self._users = self.root / "users"
        self._trash = self.root / ".trash"  # deleted sessions are renamed here (one atomic step), then removed
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"file store {self.root} is not a directory")
        try:
            self._users.mkdir(parents=True, exist_ok=True)
            self._trash.mkdir(exist_ok=True)
            for leftover in os.listdir(self._trash):  # deletions a crash interrupted
                shutil.rmtree(self._trash / leftover, ignore_errors=True)
            if (self.root / "sessions").is_dir():
                self._move_legacy(self.root / "sessions")
        except OSError as exc:
            raise StoreError(f"file store {self.root}: {exc.strerror or exc}") from exc
        self.rows_read = 0  # rows read by load(); shows (and lets tests check) that it skips the archive

    def _move_legacy(self, legacy: Path) -> None:
        """Move the sessions of the layout before per-user directories into their user's directory."""
        for entry in os.listdir(legacy):
            if entry.startswith("."):  # a deletion or an import a crash interrupted
                shutil.rmtree(legacy / entry, ignore_errors=True)
                continue
            meta = read_meta(legacy / entry / META)
            if meta is None:  # created but never written: no message can exist without its record
                shutil.rmtree(legacy / entry, ignore_errors=True)
                continue
            home = self._home(meta.user_id)
            home.mkdir(exist_ok=True)
            try:
                os.rename(legacy / entry, home / entry)
            except FileNotFoundError:
                continue  # another process moved it first
        with contextlib.suppress(OSError):  # not empty (an old process still writing): moved on the next open
            legacy.rmdir()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

    # -- paths, records, locks -------------------------------------------------------------
    def _home(self, user_id: str | None) -> Path:
        return self._users / user_dir(user_id)

    def path_of(self, session_id: str, *, user_id: str | None = None) -> Path:
        """The directory that holds a session's files (``messages.jsonl`` is greppable); it may not exist."""
        return self._dir(user_id, session_id)

    def _dir(self, user_id: str | None, session_id: str, *, creating: bool = False) -> Path:
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
        return self._home(user_id) / session_id

    def _lines(self, user_id: str | None, session_id: str) -> LineFile:
        return LineFile(self._dir(user_id, session_id) / MESSAGES)

    def _meta(self, user_id: str | None, session_id: str) -> Meta | None:
        meta = read_meta(self._dir(user_id, session_id) / META)
        return meta if meta is not None and meta.user_id == user_id else None  # a hashed name is checked

    def _all(self, user_id: str | None) -> Iterator[Meta]:
        """The readable records of the user's sessions (hidden ones included), in id order."""
        for _, meta in self._scan(user_id):
            if isinstance(meta, Meta):
                yield meta

    def _scan(self, user_id: str | None) -> Iterator[tuple[str, Meta | StoreError]]:
        """Each of the user's sessions with its record, or the error that says its record is damaged."""
        home = self._home(user_id)
        try:
            entries = sorted(os.listdir(home))
        except FileNotFoundError:
            return
        for entry in entries:
            if not entry.startswith("."):
                try:
                    meta = read_meta(home / entry / META)
                except StoreError as exc:  # damages only its own session: reported by list_sessions
                    yield entry, exc
                    continue
                if meta is not None and meta.user_id == user_id:
                    yield entry, meta

    def _resolve(self, session_id: str, user_id: str | None) -> str:
        meta = self._meta(user_id, session_id) if session_id else None
        if meta is not None and not meta.deleted:
            return meta.id
        matches = []
        home = self._home(user_id)
        for entry in os.listdir(home) if session_id and home.is_dir() else ():
            if entry.startswith(session_id) and not entry.startswith("."):
                found = read_meta(home / entry / META)
                if found is not None and found.user_id == user_id and not found.deleted:
                    matches.append(found.id)
        return pick(session_id, matches)

    @contextmanager
    def _locked(self, user_id: str | None, session_id: str) -> Iterator[None]:
        try:
            with locked(self._dir(user_id, session_id) / LOCK):
                yield
        except FileNotFoundError as exc:  # deleted while we waited
            if Path(exc.filename or "").parent == self._dir(user_id, session_id):
                raise SessionNotFoundError(session_id) from None
            raise

    @contextmanager
    def _session(self, session_id: str, user_id: str | None) -> Iterator[tuple[Meta, LineFile]]:
        """Lock the session, repair a torn last line, and yield its up-to-date record."""
        real = self._resolve(session_id, user_id)
        with self._locked(user_id, real):
            meta = self._meta(user_id, real)
            if meta is None or meta.deleted:
                raise SessionNotFoundError(session_id)
            lines = self._lines(user_id, real)
            lines.repair(meta.synced)
            yield meta.caught_up(lines)[0], lines

    def _chain(self, meta: Meta) -> dict[str, tuple[Meta, LineFile]]:
        chain = {meta.id: (meta, self._lines(meta.user_id, meta.id))}
        node = meta
        while node.parent_id is not None:
            parent = self._meta(meta.user_id, node.parent_id)
            if parent is None:
                raise StoreError(f"file store {self.root}: session {node.id!r} lost its parent {node.parent_id!r}")
            lines = self._lines(meta.user_id, parent.id)
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
        index = IdIndex(self._dir(meta.user_id, meta.id))
        if index.lost(meta.indexed):  # derived data: rebuilt, so a duplicate id is still refused
            return replace(meta, indexed=index.rebuild(lines))
        if meta.indexed == meta.synced:
            return meta
        return replace(meta, indexed=index.catch_up(lines, meta.indexed))

    @guarded
    def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        meta = self._meta(user_id, self._resolve(session_id, user_id))
        if meta is None:
            raise SessionNotFoundError(session_id)
        return meta.caught_up(self._lines(user_id, meta.id))[0].record().info()

    @guarded
    def close(self) -> None:
        """Nothing to release: every operation opens and closes its own files."""
