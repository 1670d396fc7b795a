"""The rules of every built-in store, in one place: the pure decisions of append, save, fork, delete, import.

No I/O, so the five backends (and their async twins) cannot disagree on what
a stale writer, a lost session, a retried batch, a valid fork or a taken id
is (see the module docstring of :mod:`convmem.stores.base`). A backend reads
what a decision needs, calls the rule, and writes what it decides::

    append(request)       check_batch: ids unique, token counts non-negative; an empty batch writes nothing
                          written_state: the state as stored (version expected_version + 1)
        admit(view)       the session is gone but the writer expected messages -> SessionLostError
                          next seq / state version differ from the expected     -> StaleSessionError
                          the session is hidden (deleted, its forks live)        -> SessionNotFoundError
        replayed(stored)  every id of the batch stored with the same content    -> their seqs, nothing written
                          an id stored with other content, or stored + new ids  -> ConflictError naming the id
                          otherwise                                             -> the batch (and state) written
    save_state            saved_state, then check_expected against the stored version
    fork(at_seq)          check_fork (at_seq within the history), fork_home (where the shared rows live),
                          fork_record (the new session: its counters, its state by fork_state)
    delete_messages       check_expected (expected_seq), check_deletable (only rows no fork shares)
    import_jsonl          taken: the user's own session of that id already exists
    every method          ids_checked: its session and user ids keep convmem.limits.check_id (InvalidIdError)

How a session is keyed (its id scoped by user) and where its rows live
across its fork chain are in :mod:`convmem.stores._record`.
"""

from __future__ import annotations

import functools
import inspect
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, TypeVar

from ..errors import (
    AmbiguousSessionError,
    ConfigurationError,
    ConflictError,
    InvalidMessageError,
    SessionLostError,
    SessionNotFoundError,
    StaleSessionError,
    StoreError,
)
from ..limits import check_id
from ..messages import Message, StoredMessage, same_message
from ..session import SessionState
from ._record import SessionRecord
from .base import AppendRequest

__all__ = [
    "admit",
    "check_batch",
    "check_deletable",
    "check_expected",
    "check_fork",
    "fork_home",
    "fork_record",
    "fork_state",
    "hidden",
    "ids_checked",
    "json_object",
    "lost",
    "new_session_id",
    "now",
    "pick",
    "replayed",
    "saved_state",
    "taken",
    "unfolded_span",
    "written_state",
]


# -- ids at the door ----------------------------------------------------------------------------
# The methods that name a session (first argument, or ``session_id=``) and those that take only a user.
_NAMES_SESSION = frozenset(
    {"load", "save_state", "messages", "delete_messages", "get_session", "update_session"}
    | {"delete_session", "fork", "export_jsonl"}
)
_NAMES_USER = frozenset({"list_sessions", "expire", "import_jsonl"})
C = TypeVar("C", bound=type)


# Pairs of ids that passed the rule. A memory names the same session and user on every append, and the
# rule (a regex, separator scans) would otherwise run again on every write of every turn. Only exact
# ``str`` values are kept (a subclass could hash or compare as another id); bounded, cleared when full.
_CHECKED: dict[tuple[str | None, str | None], None] = {}
_CHECKED_MAX = 4096


def check_ids(session_id: object, user_id: object) -> None:
    """The one id rule of every backend (:func:`convmem.limits.check_id`); ``user_id`` None is no user."""
    plain = (session_id is None or type(session_id) is str) and (user_id is None or type(user_id) is str)
    if plain and (session_id, user_id) in _CHECKED:
        return
    if session_id is not None:
        check_id(session_id, "session_id")
    if user_id is not None:
        check_id(user_id, "user_id", session=False)
    if plain:
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED[(session_id, user_id)] = None  # type: ignore[index]  # both are str or None (``plain``)


def _ids_of(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    if name == "append":
        request = args[0] if args else kwargs.get("request")
        if isinstance(request, AppendRequest):
            check_ids(request.session_id, request.user_id)
        return
    session_id = (args[0] if args else kwargs.get("session_id")) if name in _NAMES_SESSION else None
    if name in _NAMES_SESSION and session_id is None:
        session_id = ""  # a session is named by None: refused as an empty id, never a driver's TypeError
    check_ids(session_id, kwargs.get("user_id"))


def _checked(name: str, method: Any) -> Any:
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def checked_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            _ids_of(name, args, kwargs)
            return await method(self, *args, **kwargs)

        return checked_async

    @functools.wraps(method)
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        _ids_of(name, args, kwargs)
        return method(self, *args, **kwargs)

    return checked


def ids_checked(cls: C) -> C:
    """Check the session and user ids of every store method ``cls`` defines before it runs, so every
    backend refuses the same ids with the same InvalidIdError, before a driver or a path sees them."""
    for name in _NAMES_SESSION | _NAMES_USER | {"append"}:
        method = cls.__dict__.get(name)
        if method is not None:
            setattr(cls, name, _checked(name, method))
    return cls


def now() -> datetime:
    return datetime.now(timezone.utc)


def new_session_id() -> str:
    return uuid.uuid4().hex


def pick(prefix: str, matches: Iterable[str]) -> str:
    """The one session id among ``matches`` (ids starting with ``prefix``, exact match first)."""
    found = sorted(set(matches))
    if prefix in found:
        return prefix
    if len(found) == 1 and prefix:
        return found[0]
    if len(found) > 1 and prefix:
        raise AmbiguousSessionError(prefix, found)
    raise SessionNotFoundError(prefix)


# -- append ------------------------------------------------------------------------------------
def check_batch(messages: Sequence[tuple[Message, int]]) -> None:
    """Every message carries a unique id and a non-negative token count."""
    seen: set[str] = set()
    for index, (message, tokens) in enumerate(messages):
        if message.id is None:
            raise InvalidMessageError("a stored message needs an id", field="id", index=index)
        if message.id in seen:
            raise InvalidMessageError(f"duplicate message id {message.id!r}", field="id", index=index)
        seen.add(message.id)
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise InvalidMessageError(f"token count must be a non-negative integer, got {tokens!r}", index=index)


def json_object(value: Mapping[str, Any], what: str = "session metadata") -> dict[str, Any]:
    """A detached JSON copy of ``value``, as every backend will read it back."""
    try:
        copy: dict[str, Any] = json.loads(json.dumps(dict(value), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} must be a JSON object: {exc}") from None
    return copy


def saved_state(state: SessionState, expected_version: int) -> SessionState:
    """``state`` as a save over version ``expected_version`` stores it: stats as JSON, the next version."""
    return replace(state, stats=json_object(state.stats, "session stats"), version=expected_version + 1)


def written_state(request: AppendRequest) -> SessionState | None:
    """The batch checked, and the request's state as the append stores it; None when it saves no state."""
    check_batch(request.messages)
    if request.state is None:
        return None
    if request.expected_version is None:
        raise ConfigurationError("an append that saves a state needs expected_version")
    return saved_state(request.state, request.expected_version)


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


def hidden(session_id: str) -> SessionNotFoundError:
    """A deleted session that forks still read: not found, yet its id stays taken (nothing is re-created)."""
    return SessionNotFoundError(session_id)


def admit(request: AppendRequest, found: tuple[int, int] | None, *, deleted: bool = False) -> None:
    """Raise unless the request's writer may append to the session as stored.

    ``found`` is the session's view (:meth:`SessionRecord.view`: next seq, state version), None when it
    does not exist or is ``deleted`` (hidden while its forks live).
    """
    if found is None or found != (request.expected_seq, request.expected_version):  # the common case: one compare
        check_expected(request.session_id, found, request.expected_seq, request.expected_version)
    if deleted:
        raise hidden(request.session_id)


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


def unfolded_span(state: SessionState, unfolded_limit: int) -> tuple[int, int] | None:
    """The seqs that opening a session reads its unfolded tail from (archived, not yet summarized), or None."""
    if unfolded_limit and state.window_start > state.folded_to + 1:
        return state.folded_to + 1, state.window_start - 1
    return None


# -- forks -------------------------------------------------------------------------------------
def check_fork(session_id: str, next_seq: int, at_seq: int) -> None:
    """A fork branches at a seq the session has (``next_seq``: the session's next seq)."""
    if not 0 <= at_seq < next_seq:
        raise StoreError(f"cannot fork session {session_id!r} at seq {at_seq}: its seqs run from 0 to {next_seq - 1}")


def fork_home(chain: Sequence[tuple[str, int | None]], at_seq: int) -> int:
    """Which session of ``chain`` (the source and its ancestors, nearest first) a fork at ``at_seq`` hangs from.

    The one where the shared history really lives: a fork of a fork at a seq
    the parent shares from its own parent branches from that ancestor.
    """
    home = 0
    while home + 1 < len(chain) and chain[home][1] is not None and at_seq <= (chain[home][1] or 0):
        home += 1
    return home


def fork_record(
    source: SessionRecord,
    at_seq: int,
    *,
    key: str,
    session_id: str,
    parent: tuple[str, str],
    shared: tuple[int, int],
    when: datetime | str,
) -> SessionRecord:
    """The session a fork of ``source`` at ``at_seq`` starts as.

    ``parent`` is the (key, id) of the session it hangs from (:func:`fork_home`), ``shared``
    the (count, tokens) of the history up to ``at_seq`` it reads from there; its title, model
    and metadata are the source's, its state :func:`fork_state`'s.
    """
    count, tokens = shared
    return SessionRecord(
        source.backend,
        key,
        session_id,
        source.user_id,
        source.title,
        source.model,
        source.metadata,
        when,
        when,
        fork_state(source.state(), at_seq, messages=count),
        next_seq=at_seq + 1,
        parent_key=parent[0],
        parent_id=parent[1],
        fork_seq=at_seq,
        base_count=count,
        base_tokens=tokens,
    )


_EVICTION_COUNTERS = ("evicted_messages", "evicted_tokens", "summarized_messages", "summarized_tokens")


def fork_state(state: SessionState, at_seq: int, *, messages: int) -> SessionState:
    """The state a fork at ``at_seq`` starts with (version 0).

    If the window still started at or before the fork point, the fork keeps
    the parent's window start, summary and stats. Otherwise the window had
    moved past the fork point and what it held then is unknown: the fork keeps
    the summary only if it ends before the fork point, and everything after it
    up to ``at_seq`` becomes the window, which the memory's strategy trims on
    its next turn. The memory's own counters (message count, last seq and, in
    the second case, the eviction counters) are rebased so the fork's stats
    describe the fork.
    """
    stats: dict[str, Any] = dict(state.stats)
    if "messages" in stats:
        stats["messages"] = messages
    if "last_seq" in stats:
        stats["last_seq"] = at_seq
    pinned_start = min(state.pinned_start, at_seq + 1)
    if state.window_start <= at_seq + 1:
        return SessionState(state.window_start, state.folded_to, pinned_start, state.summary, stats)
    summary = state.summary if state.summary is not None and state.folded_to <= at_seq else None
    for key in _EVICTION_COUNTERS:
        if key in stats:
            stats[key] = 0
    if summary is not None:
        folded_to = state.folded_to
        for kind in ("messages", "tokens"):
            if f"summarized_{kind}" in state.stats:
                stats[f"summarized_{kind}"] = stats[f"evicted_{kind}"] = state.stats[f"summarized_{kind}"]
    else:
        folded_to = -1
        if "first_evicted" in stats:
            stats["first_evicted"] = None
    return SessionState(folded_to + 1, folded_to, pinned_start, summary, stats)


# -- delete, import ----------------------------------------------------------------------------
def check_deletable(session_id: str, doomed: set[int], fork_seq: int | None, forks: list[tuple[str, int]]) -> None:
    """Only a session's own rows can be deleted, and only those no fork shares."""
    if fork_seq is not None and doomed and min(doomed) <= fork_seq:
        raise StoreError(
            f"session {session_id!r} shares seqs up to {fork_seq} with the session it was forked "
            "from; they cannot be deleted here"
        )
    for child, at in forks:
        if doomed and min(doomed) <= at:
            raise StoreError(f"fork {child!r} shares seqs up to {at} of session {session_id!r}; they cannot be deleted")


def taken(session_id: str) -> StoreError:
    """An import whose session id the user already has: nothing is imported."""
    return StoreError(f"import: session id {session_id!r} is taken; nothing was imported")
