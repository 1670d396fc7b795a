"""One SQLite connection, opened safely: pragmas, migrations, transactions, and error conversion.

This is the only place where ``sqlite3`` exceptions enter convmem: every
statement runs inside :meth:`Database.transaction` (or :func:`translate`),
which turns them into :class:`~convmem.errors.StoreError` naming the
database file.

Opening never changes a file it cannot read as a convmem database: a
corrupt file, a file of another program, or one written by a newer convmem
is refused with an error before any write.

A database opened ``read_only`` (or one whose file this process may not write) is opened for
reading only, with ``mode=ro``: no pragma, no migration, not a byte of the file changed (SQLite
still makes the ``-shm`` WAL reads need, where the directory allows), and a write is a StoreError.
Where even that cannot open it (a read-only directory, so SQLite cannot make the shared-memory file
WAL needs), it is opened ``immutable=1``: read as the file stands, without locks, so changes another
process makes while it is open are not seen.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from ...errors import ConvmemError, StoreError
from .._writes import now
from ..codec import encode_datetime
from ._sql import APPLIED, CREATE_MIGRATIONS, HAS_MIGRATIONS, MIGRATIONS, RECORD_MIGRATION

__all__ = ["Database", "default_path", "translate"]


def default_path() -> Path:
    """``$CONVMEM_DB`` if set, else ``convmem.db`` in the user data directory."""
    env = os.environ.get("CONVMEM_DB")
    if env:
        return Path(env).expanduser()
    import platformdirs  # only needed when no path is given

    return Path(platformdirs.user_data_dir("convmem", appauthor=False)) / "convmem.db"


@contextmanager
def translate(path: str) -> Iterator[None]:
    """Convert driver (and file system) errors into StoreError naming ``path``."""
    try:
        yield
    except ConvmemError:
        raise
    except sqlite3.DatabaseError as exc:
        text = str(exc)
        if "not a database" in text or "malformed" in text:
            raise StoreError(
                f"SQLite database {path} is corrupt or not a database ({text}); convmem left it untouched"
            ) from exc
        raise StoreError(f"SQLite database {path}: {text}") from exc
    except sqlite3.Error as exc:
        raise StoreError(f"SQLite database {path}: {exc}") from exc
    except OSError as exc:
        raise StoreError(f"SQLite database {path}: {exc.strerror or exc}") from exc


class Database:
    """A connection in WAL mode with a busy timeout, shared by the threads of one store."""

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0, read_only: bool = False
    ) -> None:
        self.path = str(default_path() if path is None else path)
        self._lock = threading.RLock()
        plain = self.path != ":memory:" and not self.path.startswith("file:")
        self.read_only = read_only or (plain and os.path.exists(self.path) and not os.access(self.path, os.W_OK))
        if self.read_only:
            self._conn = self._open_read_only(timeout)
            try:
                if len(self._inspect()) < len(MIGRATIONS):
                    raise StoreError(
                        f"SQLite database {self.path} needs migrating, which a read-only open cannot do; "
                        "open it writable once with this convmem"
                    )
            except BaseException:
                self._conn.close()
                raise
            return
        with translate(self.path):
            if self.path != ":memory:" and not self.path.startswith("file:"):
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path,
                timeout=timeout,
                isolation_level=None,
                check_same_thread=False,
                uri=self.path.startswith("file:"),
            )
        try:
            with translate(self.path):
                self._conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            # Reads only: a corrupt, foreign or newer database fails here, before anything is written.
            applied = self._inspect()
            with translate(self.path):
                self._conn.execute("PRAGMA journal_mode = WAL").fetchone()
                # FULL: an acknowledged append survives a power cut, not only a crash of the process.
                self._conn.execute("PRAGMA synchronous = FULL")
                self._conn.execute("PRAGMA foreign_keys = ON")
                # Deleted cells are zeroed where that costs no extra I/O; pages freed whole keep their bytes
                # until compact() (VACUUM), which rewrites the file: zeroing them too (ON) writes every freed page.
                self._conn.execute("PRAGMA secure_delete = FAST")
            if len(applied) < len(MIGRATIONS):
                self._migrate()
        except BaseException:
            self._conn.close()
            raise

    def _open_read_only(self, timeout: float) -> sqlite3.Connection:
        if not self.path.startswith("file:") and not os.path.exists(self.path):
            raise StoreError(f"SQLite database {self.path} does not exist (opened read-only: nothing is created)")
        base = self.path if self.path.startswith("file:") else "file:" + quote(os.path.abspath(self.path))
        glue = "&" if "?" in base else "?"
        last: sqlite3.Error | None = None
        for flags in ("mode=ro", "mode=ro&immutable=1"):
            conn = sqlite3.connect(
                f"{base}{glue}{flags}", timeout=timeout, isolation_level=None, check_same_thread=False, uri=True
            )
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # WAL: needs its -shm to read
                return conn
            except sqlite3.Error as exc:
                conn.close()
                last = exc
        raise StoreError(f"SQLite database {self.path} cannot be opened read-only: {last}")

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction per logical operation; writers take the lock up front (``BEGIN IMMEDIATE``).

        Taking the write lock at ``BEGIN`` (rather than on the first write) is
        what makes ``seq = next_seq`` safe across processes, and it lets the
        busy timeout wait for the lock instead of failing on a lock upgrade.
        """
        if write and self.read_only:
            raise StoreError(f"SQLite database {self.path} is open read-only; nothing was written")
        with self._lock, translate(self.path):
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def outside_transaction(self, *statements: str) -> tuple[object, ...] | None:
        """Run statements that refuse a transaction (``VACUUM``, a checkpoint); returns the last one's row."""
        row = None
        with self._lock, translate(self.path):
            for statement in statements:
                row = self._conn.execute(statement).fetchone()
        return row

    def close(self) -> None:
        with self._lock, translate(self.path):
            self._conn.close()

    # -- migrations --------------------------------------------------------------------------
    def _applied(self, conn: sqlite3.Connection) -> list[str]:
        if conn.execute(HAS_MIGRATIONS).fetchone() is None:
            return []
        return [name for (name,) in conn.execute(APPLIED)]

    def _check(self, applied: Sequence[str]) -> None:
        known = [name for name, _ in MIGRATIONS]
        unknown = [name for name in applied if name not in known]
        if unknown:
            raise StoreError(
                f"SQLite database {self.path} was written by a newer convmem (unknown migrations: "
                f"{', '.join(unknown)}); upgrade convmem to open it"
            )
        if list(applied) != known[: len(applied)]:
            raise StoreError(f"SQLite database {self.path} records migrations out of order: {', '.join(applied)}")

    def _inspect(self) -> list[str]:
        with self.transaction(write=False) as conn:
            applied = self._applied(conn)
            foreign = not applied and conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None
        if foreign:
            raise StoreError(
                f"SQLite database {self.path} holds tables of another program (no convmem "
                "migrations recorded); convmem left it untouched"
            )
        self._check(applied)
        return applied

    def _migrate(self) -> None:
        with self.transaction(write=True) as conn:
            conn.execute(CREATE_MIGRATIONS)
            applied = self._applied(conn)  # another process may have migrated meanwhile
            self._check(applied)
            for name, statements in MIGRATIONS[len(applied) :]:
                for statement in statements:
                    conn.execute(statement)
                conn.execute(RECORD_MIGRATION, (name, encode_datetime(now())))
