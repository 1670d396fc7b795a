"""The session half of the service: a thin adapter from tenant-scoped requests to ``Memory`` and the store.

Every method takes a :class:`~convmem.server.tenancy.Scope` and a client
session id, maps both onto the store (:mod:`convmem.server.tenancy`), opens the
session with ``Memory.open`` (so the options it was created with decide its
context, exactly as in process), performs one ``Memory`` call and returns
library objects. No policy lives here: eviction, summaries, budgets and
rendering are the library's.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

from ..errors import AmbiguousSessionError, ConflictError, InvalidMessageError, SessionNotFoundError, StoreError
from ..formats import FORMATS, parse_items
from ..formats._replies import parse_reply
from ..limits import check_json, check_text
from ..longterm.blocks.base import StaticBlock, stored_block
from ..memory import Memory
from ..memory._intake import keyed_by_id
from ..memory.options import initial_state
from ..messages import Message, StoredMessage
from ..policy.context import Context
from ..session import MessageStatus, SessionInfo, status_of
from ..stores._export import export_header
from ..stores.codec import decode_message
from ..telemetry import Telemetry
from ..usage import parse_usage
from .backends import Backend, RecallSink
from .blocklog import BlockLog
from .open_memories import OpenMemories, memory_view
from .problems import ServiceError
from .replays import Replays
from .tenancy import Scope

__all__ = ["SessionService"]

ADD_ATTEMPTS = 3
T = TypeVar("T")


class SessionService:
    """Sessions, messages and contexts of every tenant, over one :class:`Backend`."""

    def __init__(
        self,
        backend: Backend,
        *,
        keep_sessions: int = 256,
        keep_tokens: int = 4_000_000,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.backend = backend
        self.telemetry = telemetry
        self.store = backend.store
        self.sink = RecallSink(backend)
        self.blocklog = BlockLog(backend.blocks)
        self.replays = Replays(self.store, self.blocklog)
        self.memories = OpenMemories(max_sessions=keep_sessions, max_tokens=keep_tokens)

    # -- naming --------------------------------------------------------------------------------
    def resolve(self, scope: Scope, session_id: str, *, prefix: bool = False) -> SessionInfo:
        """The store's session for a client's exact id: the tenant's own id, or a fork's exact id.

        With ``prefix`` (a read that asked for it) a unique prefix of one of the caller's own client
        ids. The stores take id prefixes, and every store id of the tenant starts with ``<tenant>.``:
        so an exact lookup checks that the store found the very id asked for, never a longer one.
        """
        if prefix:
            return self._by_prefix(scope, session_id)
        user = scope.store_user
        for store_id in (scope.store_session(session_id), session_id):
            try:
                info = self.store.get_session(store_id, user_id=user)
            except (SessionNotFoundError, AmbiguousSessionError):
                continue
            if info.id == store_id and (store_id != session_id or not store_id.startswith(scope.session_prefix)):
                return info  # the tenant's own id, or a store-made (fork) id exactly
        raise SessionNotFoundError(session_id)

    def _by_prefix(self, scope: Scope, prefix: str) -> SessionInfo:
        """The one session among the caller's own whose client id starts with ``prefix`` (an exact id first)."""
        mine = {scope.client_session(s.id): s for s in self.store.list_sessions(user_id=scope.store_user)}
        if prefix in mine:
            return mine[prefix]
        found = sorted(c for c in mine if c.startswith(prefix))
        if len(found) > 1:
            raise AmbiguousSessionError(prefix, found)
        if not found:
            raise SessionNotFoundError(prefix)
        return mine[found[0]]

    def open(self, scope: Scope, session_id: str) -> Memory:
        """The session's memory as ``Memory.open`` gives it (its saved options, the user's blocks, the
        recall sink), kept open between requests while the store says it is still current."""
        return self._open(scope, self.resolve(scope, session_id))

    def _open(self, scope: Scope, info: SessionInfo) -> Memory:
        user, blocks = scope.store_user, self.user_blocks(scope)

        def opener() -> Memory:
            return Memory.open(
                info.id, store=self.store, user_id=user, sinks=[self.sink], blocks=blocks, telemetry=self.telemetry
            )

        return self.memories.get(info, user, blocks, opener)

    def _run(self, scope: Scope, memory: Memory, call: Callable[[Memory], T]) -> T:
        """``call(memory)``; a memory whose operation failed is dropped from the kept ones."""
        try:
            result = call(memory)
        except BaseException:
            self.memories.drop(scope.store_user, memory.session_id)
            raise
        if memory_view(memory)[0] == 0:
            # Nothing stored yet: a state-only change (usage, clear) lives in this memory alone until its
            # first append, so keeping it would give one worker a session the others do not see.
            self.memories.drop(scope.store_user, memory.session_id)
        else:
            self.memories.touch(memory, scope.store_user)
        return result

    def user_blocks(self, scope: Scope) -> list[StaticBlock]:
        """The user's working blocks as they are now: every context of the user's sessions shows them."""
        return [stored_block(r) for r in self.backend.blocks.list_blocks(scope.store_user)]

    # -- sessions ------------------------------------------------------------------------------
    def create(
        self, scope: Scope, options: Mapping[str, Any], *, title: str | None, metadata: Mapping[str, Any]
    ) -> SessionInfo:
        """A new, empty session whose options are saved with it (so every later open uses them)."""
        _check_info(title, metadata)
        options = dict(options)
        session_id = options.pop("id", None) or uuid.uuid4().hex
        store_id = scope.store_session(session_id)
        memory = Memory(store=self.store, session_id=store_id, user_id=scope.store_user, **options)  # validates
        now = datetime.now(timezone.utc)
        info = SessionInfo(store_id, scope.store_user, title, memory.model, dict(metadata), now, now, 0, 0)
        try:
            return self.store.import_jsonl(
                export_header(info, initial_state(memory.options), 0), user_id=scope.store_user
            )
        except StoreError as exc:
            if "is taken" in str(exc):
                raise ConflictError(f"session id {session_id!r} is taken") from None
            raise

    def list_sessions(self, scope: Scope, *, limit: int, query: str | None) -> list[SessionInfo]:
        sessions = self.store.list_sessions(user_id=scope.store_user, limit=None if query else limit)
        if query:
            needle = query.casefold()
            sessions = [s for s in sessions if needle in _searchable(scope, s)]
        return sessions[:limit]

    def update(
        self, scope: Scope, session_id: str, *, title: str | None, metadata: Mapping[str, Any] | None
    ) -> SessionInfo:
        _check_info(title, metadata)
        info = self.resolve(scope, session_id)
        return self.store.update_session(info.id, user_id=scope.store_user, title=title, metadata=metadata)

    def delete(self, scope: Scope, session_id: str) -> None:
        info = self.resolve(scope, session_id)
        self.memories.drop(scope.store_user, info.id)
        self.store.delete_session(info.id, user_id=scope.store_user)

    def fork(self, scope: Scope, session_id: str, at_seq: int) -> SessionInfo:
        info = self.resolve(scope, session_id)
        last = self._last_seq(scope, info)
        if last is None or at_seq > last:
            raise ServiceError(
                422, "invalid-seq", "Invalid seq", f"cannot fork at seq {at_seq}: the session's last seq is {last}"
            )
        return self.store.fork(info.id, at_seq, user_id=scope.store_user)

    def export(self, scope: Scope, session_id: str, *, prefix: bool = False) -> bytes:
        info = self.resolve(scope, session_id, prefix=prefix)
        data = self.store.export_jsonl(info.id, user_id=scope.store_user)
        head, _, rest = data.partition(b"\n")
        header = json.loads(head)
        header["session"]["id"] = scope.client_session(header["session"]["id"])
        lines = [_dumps(header)] + [_relabel(line, scope.client_message) for line in rest.decode().splitlines()]
        return ("\n".join(lines) + "\n").encode()

    def import_(self, scope: Scope, data: str, session_id: str | None) -> SessionInfo:
        head, _, rest = data.partition("\n")
        try:
            header = json.loads(head)
            exported = header["session"]["id"]
        except (ValueError, KeyError, TypeError):
            raise ServiceError(
                422, "invalid-export", "Invalid export", "line 1: not a convmem session export header"
            ) from None
        chosen = session_id or (exported if isinstance(exported, str) else None) or uuid.uuid4().hex
        header["session"]["id"] = scope.store_session(chosen)
        try:
            lines = [_dumps(header)] + [_relabel(line, scope.store_message) for line in rest.splitlines() if line]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ServiceError(422, "invalid-export", "Invalid export", "a message line is not valid JSON") from None
        text = "\n".join(lines) + "\n"
        try:
            return self.store.import_jsonl(text, user_id=scope.store_user)
        except StoreError as exc:
            if "is taken" in str(exc):
                raise ConflictError(f"import: session id {chosen!r} is taken; nothing was imported") from None
            if str(exc).startswith("import:"):
                raise ServiceError(422, "invalid-export", "Invalid export", str(exc)) from None  # problem_of scrubs
            raise

    # -- messages ------------------------------------------------------------------------------
    def add(
        self, scope: Scope, session_id: str, items: Sequence[Mapping[str, Any]], *, codec: bool, key: str | None = None
    ) -> list[Message]:
        """``Memory.add_many``: items in a provider format are parsed as they come (parallel Responses
        calls together, an Anthropic message with several tool results expanded), or codec dicts.
        A provider dict's ``id`` is kept as its message's id, as ``Memory.add`` keeps it."""
        if codec:
            parsed = [_decode(item, i) for i, item in enumerate(items)]
        else:
            for index, item in enumerate(items):
                if not isinstance(item, Mapping):
                    raise InvalidMessageError(f"must be an object, got {type(item).__name__}", index=index)
            parsed = [m if m.id is not None else keyed_by_id(m) or m for m in parse_items(list(items))]
        return self._add_parsed(scope, session_id, parsed, key)[0]

    def _add_parsed(
        self, scope: Scope, session_id: str, parsed: Sequence[Message], key: str | None
    ) -> tuple[list[Message], bool]:
        """Store messages under this tenant's ids; returns them and whether this call wrote them.

        A message without an id gets ``<key>.<index>`` under an ``Idempotency-Key`` (so a repeat is a
        retry the store recognises), a random one without. A writer refused as stale catches up inside
        ``Memory``; a ``ConflictError`` that reaches here is a real one (an id with other content),
        unless the append landed and only a later state save lost: then the add counts."""
        now = datetime.now(timezone.utc)
        batch = [
            m.with_identity(
                scope.store_message(m.id or (f"{key}.{i}" if key else uuid.uuid4().hex)), m.created_at or now
            )
            for i, m in enumerate(parsed)
        ]
        for attempt in range(ADD_ATTEMPTS):
            memory = self.open(scope, session_id)  # with the user's blocks: evicts beside them, as the context shows
            before = memory_view(memory)[0]
            try:
                added = self._run(scope, memory, lambda m: m.add_many(batch))
                return added, memory_view(memory)[0] > before
            except ConflictError:
                if memory_view(memory)[0] > before:  # appended; only the state save lost
                    return batch, True
                if attempt == ADD_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def add_response(
        self, scope: Scope, session_id: str, response: Mapping[str, Any], fmt: str | None, *, key: str | None = None
    ) -> list[Message]:
        """``Memory.add_response``: the reply's output stored as it comes, and its usage recorded; under an
        ``Idempotency-Key`` a repeat finds its messages stored and records the usage no second time."""
        if fmt is not None and fmt not in FORMATS:
            raise InvalidMessageError(f"unknown format {fmt!r}", field="format")
        messages, usage = parse_reply(dict(response))
        if usage:
            parse_usage(usage)  # a usage the memory would refuse is refused before the reply is stored
        added, wrote = self._add_parsed(scope, session_id, messages, key) if messages else ([], True)
        if usage and wrote:
            self.record_usage(scope, session_id, usage)
        return added

    def page(
        self,
        scope: Scope,
        session_id: str,
        *,
        status: Sequence[MessageStatus],
        cursor: int,
        limit: int,
        prefix: bool = False,
    ) -> tuple[list[tuple[StoredMessage, MessageStatus]], int | None]:
        info = self.resolve(scope, session_id, prefix=prefix)
        state = self.store.load(info.id, user_id=scope.store_user).state
        wanted = set(status)
        out: list[tuple[StoredMessage, MessageStatus]] = []
        rows: Iterator[StoredMessage] = iter(self.store.messages(info.id, user_id=scope.store_user, from_seq=cursor))
        for stored in rows:
            kind = status_of(stored, state)
            if wanted and kind not in wanted:
                continue
            if len(out) == limit:
                return out, stored.seq
            out.append((stored, kind))
        return out, None

    def context(self, scope: Scope, session_id: str, input: Any, fmt: str | None) -> Context:
        return self._run(scope, self.open(scope, session_id), lambda m: m.context(input, format=fmt))

    def clear(self, scope: Scope, session_id: str, *, keep_system: bool) -> None:
        self._run(scope, self.open(scope, session_id), lambda m: m.clear(keep_system=keep_system))

    def rollback(self, scope: Scope, session_id: str) -> list[Message]:
        return self._run(scope, self.open(scope, session_id), lambda m: m.rollback_incomplete())

    def repair(self, scope: Scope, session_id: str) -> list[Message]:
        return self._run(scope, self.open(scope, session_id), lambda m: m.repair())

    def record_usage(self, scope: Scope, session_id: str, usage: Mapping[str, Any]) -> dict[str, Any]:
        memory = self.open(scope, session_id)
        try:
            parsed = self._run(scope, memory, lambda m: m.record_usage(dict(usage)))
        except InvalidMessageError:
            raise
        except (TypeError, ValueError, KeyError, OverflowError) as exc:
            raise InvalidMessageError(f"not a usage object: {_short(exc)}", field="usage") from None
        return dataclasses.asdict(parsed)

    def detail(self, scope: Scope, session_id: str, *, prefix: bool = False) -> tuple[SessionInfo, Memory]:
        info = self.resolve(scope, session_id, prefix=prefix)
        return info, self._open(scope, info)

    def _last_seq(self, scope: Scope, info: SessionInfo) -> int | None:
        loaded = self.store.load(info.id, user_id=scope.store_user)
        seqs = [s.seq for s in (*loaded.pinned, *loaded.window)]
        last = max([*seqs, loaded.state.window_start - 1], default=-1)
        return last if last >= 0 else None


def _short(exc: Exception) -> str:
    """An exception's message without the Python internals (call signatures, limits of ``int``)."""
    text = str(exc)
    if isinstance(exc, OverflowError) or ("int" in text and "digits" in text):
        return "a number is too large"
    if "unexpected keyword argument" in text or "positional argument" in text:
        return "unknown or missing fields"
    return text


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _relabel(line: str, rename: Any) -> str:
    """An export line with its message id renamed (between the store's and the client's namespace)."""
    row = json.loads(line)
    message = row.get("message") if isinstance(row, dict) else None
    if isinstance(message, dict) and isinstance(message.get("id"), str):
        message["id"] = rename(message["id"])
    return _dumps(row)


def _searchable(scope: Scope, info: SessionInfo) -> str:
    return " ".join([scope.client_session(info.id), info.title or "", json.dumps(dict(info.metadata))]).casefold()


def _decode(item: Mapping[str, Any], index: int) -> Message:
    try:
        return decode_message(dict(item))
    except InvalidMessageError as exc:
        raise exc.at(index) from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InvalidMessageError(f"not a convmem message: {exc}", index=index) from None


def _check_info(title: str | None, metadata: Mapping[str, Any] | None) -> None:
    """A session's title and metadata within what every store keeps exactly (a 422 naming the field, not a 503)."""
    if title is not None:
        check_text(title, "title")
    if metadata is not None:
        check_json(dict(metadata), "metadata")
