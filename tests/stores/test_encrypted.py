"""Encryption at rest on every backend: what is written round-trips, no plaintext reaches storage, rotation
under a concurrent writer loses nothing, and a lost or wrong key (or a moved row) is a DecryptionError.

The conformance suite runs over the wrapper too (``test_encrypted_conformance.py``); this module checks
what is particular to encryption. The byte scans reuse ``test_forget``'s readers of each backend's bytes
(files, the PostgreSQL relation files and rows, every Redis key).
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convmem.errors import BlockEditError, DecryptionError
from convmem.longterm.blocks.store import BlockRecord
from convmem.longterm.facts.model import Fact
from convmem.messages import Message
from convmem.session import SessionState, SummaryRecord
from convmem.stores._export import parse_line
from convmem.stores.base import AppendRequest
from convmem.stores.encrypted import KEY_BLOCK, EncryptedStore, KeyRing
from convmem.testing._data import messages as any_message

from ._backends import BACKENDS, backend
from .test_forget import canary, found, store_bytes

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)
RING = KeyRing.generate("k1")
SCANNED = [pytest.param(k, marks=pytest.mark.slow) if k == "postgres" else k for k in BACKENDS if k != "memory"]
_users = itertools.count()


@pytest.fixture(params=BACKENDS)
def inner(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    with backend(request.param, tmp_path) as store:
        yield store


_texts = st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=40).filter(str.strip)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batch=st.lists(any_message, min_size=1, max_size=5),
    summary=_texts,
    fact_texts=st.lists(_texts, min_size=1, max_size=3),
    block=_texts,
    description=st.none() | _texts,
)
def test_everything_written_round_trips_on_every_backend(
    inner: Any, batch: list[Message], summary: str, fact_texts: list[str], block: str, description: str | None
) -> None:
    store = EncryptedStore(inner, RING)
    user = f"u{next(_users)}"
    written = [(Message(**{**_fields(m), "id": f"m{i}"}), 3 + i) for i, m in enumerate(batch)]
    store.append(AppendRequest("s", written, user_id=user, expected_seq=0))
    state = SessionState(summary=SummaryRecord(summary, 0, 0, 4, T0), stats={"messages": len(written)})
    saved = store.save_state("s", state, expected_version=0, user_id=user)
    facts = [Fact(f"{user}-f{i}", user, t, T0, T0, subject=t, metadata={"t": t}) for i, t in enumerate(fact_texts)]
    store.facts().write_facts(facts, [])
    store.blocks().save_block(BlockRecord(user, "notes", block, 0, description=description), expected_version=0)

    assert [(r.message, r.tokens) for r in store.messages("s", user_id=user)] == written
    loaded = store.load("s", user_id=user)
    assert loaded.state == saved
    assert loaded.state.summary == state.summary
    assert store.facts().list_facts(user_id=user) == facts
    assert store.blocks().list_blocks(user) == [BlockRecord(user, "notes", block, 1, description=description)]
    # An export is the plaintext (imports through the wrapper are checked by the conformance suite).
    lines = store.export_jsonl("s", user_id=user).splitlines()
    assert [(r.message, r.tokens) for r in map(parse_line, lines[1:])] == written
    # What the backend holds is sealed: no content, no summary, no fact or block text in the clear.
    for row in inner.messages("s", user_id=user):
        assert isinstance(row.message.content, str)
        assert row.message.content.startswith("cm1.")
        assert not row.message.metadata
        assert not row.message.extra
        assert row.message.name is None
    assert inner.load("s", user_id=user).state.summary.text.startswith("cm1.")
    assert all(f.text.startswith("cm1.") and f.subject is None for f in inner.facts().list_facts(user_id=user))
    assert [b.value[:4] for b in inner.blocks().list_blocks(user) if b.name != KEY_BLOCK] == ["cm1."]


def _fields(message: Message) -> dict[str, Any]:
    return {name: getattr(message, name) for name in Message.__dataclass_fields__}


def _seed(store: Any, user: str) -> list[str]:
    """Messages (a fork included), a summary, facts and two block versions, every text with a canary."""
    words: list[str] = []

    def said(tag: str, n: int) -> list[tuple[Message, int]]:
        out = []
        for i in range(n):
            words.append(canary())
            out.append((Message(role="user", content=f"{user} said {words[-1]}", id=f"{tag}{i}", created_at=T0), 5))
        return out

    store.append(AppendRequest("chat", said("a", 4), user_id=user))
    fork = store.fork("chat", 2, user_id=user)
    store.append(AppendRequest(fork.id, said("f", 2), user_id=user, expected_seq=3))
    words.append(canary())
    summary = SummaryRecord(f"summary of {words[-1]}", 0, 1, 5, T0)
    store.save_state(
        "chat", SessionState(window_start=2, folded_to=1, summary=summary), expected_version=0, user_id=user
    )
    words += [canary(), canary()]
    store.facts().write_facts([Fact("f1", user, f"likes {words[-2]}", T0, T0, subject=f"{words[-1]}")], [])
    for version in range(2):
        words.append(canary())
        store.blocks().save_block(BlockRecord(user, "persona", f"is {words[-1]}", version), expected_version=version)
    return words


@pytest.mark.parametrize("kind", SCANNED)
def test_no_plaintext_canary_in_message_fact_or_block_storage(kind: str, tmp_path: Path) -> None:
    with backend(kind, tmp_path) as inner:
        store = EncryptedStore(inner, RING)
        words = _seed(store, "alice")
        # The control: the same scan finds what is written in the clear (so it can see the rows at all).
        plain = [canary()]
        inner.append(AppendRequest("plain", [(Message(role="user", content=plain[0], id="p0"), 3)], user_id="bob"))
        if kind == "sqlite":
            inner.compact()  # the WAL folded into the database file, so the scan reads what is committed
        data = store_bytes(kind, inner, tmp_path)
        assert found(data, plain) == plain
        assert found(data, words) == []
        assert len(store.blocks().load_block("alice", "persona").value) > 0  # and it still reads back


def _chat(store: Any, user: str, session: str, texts: list[str], start: int = 0) -> None:
    rows = [(Message(role="user", content=t, id=f"{session}-{start + i}"), 4) for i, t in enumerate(texts)]
    store.append(AppendRequest(session, rows, user_id=user, expected_seq=start))


@pytest.mark.parametrize("kind", ["sqlite", "redis", pytest.param("postgres", marks=pytest.mark.slow)])
def test_rotation_under_a_concurrent_writer_loses_nothing(kind: str, tmp_path: Path) -> None:
    k1, k2 = secrets.token_bytes(32), secrets.token_bytes(32)
    old = KeyRing({"k1": k1})
    new = KeyRing({"k1": k1, "k2": k2}, primary="k2")  # the ring every process is given first in a rollout
    back = KeyRing({"k1": k1, "k2": k2}, primary="k1")  # a process not yet switched: it re-wraps by k1
    users = [f"user{i}" for i in range(6)]
    with backend(kind, tmp_path) as inner:
        before = EncryptedStore(inner, old)
        for user in users:
            _chat(before, user, "old", [f"{user} before {i}" for i in range(3)])
        writer, rotator, laggard = EncryptedStore(inner, new), EncryptedStore(inner, new), EncryptedStore(inner, back)
        expected = {u: {"old": [f"{u} before {i}" for i in range(3)]} for u in users}
        failures: list[BaseException] = []

        def write() -> None:
            try:
                for step in range(30):
                    for user in users:
                        session = f"s{step // 10}"  # a new session every 10 steps: its first write checks the key
                        texts = expected[user].setdefault(session, [])
                        _chat(writer, user, session, [f"{user} {session} {step}"], start=len(texts))
                        texts.append(f"{user} {session} {step}")
            except BaseException as exc:  # reported by the main thread
                failures.append(exc)

        thread = threading.Thread(target=write)
        thread.start()
        rotations = 0
        while thread.is_alive():  # every data key re-wrapped back and forth under the writer, by compare-and-set
            for user in users:
                rotations += rotator.rotate(user_id=user) + laggard.rotate(user_id=user)
        thread.join()
        assert failures == []
        assert rotations > len(users)
        for user in users:
            rotator.rotate(user_id=user)
        # The old KEK can go: everything, before and during the rotation, opens with the new one alone.
        after = EncryptedStore(inner, new.without("k1"))
        for user in users:
            got = {
                s.id: [r.message.content for r in after.messages(s.id, user_id=user)]
                for s in after.list_sessions(user_id=user)
            }
            assert got == expected[user]
            assert after.rotate(user_id=user) is False  # nothing left wrapped by k1


def test_a_lost_or_wrong_key_or_a_moved_row_is_a_named_error(inner: Any) -> None:
    store = EncryptedStore(inner, RING)
    _chat(store, "alice", "chat", ["alice's secret"])
    _chat(store, "alice", "other", ["other text"])
    store.facts().write_facts([Fact("f1", "alice", "alice fact", T0, T0)], [])
    store.blocks().save_block(BlockRecord("alice", "persona", "alice block", 0), expected_version=0)

    wrong = EncryptedStore(inner, KeyRing({"k1": b"\x01" * 32}))  # the same id, another key
    with pytest.raises(DecryptionError, match="does not open"):
        wrong.load("chat", user_id="alice")
    missing = EncryptedStore(inner, KeyRing.generate("k9"))
    with pytest.raises(DecryptionError, match="'k1', which the key ring does not hold"):
        list(missing.messages("chat", user_id="alice"))
    with pytest.raises(DecryptionError):
        missing.facts().list_facts(user_id="alice")
    with pytest.raises(DecryptionError):
        missing.blocks().list_blocks("alice")

    # A sealed row copied into another session of the same user (same id), or to another user, does not open.
    sealed = next(inner.messages("chat", user_id="alice")).message
    inner.append(AppendRequest("moved", [(sealed, 4)], user_id="alice"))
    with pytest.raises(DecryptionError, match="written to another session"):
        store.load("moved", user_id="alice")
    inner.append(AppendRequest("chat", [(sealed, 4)], user_id="bob"))
    with pytest.raises(DecryptionError):
        list(store.messages("chat", user_id="bob"))
    # A row written around the wrapper, unsealed, is refused rather than passed on.
    inner.append(AppendRequest("raw", [(Message(role="user", content="clear", id="r0"), 3)], user_id="alice"))
    with pytest.raises(DecryptionError, match="not encrypted"):
        list(store.messages("raw", user_id="alice"))
    # The data key's block is reserved: neither listed, nor loaded, nor overwritten through the wrapper.
    assert [b.name for b in store.blocks().list_blocks("alice")] == ["persona"]
    assert store.blocks().load_block("alice", KEY_BLOCK) is None
    with pytest.raises(BlockEditError):
        store.blocks().save_block(BlockRecord("alice", KEY_BLOCK, "x", 1), expected_version=1)


def test_forgetting_a_user_erases_their_data_key_so_a_copy_of_their_rows_is_unreadable(inner: Any) -> None:
    store = EncryptedStore(inner, RING)
    _chat(store, "alice", "chat", ["alice's secret"])
    sealed = next(inner.messages("chat", user_id="alice")).message  # a copy: a backup, a replica
    assert store.forget(user_id="alice").removed["blocks"] == 1  # the data key's block
    inner.append(AppendRequest("restored", [(sealed, 4)], user_id="alice"))
    with pytest.raises(DecryptionError):
        list(EncryptedStore(inner, RING).messages("restored", user_id="alice"))


def test_a_memory_over_an_encrypted_store_evicts_summarizes_and_resumes_alike(tmp_path: Path) -> None:
    from convmem import Memory
    from convmem.stores import SQLiteStore

    store = EncryptedStore(SQLiteStore(tmp_path / "db.sqlite"), RING)
    memory = Memory(
        max_tokens=2000,
        store=store,
        session_id="chat",
        user_id="alice",
        strategy="summary_buffer",
        strategy_options={"max_tokens": 120, "keep_recent_tokens": 60},
    )
    for i in range(30):
        memory.add({"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} about topic {i % 5}"})
    live = memory.context().request()
    assert memory.messages("summarized")
    reopened = Memory.open("chat", store=EncryptedStore(SQLiteStore(tmp_path / "db.sqlite"), RING), user_id="alice")
    assert reopened.context().request() == live
    assert store.inner.load("chat", user_id="alice").state.summary.text.startswith("cm1.")


def test_a_key_ring_refuses_bad_keys_and_round_trips_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from convmem.errors import ConfigurationError

    for bad in ({}, {"k": b"short"}, {"a.b": b"x" * 32}, {"": b"x" * 32}):
        with pytest.raises(ConfigurationError):
            KeyRing(bad)
    with pytest.raises(ConfigurationError, match="primary"):
        KeyRing({"k1": b"x" * 32}, primary="k2")
    ring = KeyRing.generate("k1").with_key("k2", b"y" * 32)
    path = tmp_path / "keys.json"
    path.write_text(ring.to_json())
    monkeypatch.setenv("CONVMEM_KEY_FILE", str(path))
    loaded = KeyRing.from_env()
    assert loaded is not None
    assert (loaded.ids, loaded.primary) == (("k1", "k2"), "k2")
    monkeypatch.setenv("CONVMEM_KEY_FILE", "")
    assert KeyRing.from_env() is None
    path.write_text('{"keys": {"k1": "not base64!"}}')
    with pytest.raises(ConfigurationError, match="key file"):
        KeyRing.from_file(path)


def test_timestamps_and_expiry_still_work_on_sealed_rows(inner: Any) -> None:
    store = EncryptedStore(inner, RING)
    _chat(store, "alice", "chat", ["a", "b"])
    assert store.expire(timedelta(days=1), user_id="alice") == []
    assert [i.id for i in store.list_sessions(user_id="alice")] == ["chat"]
