"""Low-level file operations of the file store: locks, atomic writes, and seq-sorted JSONL files.

A message file holds one export line per message (see
:func:`convmem.stores._export.export_line`), in increasing seq order. That
order is what makes reads cheap without any index: the line holding a seq is
found by binary search over byte offsets, reading O(log size) line heads.

Durability and crashes:

* An append is one ``write`` of whole lines followed by ``fsync``; only then
  is it acknowledged. A crash can leave at most one partial line at the end
  of the file, which was never acknowledged. :meth:`LineFile.repair` cuts
  exactly that partial line (everything after the last newline) and nothing
  else. Readers that do not hold the lock simply ignore it: it may be a
  write in progress.
* A complete line that does not parse is corruption, reported with the file
  and the line number; it is never repaired or skipped.
* Small files (the session's state) are replaced atomically: write a
  temporary file, ``fsync``, ``os.replace``, ``fsync`` the directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ...errors import ConfigurationError, StoreError
from ...messages import StoredMessage
from .._export import parse_line
from ..codec import READ_ERRORS, loads

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["Line", "LineFile", "atomic_write", "fsync_dir", "locked"]

# The head of every line, as export_line writes it: seq, tokens, then the message's role.
_HEAD = re.compile(rb'\{"seq":(\d+),"tokens":(\d+),"message":\{"role":"([a-z]+)"')
_CHUNK = 1 << 16


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new content.

    ``durable=False`` skips the directory fsync: after a power cut the old
    content may come back (never a mix of both).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing).

    The lock file may be deleted (with its session) while we wait for it, so
    after locking we check that the path still names the file we locked.
    """
    if fcntl is None:  # pragma: no cover - Windows
        raise ConfigurationError("the file store needs fcntl.flock (POSIX); use the SQLite store on Windows")
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@dataclass(frozen=True, slots=True)
class Line:
    """What a scan learns about one line without keeping the message."""

    offset: int
    seq: int
    tokens: int
    role: str
    id: str | None


class LineFile:
    """One append-only, seq-sorted JSONL file of messages."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def corrupt(self, offset: int, reason: str) -> StoreError:
        """An error naming the file and the (1-based) line that starts at ``offset``."""
        try:
            with open(self.path, "rb") as handle:
                number = handle.read(offset).count(b"\n") + 1
        except OSError:
            number = 0
        reason = reason if len(reason) <= 200 else reason[:197] + "..."
        return StoreError(
            f"file store: session {self.path.parent.name!r}: {self.path}: line {number} is corrupt ({reason}); "
            "convmem left the file untouched"
        )

    def size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0

    def repair(self, floor: int) -> int:
        """Cut a torn last line (call with the lock held); returns the bytes removed.

        ``floor`` is an offset known to end a complete line; a file shorter than
        that was damaged by something other than a torn append.
        """
        size = self.size()
        if size < floor:
            raise StoreError(
                f"file store: session {self.path.parent.name!r}: {self.path} is shorter ({size} bytes) than its "
                f"recorded {floor} bytes; convmem left it untouched"
            )
        if size == floor:
            return 0
        with open(self.path, "rb+") as handle:
            pos = size
            while pos > floor:
                step = min(_CHUNK, pos - floor)
                handle.seek(pos - step)
                chunk = handle.read(step)
                cut = chunk.rfind(b"\n")
                if cut >= 0:
                    end = pos - step + cut + 1
                    break
                pos -= step
            else:
                end = floor
            if end < size:
                handle.truncate(end)
                handle.flush()
                os.fsync(handle.fileno())
            return size - end

    def append(self, data: bytes) -> int:
        """Write whole lines and fsync them; returns the offset they start at."""
        created = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            start = os.fstat(fd).st_size
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            fsync_dir(self.path.parent)
        return start

    def truncate(self, size: int) -> None:
        """Cut the file back to ``size`` bytes and fsync (undo an append whose state could not be saved)."""
        fd = os.open(self.path, os.O_WRONLY)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- reading ---------------------------------------------------------------------------
    def _lines(self, offset: int) -> Iterator[tuple[int, bytes]]:
        """(offset, line) for each complete line from ``offset``; a partial last line is ignored."""
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - closed in finally; this is a generator
        except FileNotFoundError:
            return
        try:
            handle.seek(offset)
            pending = b""
            while True:
                chunk = handle.read(_CHUNK)
                if not chunk:
                    return
                pending += chunk
                start = 0
                while (cut := pending.find(b"\n", start)) >= 0:
                    yield offset, pending[start:cut]
                    offset += cut + 1 - start
                    start = cut + 1
                pending = pending[start:]
        finally:
            handle.close()

    def _parse(self, offset: int, line: bytes) -> StoredMessage:
        try:
            return parse_line(line)
        except READ_ERRORS as exc:
            raise self.corrupt(offset, str(exc)) from None

    def _peek(self, offset: int, line: bytes) -> Line:
        """What a scan needs from a line, without building the message (reads validate it fully)."""
        try:
            value = loads(line)
            message = value["message"]
            seq, tokens, role, ident = value["seq"], value["tokens"], message["role"], message.get("id")
            if not (isinstance(seq, int) and isinstance(tokens, int) and isinstance(role, str)):
                raise ValueError("seq, tokens and role have the wrong types")
        except READ_ERRORS as exc:
            raise self.corrupt(offset, str(exc)) from None
        return Line(offset, seq, tokens, role, ident if isinstance(ident, str) else None)

    def scan(self, offset: int) -> tuple[list[Line], int]:
        """Every complete line from ``offset``, and the offset where complete data ends."""
        out = []
        end = offset
        for start, raw in self._lines(offset):
            out.append(self._peek(start, raw))
            end = start + len(raw) + 1
        return out, end

    def read(self, offset: int, hi: int | None = None) -> Iterator[StoredMessage]:
        """Messages from the line at ``offset`` while their seq is at most ``hi``."""
        for start, raw in self._lines(offset):
            row = self._parse(start, raw)
            if hi is not None and row.seq > hi:
                return
            yield row

    def read_at(self, offset: int) -> StoredMessage:
        for row in self.read(offset):
            return row
        raise self.corrupt(offset, "a recorded line is missing")

    def _head(self, handle: BinaryIO, offset: int) -> tuple[int, int] | None:
        """(seq, end offset) of the complete line at ``offset``, or None at the end of the data."""
        handle.seek(offset)
        line = b""
        while (cut := line.find(b"\n")) < 0:
            chunk = handle.read(_CHUNK)
            if not chunk:
                return None  # end of file, or a partial line being written
            line += chunk
        match = _HEAD.match(line)
        if match is None:
            raise self.corrupt(offset, "the line does not start like a convmem message line")
        return int(match.group(1)), offset + cut + 1

    @staticmethod
    def _line_start(handle: BinaryIO, pos: int) -> int:
        """The first line start at or after ``pos``."""
        if pos == 0:
            return 0
        base = pos - 1  # a line starts at pos if the byte before it is a newline
        handle.seek(base)
        while chunk := handle.read(_CHUNK):
            cut = chunk.find(b"\n")
            if cut >= 0:
                return base + cut + 1
            base += len(chunk)
        return base

    def find(self, seq: int) -> int:
        """The offset of the first line whose seq is at least ``seq`` (binary search)."""
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return 0
        with handle:
            lo, hi = 0, os.fstat(handle.fileno()).st_size
            while lo < hi:  # lo is always a line start; the answer lies in [lo, hi]
                start = self._line_start(handle, (lo + hi) // 2)
                probe = start if start < hi else lo
                head = self._head(handle, probe)
                if head is None or head[0] >= seq:  # a partial last line counts as +infinity
                    hi = probe
                else:
                    lo = head[1]
            return lo

    def rewrite(self, drop: set[int] | frozenset[int] = frozenset(), upto: int | None = None) -> None:
        """Atomically replace the file by its lines, without the seqs in ``drop`` or above ``upto``.

        Only an explicit delete rewrites history; call it with the lock held.
        """
        kept = []
        for start, raw in self._lines(0):
            seq = self._parse(start, raw).seq
            if seq not in drop and (upto is None or seq <= upto):
                kept.append(raw + b"\n")
        atomic_write(self.path, b"".join(kept))
