"""Long-term memory in the file store: append-only JSONL logs under ``<root>/longterm/``.

* ``facts.jsonl``: one line per fact row written; the last line of an id is
  its current row (an ended fact is written again with its ``valid_to``).
* ``blocks.jsonl``: one line per saved block version; the last one wins.
* ``recall/docs.jsonl`` and ``recall/vectors-<model>.jsonl``: recall
  documents and their float32 vectors (base64), both keyed by (user,
  session, message id), for :class:`~convmem.longterm.recall.index.RecallIndex`
  to reload; lexical search is the index's in-process BM25. Vector lines
  written before that keying name only a message id; they belong to the
  first document with that id, the only one there was when they were written.

Every write takes the log's ``flock``, reads what other processes appended
since (so optimistic checks see their writes), checks, then appends whole
lines with one ``write`` and ``fsync``. A torn last line (a crash mid-write,
never acknowledged) is ignored by readers and cut by the next writer.

Example::

    store = FileStore("~/.convmem")
    facts = Facts(FileFactStore(store))
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from ...errors import StoreError
from ...longterm.blocks.store import BlockRecord, check_save
from ...longterm.facts.model import Fact
from ...longterm.facts.store import check_changes, select_facts
from ...longterm.recall._np import np
from ...longterm.recall.model import DocRef, RecallDoc
from .._longterm_codec import block_from_json, block_to_json, doc_from_json, doc_to_json, fact_from_json, fact_to_json
from ._jsonl import atomic_write, locked

__all__ = ["FileBlockStore", "FileFactStore", "FileRecallStore"]

T = TypeVar("T")


class _Log(Generic[T]):
    """An append-only JSONL file read incrementally: ``records`` holds every complete line parsed so far."""

    def __init__(self, path: Path, parse: Callable[[bytes], T]) -> None:
        self.path, self.parse = path, parse
        self.records: list[T] = []
        self._offset = 0
        self._inode: int | None = None  # the file read so far; another inode means it was rewritten (forget)
        self._lock = threading.Lock()

    def _io(self, what: str, exc: OSError) -> StoreError:
        return StoreError(f"file store {self.path}: {what}: {exc.strerror or exc}")

    def refresh(self) -> list[T]:
        """Parse the lines appended since the last call; returns them."""
        try:
            with open(self.path, "rb") as handle:
                inode = os.fstat(handle.fileno()).st_ino
                if inode != self._inode:  # rewritten by an erasure: read it again from the start
                    self.records, self._offset, self._inode = [], 0, inode
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            self.records, self._offset, self._inode = [], 0, None
            return []
        except OSError as exc:
            raise self._io("read", exc) from exc
        end = data.rfind(b"\n") + 1  # a line without its newline may be a write in progress
        new = []
        for number, line in enumerate(data[:end].splitlines()):
            try:
                new.append(self.parse(line))
            except (ValueError, KeyError, TypeError, StoreError) as exc:  # StoreError: a row that does not decode
                where = f"line {len(self.records) + number + 1}"
                raise StoreError(f"file store {self.path}: {where} is corrupt: {exc}") from exc
        self._offset += end
        self.records.extend(new)
        return new

    @contextmanager
    def writing(self) -> Iterator[Callable[[Sequence[str]], None]]:
        """Lock, catch up, and yield an ``append(lines)``; the lines are durable when the block exits."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._io("mkdir", exc) from exc
        with self._lock, locked(self.path.with_name(self.path.name + ".lock")):
            self.refresh()
            pending: list[str] = []
            yield pending.extend
            if pending:
                payload = "".join(line + "\n" for line in pending).encode()
                try:
                    with open(self.path, "r+b" if self.path.exists() else "wb") as handle:
                        handle.truncate(self._offset)  # cut a torn tail left by a crashed writer
                        handle.seek(self._offset)
                        handle.write(payload)
                        handle.flush()
                        os.fsync(handle.fileno())
                except OSError as exc:
                    raise self._io("write", exc) from exc
                self.refresh()

    def rewrite(self, keep: Callable[[T], bool]) -> list[T]:
        """Replace the file by its lines that ``keep`` accepts (atomically, under the lock); returns the dropped.

        The new file is a new inode, so every reader (this process's other logs, other processes) reads it
        again from the start; the old one's bytes leave the store with it.
        """
        if not self.path.parent.is_dir():
            return []  # nothing was ever written here
        with self._lock, locked(self.path.with_name(self.path.name + ".lock")):
            self.refresh()
            dropped = [r for r in self.records if not keep(r)]
            if not dropped:
                return []
            try:
                with open(self.path, "rb") as handle:
                    lines = handle.read(self._offset).splitlines(keepends=True)
                kept = b"".join(line for line, record in zip(lines, self.records, strict=True) if keep(record))
                atomic_write(self.path, kept)
            except OSError as exc:
                raise self._io("rewrite", exc) from exc
            self.refresh()
            return dropped


class _HasRoot(Protocol):
    root: Path  # a FileStore: long-term memory lives in its directory


def _root(target: _HasRoot | str | os.PathLike[str]) -> Path:
    root = Path(target).expanduser() if isinstance(target, str | os.PathLike) else target.root
    return root / "longterm"


class FileFactStore:
    """A :class:`~convmem.longterm.facts.FactStore` in ``<root>/longterm/facts.jsonl``."""

    def __init__(self, target: _HasRoot | str | os.PathLike[str]) -> None:
        self._log = _Log(_root(target) / "facts.jsonl", fact_from_json)

    def _current(self) -> dict[str, Fact]:
        return {f.id: f for f in self._log.records}

    def write_facts(self, added: Sequence[Fact], changed: Sequence[Fact]) -> None:
        with self._log.writing() as append:
            check_changes(self._current(), added, changed)
            append([fact_to_json(f) for f in (*changed, *added)])

    def list_facts(
        self, *, user_id: str | None, valid_at: datetime | None = None, open_only: bool = False
    ) -> list[Fact]:
        with self._log._lock:
            self._log.refresh()
            rows = [f for f in self._current().values() if f.user_id == user_id]
        return select_facts(rows, valid_at=valid_at, open_only=open_only)

    def close(self) -> None:
        pass


class FileBlockStore:
    """A :class:`~convmem.longterm.blocks.store.BlockStore` in ``<root>/longterm/blocks.jsonl``."""

    def __init__(self, target: _HasRoot | str | os.PathLike[str]) -> None:
        self._log = _Log(_root(target) / "blocks.jsonl", block_from_json)

    def _latest(self) -> dict[tuple[str | None, str], BlockRecord]:
        return {(r.scope, r.name): r for r in self._log.records}

    def load_block(self, scope: str | None, name: str) -> BlockRecord | None:
        with self._log._lock:
            self._log.refresh()
            return self._latest().get((scope, name))

    def save_block(self, record: BlockRecord, *, expected_version: int) -> BlockRecord:
        with self._log.writing() as append:
            saved = check_save(self._latest().get((record.scope, record.name)), record, expected_version)
            append([block_to_json(saved)])
        return saved

    def list_blocks(self, scope: str | None) -> list[BlockRecord]:
        with self._log._lock:
            self._log.refresh()
            return sorted((r for (s, _), r in self._latest().items() if s == scope), key=lambda r: r.name)


class _VectorRow(NamedTuple):
    user_id: str | None
    session_id: str | None  # None: a line written before vectors were keyed by owner
    message_id: str
    vector: bytes


def _vector_line(model: str, doc: RecallDoc, vector: Any) -> str:
    data = base64.b64encode(np.ascontiguousarray(vector, dtype=np.float32).tobytes()).decode()
    row = {"user_id": doc.user_id, "session_id": doc.session_id, "message_id": doc.message_id}
    return json.dumps({**row, "model": model, "vector": data}, separators=(",", ":"))


def _vector_row(line: bytes) -> _VectorRow:
    data = json.loads(line)
    raw = base64.b64decode(data["vector"])
    if "session_id" not in data:
        return _VectorRow(None, None, data["message_id"], raw)
    return _VectorRow(data["user_id"], data["session_id"], data["message_id"], raw)


class FileRecallStore:
    """A :class:`~convmem.longterm.recall.store.RecallStore` in ``<root>/longterm/recall/``."""

    def __init__(self, target: _HasRoot | str | os.PathLike[str]) -> None:
        self._dir = _root(target) / "recall"
        self._docs = _Log(self._dir / "docs.jsonl", doc_from_json)
        self._vectors: dict[str, _Log[_VectorRow]] = {}

    def _vector_log(self, model: str) -> _Log[_VectorRow]:
        log = self._vectors.get(model)
        if log is None:
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model)
            log = self._vectors[model] = _Log(self._dir / f"vectors-{safe}.jsonl", _vector_row)
        return log

    def save_docs(self, docs: Sequence[RecallDoc]) -> None:
        with self._docs.writing() as append:
            known = {(d.user_id, d.ref) for d in self._docs.records}
            fresh: dict[tuple[str | None, DocRef], RecallDoc] = {}
            for doc in docs:
                if (doc.user_id, doc.ref) not in known:
                    fresh.setdefault((doc.user_id, doc.ref), doc)
            append([doc_to_json(d) for d in fresh.values()])

    def load_docs(self, user_id: str | None) -> list[RecallDoc]:
        with self._docs._lock:
            self._docs.refresh()
            return [d for d in self._docs.records if d.user_id == user_id]

    def save_vectors(self, model: str, docs: Sequence[RecallDoc], vectors: Any) -> None:
        with self._vector_log(model).writing() as append:
            append([_vector_line(model, d, vectors[i]) for i, d in enumerate(docs)])

    def load_vectors(self, user_id: str | None, model: str) -> tuple[list[DocRef], Any]:
        with self._docs._lock:
            self._docs.refresh()
            mine = {d.ref for d in self._docs.records if d.user_id == user_id}
            first: dict[str, RecallDoc] = {}  # the owner of a line that names only a message id
            for doc in self._docs.records:
                first.setdefault(doc.message_id, doc)
        log = self._vector_log(model)
        with log._lock:
            log.refresh()
            latest: dict[DocRef, bytes] = {}
            for row in log.records:
                if row.session_id is None:
                    owner = first.get(row.message_id)
                    if owner is None or owner.user_id != user_id:
                        continue
                    ref = owner.ref
                elif row.user_id == user_id:
                    ref = (row.session_id, row.message_id)
                else:
                    continue
                if ref in mine:
                    latest[ref] = row.vector
        if not latest:
            return [], np.zeros((0, 0), dtype=np.float32)
        size = len(next(iter(latest.values())))  # a model's vectors share one dimension; others are stale
        kept = [(r, v) for r, v in latest.items() if len(v) == size]
        matrix = np.frombuffer(b"".join(v for _, v in kept), dtype=np.float32).reshape(len(kept), size // 4)
        return [r for r, _ in kept], matrix
