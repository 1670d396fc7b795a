"""FileStore passes the conformance suite (sync and async) against a real directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from convmem import InvalidMessageError
from convmem.stores import AsyncFileStore, FileStore
from convmem.testing import AsyncStoreConformance, StoreConformance, numbered


class TestFileStore(StoreConformance):
    def make_store(self, location: Path) -> FileStore:
        return FileStore(location / "files")


class TestAsyncFileStore(AsyncStoreConformance):
    def make_store(self, location: Path) -> AsyncFileStore:
        return AsyncFileStore(location / "files")


def test_messages_are_greppable_jsonl_lines(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.append("s1", numbered(3), user_id="u")
    lines = (tmp_path / "sessions" / "s1" / "messages.jsonl").read_text().splitlines()
    assert len(lines) == 3
    assert lines[1].startswith('{"seq":1,"tokens":6,"message":{"role":"user","content":"m 1"')


def test_a_lost_id_index_is_rebuilt_from_the_lines(tmp_path: Path) -> None:
    FileStore(tmp_path).append("s1", numbered(3), user_id="u")
    session = tmp_path / "sessions" / "s1"
    shutil.rmtree(session / "ids")
    record = json.loads((session / "session.json").read_text())
    (session / "session.json").write_text(json.dumps(record | {"indexed": 0}))
    with pytest.raises(InvalidMessageError, match="duplicate"):
        FileStore(tmp_path).append("s1", numbered(1, start=1), user_id="u")
