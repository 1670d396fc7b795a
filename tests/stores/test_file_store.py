"""FileStore passes the conformance suite (sync and async) against a real directory."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from convmem.errors import ConflictError
from convmem.stores import AsyncFileStore, FileStore
from convmem.stores.base import AppendRequest
from convmem.testing import AsyncStoreConformance, StoreConformance, numbered


class TestFileStore(StoreConformance):
    def make_store(self, location: Path) -> FileStore:
        return FileStore(location / "files")

    def per_kind(self, store: Any, kind: str) -> Any:
        from convmem.stores.files.longterm import FileBlockStore, FileFactStore, FileRecallStore

        return {"facts": FileFactStore, "blocks": FileBlockStore, "recall": FileRecallStore}[kind](store)


class TestAsyncFileStore(AsyncStoreConformance):
    def make_store(self, location: Path) -> AsyncFileStore:
        return AsyncFileStore(location / "files")


def test_messages_are_greppable_jsonl_lines(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.append(AppendRequest("s1", numbered(3), user_id="u"))
    lines = (FileStore(tmp_path).path_of("s1", user_id="u") / "messages.jsonl").read_text().splitlines()
    assert len(lines) == 3
    assert lines[1].startswith('{"seq":1,"tokens":6,"message":{"role":"user","content":"m 1"')


def test_a_lost_id_index_is_rebuilt_from_the_lines(tmp_path: Path) -> None:
    FileStore(tmp_path).append(AppendRequest("s1", numbered(3), user_id="u"))
    session = FileStore(tmp_path).path_of("s1", user_id="u")
    shutil.rmtree(session / "ids")
    record = json.loads((session / "session.json").read_text())
    (session / "session.json").write_text(json.dumps(record | {"indexed": 0}))
    assert FileStore(tmp_path).append(AppendRequest("s1", numbered(1, start=1), user_id="u")) == [
        1
    ]  # a retry: stored already
    changed = [(replace(numbered(1, start=1)[0][0], content="other"), 5)]
    with pytest.raises(ConflictError, match="'m1'"):
        FileStore(tmp_path).append(AppendRequest("s1", changed, user_id="u"))
    assert [r.seq for r in FileStore(tmp_path).messages("s1", user_id="u")] == [0, 1, 2]


def test_a_store_of_the_layout_before_user_directories_is_moved_into_them(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.append(AppendRequest("a", numbered(2), user_id="alice"))
    store.append(AppendRequest("n", numbered(1), user_id=None))
    fork = store.fork("a", 0, user_id="alice")
    legacy = tmp_path / "sessions"
    legacy.mkdir()
    for user, session_id in (("alice", "a"), ("alice", fork.id), (None, "n")):
        store.path_of(session_id, user_id=user).rename(legacy / session_id)  # the old layout: sessions/<id>/
    (legacy / ".trash-x-1").mkdir()
    (legacy / "never-written").mkdir()
    moved = FileStore(tmp_path)
    assert not legacy.exists()
    assert [i.id for i in moved.list_sessions(user_id="alice")] == sorted(["a", fork.id], key=[fork.id, "a"].index)
    assert [r.message.id for r in moved.messages(fork.id, user_id="alice")] == ["m0"]
    assert moved.append(AppendRequest("n", numbered(1, start=1))) == [1]
    assert moved.path_of("a", user_id="alice").parent.name == "ualice"


def test_a_session_whose_record_is_lost_is_reported_damaged_not_hidden(tmp_path: Path) -> None:
    from convmem.errors import StoreError
    from convmem.stores.base import AppendRequest
    from convmem.testing._data import numbered

    store = FileStore(tmp_path / "files")
    store.append(AppendRequest("chat", numbered(3), user_id="u"))
    store.append(AppendRequest("other", numbered(1), user_id="u"))
    (record,) = (tmp_path / "files").rglob("chat/session.json")
    record.unlink()  # lost; the messages stay on disk
    listed = {i.id: i for i in store.list_sessions(user_id="u")}
    assert set(listed) == {"chat", "other"}
    assert listed["chat"].damaged is not None
    assert "session.json is lost" in listed["chat"].damaged
    for call in (
        lambda: store.get_session("chat", user_id="u"),
        lambda: store.load("chat", user_id="u"),
        lambda: store.append(AppendRequest("chat", numbered(1, prefix="n"), user_id="u")),  # never a new seq 0
    ):
        with pytest.raises(StoreError, match="damaged"):
            call()
    assert len((record.parent / "messages.jsonl").read_bytes().splitlines()) >= 3  # nothing removed
