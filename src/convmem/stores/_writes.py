"""The write rules every built-in store applies the same way: scoped session keys, expectations, retries.

Pure functions, no I/O, so the five backends (and their async twins) cannot
disagree on what a stale writer, a lost session or a retried batch is (see
the module docstring of :mod:`convmem.stores.base`)::

    append(session, batch, expected_seq, expected_version, state)
        the session is gone but the writer expected messages -> SessionLostError
        next seq / state version differ from the expected     -> StaleSessionError
        every id of the batch stored with the same content    -> their seqs, nothing written
        an id stored with other content, or stored + new ids  -> ConflictError naming the id
        otherwise                                             -> the batch (and the state) written at once

Session ids are scoped by user: a store that keeps every user's sessions in
one namespace (a table, a key space) keys them by :func:`scoped`, which is
injective and keeps prefixes, so a prefix lookup is a prefix match on the key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..errors import ConfigurationError, ConflictError, SessionLostError, StaleSessionError
from ..messages import Message, StoredMessage
from ..session import SessionState
from ._common import json_object

__all__ = [
    "check_expected",
    "lost",
    "replayed",
    "same_message",
    "scoped",
    "state_for_write",
    "unscoped",
    "user_prefix",
]


def user_prefix(user_id: str | None) -> str:
    """The part of a scoped key that names the user: ``-:`` for no user, else ``<length>=<user id>:``."""
    return "-:" if user_id is None else f"{len(user_id)}={user_id}:"


def scoped(user_id: str | None, session_id: str) -> str:
    """The store-wide key of ``user_id``'s session ``session_id``.

    Injective (the user id's length comes first, so no user id or session id
    can be mistaken for the other), and ``scoped(u, p)`` is a prefix of
    ``scoped(u, i)`` exactly when ``p`` is a prefix of ``i``.
    """
    return user_prefix(user_id) + session_id


def unscoped(key: str) -> str:
    """The session id inside a key made by :func:`scoped`."""
    if key.startswith("-:"):
        return key[2:]
    length, _, rest = key.partition("=")
    return rest[int(length) + 1 :]


def lost(session_id: str, expected_seq: int) -> SessionLostError:
    return SessionLostError(
        f"the store lost session {session_id!r}: this writer holds {expected_seq} seqs of it, but the session "
        "no longer exists (deleted, expired, or the server restarted without persistence); nothing was written "
        "and it was not re-created"
    )


def check_expected(
    session_id: str, found: tuple[int, int] | None, expected_seq: int | None, expected_version: int | None
) -> None:
    """Raise unless a writer with these expectations may write to the session as it is now.

    ``found`` is the session's (next seq, state version), or None if it does not exist (or is hidden).
    """
    if found is None:
        if expected_seq or expected_version:
            raise lost(session_id, expected_seq or 0)
        return
    next_seq, version = found
    if (expected_seq is not None and expected_seq != next_seq) or (
        expected_version is not None and expected_version != version
    ):
        raise StaleSessionError(
            f"session {session_id!r} changed since this writer read it (next seq {next_seq}, state version "
            f"{version}; the writer expected {expected_seq}, {expected_version}); nothing was written"
        )


def same_message(a: Message, b: Message) -> bool:
    """The same message for a retry: every field equal except ``created_at`` (a retry may stamp it anew)."""
    return a == b or replace(a, created_at=None) == replace(b, created_at=None)


def replayed(
    session_id: str, batch: Sequence[tuple[Message, int]], stored: Mapping[str, StoredMessage]
) -> list[int] | None:
    """Decide about a batch some of whose ids the session's history holds (``stored``: id -> row).

    Returns None if it holds none of them (write the batch), the stored seqs if
    it holds all of them with the same content (a retry: write nothing), and
    raises ConflictError naming the first id otherwise.
    """
    if not stored:
        return None
    for message, _ in batch:
        row = stored.get(message.id or "")
        if row is not None and not same_message(row.message, message):
            raise ConflictError(
                f"message id {message.id!r} is already stored in session {session_id!r} (seq {row.seq}) with "
                "other content; nothing was written"
            )
    fresh = [m.id for m, _ in batch if (m.id or "") not in stored]
    if fresh:
        known = next(m.id for m, _ in batch if (m.id or "") in stored)
        raise ConflictError(
            f"message id {known!r} is already stored in session {session_id!r} but {fresh[0]!r} of the same batch "
            "is not: a retry resends the batch it retries; nothing was written"
        )
    return [stored[m.id or ""].seq for m, _ in batch]


def state_for_write(state: SessionState | None, expected_version: int | None) -> SessionState | None:
    """``state`` as it will be stored (version ``expected_version + 1``); None when the append saves no state."""
    if state is None:
        return None
    if expected_version is None:
        raise ConfigurationError("an append that saves a state needs expected_version")
    return replace(state, stats=json_object(state.stats, "session stats"), version=expected_version + 1)
