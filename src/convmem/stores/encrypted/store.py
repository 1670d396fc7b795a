"""``EncryptedStore``: any store, with message content, summaries, facts and block text encrypted at rest.

A wrapper, so every backend (memory, SQLite, files, PostgreSQL, Redis, a third party's) gets encryption
from this one implementation: it seals what it writes (``_rows``) under the user's data key (``keys``)
and opens what it reads, and passes everything else through. The stores below see sealed rows whose
clear fields are those their rules read, so their writes, retries, forks, forgets and sweeps work as they
do unencrypted.

Every sealed value is bound to where it belongs: a message to its user, its id and the session it was
written to; a summary to its user and session; a fact to its user and id; a block to its user, name and
version. A row moved to another user, another id or a session that does not read that history does not
open: :class:`~convmem.errors.DecryptionError`, as for a lost or a wrong key. A fork reads its parent's
rows (and a fork starts with its parent's summary), so a row of a session's ancestry is accepted; the
ancestry is read only when a row names another session than the one read. Known limit: an ancestor that
was deleted while a fork still reads it is hidden, so its own parent cannot be looked up; past such an
ancestor, a row is accepted from any of the user's sessions. The seq of a row is not bound (a retry may
land at another seq than its first attempt, and must seal to the same bytes).

What is not encrypted, by design: the recall store (its documents are the input of the lexical and dense
indexes, which the database's own search reads: FTS5, tsvector, RediSearch, pgvector), ids, roles, times,
token counts, tool names, session titles and metadata. ``recall()`` gives the backend's recall store
as it is: an application that must keep message text out of every byte turns recall off.

Example::

    ring = KeyRing.from_file("/etc/convmem/keys.json")
    store = EncryptedStore(SQLiteStore("chat.db"), ring)
    memory = Memory(model="gpt-4o", store=store, session_id="chat", user_id="alice")
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from ...errors import ConfigurationError, ConflictError, DecryptionError, SessionNotFoundError, StaleSessionError
from ...longterm.blocks.store import BlockStore
from ...messages import StoredMessage, same_message
from ...session import LoadedSession, SessionInfo, SessionState
from .._export import export_line, export_session, parse_export, parse_line
from .._forget import ForgetReceipt
from .._writes import ids_checked
from ..base import AppendRequest
from ..codec import READ_ERRORS, corrupt, decode_state, dumps, encode_state, loads
from ._rows import key_of, open_message, open_state, seal_message, seal_state
from .keys import DataKeys, KeyRing
from .longterm import EncryptedBlockStore, EncryptedFactStore

__all__ = ["EncryptedStore"]


@ids_checked  # the one id rule first, as every backend: before an id is sealed into anything
class EncryptedStore:
    """A :class:`~convmem.stores.base.SessionStore` (and long-term stores) sealing every row by its user's key.

    Args:
        store: the store that keeps the rows (any built-in backend, or one of the same contract).
        ring: the key-encryption keys (:class:`KeyRing`); its primary wraps new and re-wrapped data keys.
        keys: where the wrapped data keys live; by default the store's own block store (``store.blocks()``).
    """

    def __init__(self, store: Any, ring: KeyRing, *, keys: BlockStore | None = None) -> None:
        if not isinstance(ring, KeyRing):
            raise ConfigurationError(f"ring must be a KeyRing, got {type(ring).__name__}")
        if keys is None:
            if not callable(getattr(store, "blocks", None)):
                raise ConfigurationError("this store keeps no blocks: pass keys= (a BlockStore for the data keys)")
            keys = store.blocks()
        self._store = store
        self._keys = DataKeys(ring, keys)

    def __repr__(self) -> str:
        return f"EncryptedStore({self._store!r})"

    @property
    def inner(self) -> Any:
        """The wrapped store (what it holds is sealed)."""
        return self._store

    def rotate(self, *, user_id: str | None) -> bool:
        """Re-wrap the user's data key by the ring's primary key now (otherwise done on the user's next write).

        Returns whether it was wrapped by another key. Nothing is re-encrypted and nothing waits.
        """
        return self._keys.rotate(user_id)

    # -- writes ---------------------------------------------------------------------------------------
    def append(self, request: AppendRequest) -> list[int]:
        user, session = request.user_id, request.session_id
        # A new session reads the stored key record: a key cached before another process erased the user
        # must not seal rows nobody can open. An existing session's writes use the cached key.
        key = self._keys.current(user, checked=request.expected_seq in (None, 0))
        messages = [(seal_message(key, user, session, m), tokens) for m, tokens in request.messages]
        state = None if request.state is None else seal_state(key, user, session, request.state)
        try:
            return list(self._store.append(replace(request, messages=messages, state=state)))
        except StaleSessionError:
            raise
        except ConflictError:
            # A row of shared history was sealed in the session it was written to (a fork's parent), so a
            # retry of it through the fork seals to other bytes: decide the retry on the plaintext instead.
            seqs = self._replayed(request)
            if seqs is None:
                raise
            return seqs

    def _replayed(self, request: AppendRequest) -> list[int] | None:
        wanted = {m.id: m for m, _ in request.messages}
        found = {
            r.message.id: r
            for r in self.messages(request.session_id, user_id=request.user_id)
            if r.message.id in wanted
        }
        if len(found) != len(wanted) or not all(same_message(found[i].message, m) for i, m in wanted.items()):
            return None
        return [found[m.id].seq for m, _ in request.messages]

    def save_state(
        self, session_id: str, state: SessionState, *, expected_version: int, user_id: str | None = None
    ) -> SessionState:
        full = self._store.get_session(session_id, user_id=user_id).id  # a prefix seals under the full id
        sealed = seal_state(self._keys.current(user_id, checked=False), user_id, full, state)
        saved = self._store.save_state(session_id, sealed, expected_version=expected_version, user_id=user_id)
        return replace(state, version=saved.version)

    def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        parsed = parse_export(data)  # every rule of an import, on the plaintext
        key = self._keys.current(user_id)
        rows = [replace(r, message=seal_message(key, user_id, parsed.id, r.message)) for r in parsed.rows]
        sealed = replace(parsed, state=seal_state(key, user_id, parsed.id, parsed.state), rows=rows)
        data = export_session(sealed.record("encrypted", parsed.id, user_id), rows)
        info: SessionInfo = self._store.import_jsonl(data, user_id=user_id)
        return info

    # -- reads ----------------------------------------------------------------------------------------
    def load(self, session_id: str, *, user_id: str | None = None, unfolded_limit: int = 0) -> LoadedSession:
        loaded: LoadedSession = self._store.load(session_id, user_id=user_id, unfolded_limit=unfolded_limit)
        reader = _Reader(self, user_id, loaded.info.id, loaded.info)
        return replace(
            loaded,
            state=reader.state(loaded.state),
            pinned=[reader.row(r) for r in loaded.pinned],
            window=[reader.row(r) for r in loaded.window],
            unfolded=[reader.row(r) for r in loaded.unfolded],
        )

    def messages(
        self, session_id: str, *, user_id: str | None = None, from_seq: int = 0, to_seq: int | None = None
    ) -> Iterator[StoredMessage]:
        reader = _Reader(self, user_id, session_id, None)
        for stored in self._store.messages(session_id, user_id=user_id, from_seq=from_seq, to_seq=to_seq):
            yield reader.row(stored)

    def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        lines = bytes(self._store.export_jsonl(session_id, user_id=user_id)).splitlines()
        try:  # the backend's own export, so damage here is damage in the backend's rows
            header = loads(lines[0])
            reader = _Reader(self, user_id, header["session"]["id"], None)
            stored = decode_state(header["state"])
            header["state"] = encode_state(reader.state(stored), with_version=True)
            rows = [export_line(reader.row(parse_line(line))) for line in lines[1:] if line]
        except READ_ERRORS as exc:
            raise corrupt("encrypted", session_id, None, exc) from None
        return b"".join([(dumps(header) + "\n").encode(), *rows])

    # -- what needs no key ----------------------------------------------------------------------------
    def delete_messages(
        self, session_id: str, seqs: Sequence[int], *, user_id: str | None = None, expected_seq: int | None = None
    ) -> None:
        self._store.delete_messages(session_id, seqs, user_id=user_id, expected_seq=expected_seq)

    def get_session(self, session_id: str, *, user_id: str | None = None) -> SessionInfo:
        info: SessionInfo = self._store.get_session(session_id, user_id=user_id)
        return info

    def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        return list(self._store.list_sessions(user_id=user_id, limit=limit))

    def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        info: SessionInfo = self._store.update_session(session_id, user_id=user_id, title=title, metadata=metadata)
        return info

    def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        self._store.delete_session(session_id, user_id=user_id)

    def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]:
        return list(self._store.expire(older_than, user_id=user_id))

    def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo:
        info: SessionInfo = self._store.fork(session_id, at_seq, user_id=user_id)
        return info

    def forget(self, *, user_id: str | None, session_id: str | None = None, compact: bool = False) -> ForgetReceipt:
        """Erase as the wrapped store does; erasing the user erases their data key too (crypto-shredding)."""
        receipt: ForgetReceipt = self._store.forget(user_id=user_id, session_id=session_id, compact=compact)
        if session_id is None:
            self._keys.forget(user_id)
        return receipt

    def compact(self) -> None:
        self._store.compact()

    def close(self) -> None:
        self._store.close()

    # -- long-term memory -----------------------------------------------------------------------------
    def facts(self) -> EncryptedFactStore:
        """The store's facts, their text sealed."""
        return EncryptedFactStore(self._store.facts(), self._keys)

    def blocks(self) -> EncryptedBlockStore:
        """The store's working blocks, their values sealed (the data-key block hidden)."""
        return EncryptedBlockStore(self._store.blocks(), self._keys)

    def recall(self) -> Any:
        """The backend's recall store, NOT encrypted: its text feeds the lexical and dense indexes."""
        return self._store.recall()


class _Reader:
    """Opens one session's rows, checking that each was written to it or to a session it forks from."""

    def __init__(self, outer: EncryptedStore, user_id: str | None, session_id: str, info: SessionInfo | None):
        self._outer, self._user, self._asked, self._info = outer, user_id, session_id, info
        self._lineage: set[str] | None = None
        self._cut = False

    def row(self, stored: StoredMessage) -> StoredMessage:
        what = f"message {stored.message.id!r}"
        key = self._outer._keys.for_read(self._user, key_of(stored.message.content, what))
        message, origin = open_message(key, self._user, stored.message)
        self._check(origin, f"{what} (seq {stored.seq})")
        return replace(stored, message=message)

    def state(self, state: SessionState) -> SessionState:
        if state.summary is None:
            return state
        key = self._outer._keys.for_read(self._user, key_of(state.summary.text, "the session's summary"))
        opened, origin = open_state(key, self._user, state)
        if origin is not None:
            self._check(origin, "the session's summary")
        return opened

    def _check(self, origin: str, what: str) -> None:
        if origin == self._asked or (self._info is not None and origin == self._info.id):
            return
        lineage = self._ancestry()
        if origin in lineage or self._cut:
            return
        raise DecryptionError(
            f"session {self._asked!r}: {what} was written to another session, which it does not fork from: moved"
        )

    def _ancestry(self) -> set[str]:
        if self._lineage is None:
            store = self._outer._store
            info = self._info or store.get_session(self._asked, user_id=self._user)
            lineage = {info.id}
            parent = info.parent_id
            while parent is not None and parent not in lineage:
                lineage.add(parent)
                try:
                    parent = store.get_session(parent, user_id=self._user).parent_id
                except SessionNotFoundError:  # deleted, hidden while its forks read it: its parent is unknown
                    self._cut = True
                    break
            self._lineage = lineage
        return self._lineage
