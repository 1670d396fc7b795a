"""Damaged stored bytes hurt only their own session, on every persistent backend.

One session of alice's is damaged twice over (a message row, then its session record). Its reads
raise a StoreError naming the backend, the session and (for a row) the seq; alice's other session
and bob's still list, open and export, expiry still runs, and the damaged session is listed, not hidden.
(The in-memory store holds no bytes that could be damaged.)
"""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from convmem import ConflictError, Memory, Message, StoreError
from convmem.stores._record import scoped

from ._backends import backend
from ._servers import PG_URL, REDIS_URL, prefix_for, schema_for


def _fill(store: Any) -> None:
    for user, session in (("alice", "bad"), ("alice", "good"), ("bob", "bad")):
        memory = Memory(max_tokens=4_000, store=store, session_id=session, user_id=user)
        memory.add_many([{"role": "system", "content": "be brief"}, {"role": "user", "content": f"{user} {session}"}])
        memory.add({"role": "assistant", "content": "ok"})


def _damage_row(kind: str, store: Any, location: Path) -> None:
    """Seq 1 of alice's session 'bad' becomes bytes that are not a message."""
    key = scoped("alice", "bad")
    if kind == "sqlite":
        with sqlite3.connect(location / "db.sqlite") as db:
            db.execute("UPDATE messages SET payload = '{\"role\": [' WHERE session_id = ? AND seq = 1", (key,))
        db.close()
    elif kind == "files":
        path = store.path_of("bad", user_id="alice") / "messages.jsonl"
        lines = path.read_bytes().split(b"\n")
        head = b'{"seq":1,"tokens":3,"message":{"role":"user","content":"\xff'
        lines[1] = head + b"x" * (len(lines[1]) - len(head) - 3) + b'"}}'  # the same length, not UTF-8
        path.write_bytes(b"\n".join(lines))
    elif kind == "postgres":
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as conn:
            table = f"{schema_for(location)}.messages"
            conn.execute(f"UPDATE {table} SET payload = '[[[' WHERE session_id = %s AND seq = 1".encode(), (key,))
    elif kind == "redis":
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        zkey = f"{prefix_for(location)}m:{key}"
        client.zremrangebyscore(zkey, 1, 1)
        client.zadd(zkey, {b'1|3|2|xx{"role":"user","content":' + b"[" * 5000: 1})
        client.close()


def _damage_record(kind: str, store: Any, location: Path) -> None:
    """Alice's session 'bad' gets a session record that cannot be read."""
    key = scoped("alice", "bad")
    if kind == "sqlite":
        with sqlite3.connect(location / "db.sqlite") as db:
            db.execute("UPDATE sessions SET metadata = 'not json', state = '{' WHERE id = ?", (key,))
        db.close()
    elif kind == "files":
        path = store.path_of("bad", user_id="alice") / "session.json"
        path.write_bytes(b"\x00\xffgarbage")
    elif kind == "postgres":
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(
                f"UPDATE {schema_for(location)}.sessions SET metadata = 'nan', state = '7' WHERE id = %s".encode(),
                (key,),
            )
    elif kind == "redis":
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        client.hset(f"{prefix_for(location)}s:{key}", mapping={"metadata": b"\xff{", "state": "[]", "version": "x"})
        client.close()


def _others_still_work(store: Any) -> None:
    for user, session in (("alice", "good"), ("bob", "bad")):
        memory = Memory.open(session, store=store, user_id=user)
        assert [m.text for m in memory.messages()][:3] == ["be brief", f"{user} {session}", "ok"]
        memory.add({"role": "user", "content": "still here"})
        assert b"still here" in store.export_jsonl(session, user_id=user)
        store.get_session(session, user_id=user)
    assert [i.id for i in store.list_sessions(user_id="bob")] == ["bad"]
    assert store.expire(timedelta(days=1), user_id="bob") == []


@pytest.mark.parametrize("kind", ["sqlite", "files", "postgres", "redis"])
def test_a_damaged_session_hurts_only_itself(kind: str, tmp_path: Path) -> None:
    with backend(kind, tmp_path) as store:
        _fill(store)
        _damage_row(kind, store, tmp_path)
        for read in (
            lambda: Memory.open("bad", store=store, user_id="alice"),
            lambda: list(store.messages("bad", user_id="alice")),
            lambda: store.export_jsonl("bad", user_id="alice"),
        ):
            with pytest.raises(StoreError) as info:
                read()
            text = str(info.value)
            assert "'bad'" in text, text
            assert "seq 1" in text or "line 2" in text, text
            assert kind.replace("files", "file store") in text, text
            assert not isinstance(info.value.__cause__, RecursionError)
        _others_still_work(store)
        listed = {i.id: i for i in store.list_sessions(user_id="alice")}
        assert set(listed) == {"bad", "good"}

        _damage_record(kind, store, tmp_path)
        listed = {i.id: i for i in store.list_sessions(user_id="alice")}
        assert set(listed) == {"bad", "good"}  # reported, not hidden
        assert listed["bad"].damaged is not None
        assert "corrupt" in listed["bad"].damaged
        assert listed["good"].damaged is None
        with pytest.raises(StoreError, match=r"'bad'.*corrupt"):
            Memory.open("bad", store=store, user_id="alice")
        with pytest.raises(StoreError, match="corrupt"):
            store.export_jsonl("bad", user_id="alice")
        assert "bad" not in store.expire(timedelta(days=1), user_id="alice")
        _others_still_work(store)


def test_a_lost_or_garbled_file_id_index_is_rebuilt(tmp_path: Path) -> None:
    with backend("files", tmp_path) as store:
        memory = Memory(max_tokens=4_000, store=store, session_id="s", user_id="u")
        memory.add(Message(role="user", content="one", id="order-1"))
        ids = store.path_of("s", user_id="u") / "ids"
        for damage in ("lost", "garbled", "torn"):
            if damage == "lost":
                import shutil

                shutil.rmtree(ids)
            else:
                for bucket in ids.iterdir():
                    bucket.write_bytes(b"\xff\xfe\x00junk" if damage == "garbled" else b'\n0\t"order-')
            other = Memory.open("s", store=store, user_id="u")
            with pytest.raises(ConflictError, match="order-1"):
                other.add(Message(role="user", content="other content", id="order-1"))
            assert [m.id for m in Memory.open("s", store=store, user_id="u").messages()] == ["order-1"]
        assert json.loads((store.path_of("s", user_id="u") / "session.json").read_text())["indexed"] > 0
