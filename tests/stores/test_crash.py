"""Crash safety and multi-process appends, with real processes, real files and SIGKILL.

* A writer process appends messages and prints each acknowledged one; it is
  killed with SIGKILL at a random moment, 20 times per backend. After every
  kill the store reopens with every acknowledged message, nothing twice, seqs
  without gaps, ``PRAGMA integrity_check`` ok (SQLite), and a torn last JSONL
  line cut off (files).
* Four processes append to one session at once: every message is stored
  exactly once and the seqs run 0..N-1.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from convmem.stores import FileStore, SQLiteStore
from convmem.stores.files._layout import user_dir

pytestmark = pytest.mark.slow  # real processes, SIGKILL and server restarts: the full suite only

WRITER = str(Path(__file__).with_name("_writer.py"))
BACKENDS = ["sqlite", "files"]


def session_dir(location: Path) -> Path:
    return location / "users" / user_dir("u") / "s"


def _location(backend: str, tmp_path: Path) -> Path:
    return tmp_path / ("convmem.db" if backend == "sqlite" else "files")


def _open(backend: str, location: Path) -> SQLiteStore | FileStore:
    return SQLiteStore(location) if backend == "sqlite" else FileStore(location)


def _writer(backend: str, location: Path, tag: str, count: int, size: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, WRITER, backend, str(location), "s", tag, str(count), str(size)],
        stdout=subprocess.PIPE,
        text=True,
    )


def _wait_for_a_write_in_progress(path: Path, deadline: float) -> None:
    """Return as soon as the file ends inside a line (a write is under way), or at the deadline."""
    while time.monotonic() < deadline:
        try:
            with open(path, "rb") as handle:
                handle.seek(-1, 2)
                if handle.read(1) != b"\n":
                    return
        except OSError:
            pass


def _note(line: str, acknowledged: dict[str, int]) -> bool:
    """Record an acknowledgement; the kill may cut the last one short, which then does not count."""
    fields = line.split()
    if not line.endswith("\n") or len(fields) != 2:
        return False
    acknowledged[fields[0]] = int(fields[1])
    return True


def _check(backend: str, location: Path, acknowledged: dict[str, int]) -> list[str]:
    store = _open(backend, location)
    try:
        store.load("s", user_id="u")  # takes the lock and repairs a torn line, if any
        rows = list(store.messages("s", user_id="u"))
    finally:
        store.close()
    ids = [r.message.id or "" for r in rows]
    assert len(ids) == len(set(ids)), "a message was stored twice"
    assert [r.seq for r in rows] == list(range(len(rows))), "seqs have a gap or a repeat"
    seq_of = {r.message.id: r.seq for r in rows}
    missing = {i for i in acknowledged if seq_of.get(i) != acknowledged[i]}
    assert not missing, f"acknowledged messages lost: {sorted(missing)[:5]}"
    if backend == "sqlite":
        with sqlite3.connect(location) as db:
            assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        db.close()
    else:
        assert (session_dir(location) / "messages.jsonl").read_bytes().endswith(b"\n")
    return ids


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigkill_at_random_moments_loses_no_acknowledged_message(backend: str, tmp_path: Path) -> None:
    rng = random.Random(4)
    location = _location(backend, tmp_path)
    acknowledged: dict[str, int] = {}
    torn = 0
    for round_ in range(20):
        # Every other round (files) writes lines of megabytes and aims the kill at a write in progress.
        size = 4_000_000 if round_ % 2 and backend == "files" else rng.choice([10, 5_000, 200_000])
        with _writer(backend, location, f"r{round_}", 10_000, size) as proc:
            assert proc.stdout is not None
            for _ in range(rng.randint(0, 1 if size > 10_000 else 12)):
                if not _note(proc.stdout.readline(), acknowledged):
                    break
            jsonl = session_dir(location) / "messages.jsonl"
            if size > 1_000_000:
                _wait_for_a_write_in_progress(jsonl, time.monotonic() + rng.random() * 0.2)
            else:
                time.sleep(rng.random() * 0.01)
            proc.send_signal(signal.SIGKILL)
            for line in proc.stdout:  # printed before the kill: acknowledged too
                _note(line, acknowledged)
        torn += backend == "files" and jsonl.exists() and not jsonl.read_bytes().endswith(b"\n")
        _check(backend, location, acknowledged)
    assert len(acknowledged) > 20
    print(f"{backend}: {len(acknowledged)} acknowledged messages survived 20 kills; {torn} torn lines repaired")


@pytest.mark.parametrize("backend", BACKENDS)
def test_four_processes_appending_to_one_session_get_gap_free_seqs(backend: str, tmp_path: Path) -> None:
    location = _location(backend, tmp_path)
    _open(backend, location).close()  # create the database (or directory) before the race
    procs = [_writer(backend, location, f"p{n}", 60, 200) for n in range(4)]
    acknowledged: dict[str, int] = {}
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        acknowledged.update((i, int(s)) for i, s in (line.split() for line in out.splitlines()))
    assert len(acknowledged) == 240
    assert sorted(acknowledged.values()) == list(range(240))
    ids = _check(backend, location, acknowledged)
    assert sorted(ids) == sorted(acknowledged)
