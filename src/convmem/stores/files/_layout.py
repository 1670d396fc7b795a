"""A file store's directory: where each session's files are, and how they are locked, read and appended to.

:class:`Layout` is what :class:`~convmem.stores.files.FileStore` runs its
operations on: the paths of a user's sessions, their records
(``session.json``, :mod:`._meta`), their locks, reads that follow a session's
fork chain (its own file from ``fork_seq + 1``, its ancestors' files below
that; a fork's ancestors belong to the same user), and the one-outcome write
of a batch (lines, id index, record). ``guarded`` is the one place where file
system errors (``OSError``) become :class:`~convmem.errors.StoreError` naming
the file.

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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Concatenate, ParamSpec, Protocol, TypeVar
from urllib.parse import quote

from ...errors import SessionNotFoundError, StoreError
from ...messages import Message, StoredMessage
from ...session import SessionState
from .._export import export_line
from .._record import Segment, segments
from .._writes import now, pick
from ._ids import IdIndex, IndexDamaged, scan_ids
from ._jsonl import LineFile, locked
from ._meta import Meta, read_meta, write_meta

__all__ = ["LOCK", "MESSAGES", "META", "Layout", "guarded", "user_dir"]

P = ParamSpec("P")
T = TypeVar("T")
B = TypeVar("B", bound="_Rooted")
MESSAGES, META, LOCK = "messages.jsonl", "session.json", "lock"


class _Rooted(Protocol):
    root: Path  # named by every error ``guarded`` raises


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


class Layout:
    """A file store's directory: where each session's files are, how they are locked, read and appended to."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser()
        self.users = self.root / "users"
        self.trash = self.root / ".trash"  # deleted sessions are renamed here (one atomic step), then removed
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"file store {self.root} is not a directory")
        try:
            self.users.mkdir(parents=True, exist_ok=True)
            self.trash.mkdir(exist_ok=True)
            for leftover in os.listdir(self.trash):  # deletions a crash interrupted
                shutil.rmtree(self.trash / leftover, ignore_errors=True)
            if (self.root / "sessions").is_dir():
                self._move_legacy(self.root / "sessions")
        except OSError as exc:
            raise StoreError(f"file store {self.root}: {exc.strerror or exc}") from exc

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
            home = self.home(meta.user_id)
            home.mkdir(exist_ok=True)
            try:
                os.rename(legacy / entry, home / entry)
            except FileNotFoundError:
                continue  # another process moved it first
        with contextlib.suppress(OSError):  # not empty (an old process still writing): moved on the next open
            legacy.rmdir()

    # -- paths, records, locks -------------------------------------------------------------
    def home(self, user_id: str | None) -> Path:
        return self.users / user_dir(user_id)

    def dir(self, user_id: str | None, session_id: str, *, creating: bool = False) -> Path:
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
        return self.home(user_id) / session_id

    def lines(self, user_id: str | None, session_id: str) -> LineFile:
        return LineFile(self.dir(user_id, session_id) / MESSAGES)

    def meta(self, user_id: str | None, session_id: str) -> Meta | None:
        directory = self.dir(user_id, session_id)
        meta = read_meta(directory / META)
        if meta is None:
            lost = self._lost_record(directory)
            if lost is not None:  # never answered as absent: an append would write a second seq 0
                raise lost
        return meta if meta is not None and meta.user_id == user_id else None  # a hashed name is checked

    def _lost_record(self, directory: Path) -> StoreError | None:
        """The damage of a session directory whose messages outlived its ``session.json``, if it is one.

        The record is written before any line (``append``), so messages without one are a record lost.
        """
        try:
            size = (directory / MESSAGES).stat().st_size
        except FileNotFoundError:
            return None
        if size == 0:
            return None
        return StoreError(
            f"file store {self.root}: session {directory.name!r} is damaged: its {META} is lost while "
            f"{size} bytes of messages remain in {MESSAGES}"
        )

    def all(self, user_id: str | None) -> Iterator[Meta]:
        """The readable records of the user's sessions (hidden ones included), in id order."""
        for _, meta in self.scan(user_id):
            if isinstance(meta, Meta):
                yield meta

    def scan(self, user_id: str | None) -> Iterator[tuple[str, Meta | StoreError]]:
        """Each of the user's sessions with its record, or the error that says its record is damaged."""
        home = self.home(user_id)
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
                elif meta is None and (lost := self._lost_record(home / entry)) is not None:
                    yield entry, lost

    def resolve(self, session_id: str, user_id: str | None) -> str:
        meta = self.meta(user_id, session_id) if session_id else None
        if meta is not None and not meta.deleted:
            return meta.id
        matches = []
        home = self.home(user_id)
        for entry in os.listdir(home) if session_id and home.is_dir() else ():
            if entry.startswith(session_id) and not entry.startswith("."):
                found = read_meta(home / entry / META)
                if found is not None and found.user_id == user_id and not found.deleted:
                    matches.append(found.id)
        return pick(session_id, matches)

    @contextmanager
    def locked(self, user_id: str | None, session_id: str) -> Iterator[None]:
        try:
            with locked(self.dir(user_id, session_id) / LOCK):
                yield
        except FileNotFoundError as exc:  # deleted while we waited
            if Path(exc.filename or "").parent == self.dir(user_id, session_id):
                raise SessionNotFoundError(session_id) from None
            raise

    @contextmanager
    def session(self, session_id: str, user_id: str | None) -> Iterator[tuple[Meta, LineFile]]:
        """Lock the session, repair a torn last line, and yield its up-to-date record."""
        real = self.resolve(session_id, user_id)
        with self.locked(user_id, real):
            meta = self.meta(user_id, real)
            if meta is None or meta.deleted:
                raise SessionNotFoundError(session_id)
            lines = self.lines(user_id, real)
            lines.repair(meta.synced)
            yield meta.caught_up(lines)[0], lines

    def chain(self, meta: Meta) -> dict[str, tuple[Meta, LineFile]]:
        chain = {meta.id: (meta, self.lines(meta.user_id, meta.id))}
        node = meta
        while node.parent_id is not None:
            parent = self.meta(meta.user_id, node.parent_id)
            if parent is None:
                raise StoreError(f"file store {self.root}: session {node.id!r} lost its parent {node.parent_id!r}")
            lines = self.lines(meta.user_id, parent.id)
            chain[parent.id] = (parent.caught_up(lines)[0], lines)
            node = parent
        return chain

    def segments(self, chain: dict[str, tuple[Meta, LineFile]]) -> list[Segment]:
        return segments([(m.id, m.fork_seq) for m, _ in chain.values()])

    def read(self, chain: dict[str, tuple[Meta, LineFile]], lo: int, hi: int | None) -> Iterator[StoredMessage]:
        for seg in self.segments(chain):
            span = seg.clip(lo, hi)
            if span is not None:
                lines = chain[seg.session_id][1]
                yield from lines.read(lines.find(span[0]), span[1])

    def indexed(self, meta: Meta, lines: LineFile) -> Meta:
        """``meta`` with the id index caught up to its message file (call with the session's lock held)."""
        index = IdIndex(self.dir(meta.user_id, meta.id))
        if index.lost(meta.indexed):  # derived data: rebuilt, so a duplicate id is still refused
            return replace(meta, indexed=index.rebuild(lines))
        if meta.indexed == meta.synced:
            return meta
        return replace(meta, indexed=index.catch_up(lines, meta.indexed))

    def write(
        self,
        meta: Meta,
        lines: LineFile,
        messages: Sequence[tuple[Message, int]],
        saved: SessionState | None,
        *,
        created: bool,
    ) -> list[int]:
        """Append the batch; with a state, write the record too, or cut the lines back off (one outcome)."""
        directory = self.dir(meta.user_id, meta.id)
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

    def stored(self, meta: Meta, ids: list[str]) -> dict[str, StoredMessage]:
        """The rows of the session's history (its shared history too) that hold any of ``ids``."""
        found: dict[str, StoredMessage] = {}
        chain = self.chain(meta)
        for seg in self.segments(chain):
            lines = chain[seg.session_id][1]
            for message_id, seqs in self.locate(meta, seg.session_id, lines, ids, seg.hi).items():
                for seq in seqs:
                    if seq >= seg.lo:
                        row = next(lines.read(lines.find(seq), seq), None)
                        if row is not None and row.message.id == message_id:  # index entries may be stale
                            found[message_id] = row
        return found

    def locate(self, meta: Meta, session_id: str, lines: LineFile, ids: list[str], hi: int) -> dict[str, list[int]]:
        """The index's answer; a damaged index is rebuilt (the session's own, whose lock is held) or bypassed."""
        index = IdIndex(self.dir(meta.user_id, session_id))
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

    def index_shared(self, user_id: str | None, session_id: str) -> None:
        """Complete the id index of a session whose rows a new fork will share (its lock is held).

        The shared rows never change again, but a crash may have left their ids
        unindexed, and a hidden parent never appends again to catch up.
        """
        meta = self.meta(user_id, session_id)
        if meta is not None:
            lines = self.lines(user_id, session_id)
            current = meta.caught_up(lines)[0]
            indexed = self.indexed(current, lines)
            if indexed.indexed != meta.indexed:
                write_meta(self.dir(user_id, session_id) / META, indexed)

    def updated(self, meta: Meta) -> datetime:
        """When the session last changed; a damaged message file leaves the record's own time."""
        try:
            return meta.caught_up(self.lines(meta.user_id, meta.id))[0].updated_at
        except StoreError:
            return meta.updated_at
