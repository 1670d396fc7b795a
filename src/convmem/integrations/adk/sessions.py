"""``ConvmemSessionService``: ADK's sessions, events and state in a convmem store (see the package docstring)."""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError as AdkSessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig, ListSessionsResponse
from google.adk.sessions.session import Session
from google.adk.sessions.state import State

from ...errors import ConfigurationError, SessionNotFoundError
from ...memory import Memory
from ...memory.options import initial_state
from ...session import SessionInfo
from ...stores import open_store
from ...stores._export import export_header
from ...stores.base import SessionStore
from ._events import KEY, dumped, event_messages, session_key

__all__ = ["ConvmemSessionService"]

_CACHED = 64  # open memories kept per service (an ADK server serves many sessions; each opens once)


def _registry(app_name: str, scope: str) -> str:
    session_key(app_name, "")  # the same check of the app name
    return f"adk#{app_name}#{scope}"  # outside every ADK session's key (they start "adk:"), so never listed


class ConvmemSessionService(BaseSessionService):
    """An ADK ``BaseSessionService`` over a convmem store.

    Args:
        store: a convmem store (the caller's: it stays open) or its URL (``"sqlite:///adk.db"``,
            ``"postgresql://..."``, ``"redis://..."``; the service opens it and :meth:`close` closes it).
        **options: the ``Memory`` options of every new session (``model``, ``max_tokens``,
            ``max_output_tokens``, ``strategy``, ``recall``...); a reopened session keeps the
            options it was created with.
    """

    def __init__(self, store: SessionStore | str = "memory", **options: Any) -> None:
        self._owns_store = isinstance(store, str)
        self.store: SessionStore = open_store(store) if isinstance(store, str) else store
        if not isinstance(self.store, SessionStore):
            raise ConfigurationError(f"ConvmemSessionService needs a store that manages sessions, got {self.store!r}")
        self.options = dict(options)
        self._memories: OrderedDict[tuple[str, str], Memory] = OrderedDict()

    def close(self) -> None:
        """Close the open memories, and the store if the service opened it."""
        for memory in self._memories.values():
            memory.close()
        self._memories.clear()
        if self._owns_store:
            self.store.close()

    # -- sessions ----------------------------------------------------------------------------
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        session_id = (session_id or "").strip() or uuid.uuid4().hex
        key = session_key(app_name, session_id)
        if self._info(key, user_id) is not None:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.")
        scoped = _split(state or {})
        self._write_scope(app_name, None, "app", scoped["app"])
        self._write_scope(app_name, user_id, "user", scoped["user"])
        info = self._create(key, user_id, {KEY: {"state": scoped["session"]}}, self.options)
        return self._session(app_name, user_id, session_id, info, [])

    async def get_session(
        self, *, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None
    ) -> Session | None:
        key = session_key(app_name, session_id)
        info = self._info(key, user_id)
        if info is None:
            return None
        events = _filtered(self._events(key, user_id, info), config)
        return self._session(app_name, user_id, session_id, info, events)

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        if user_id is None:
            raise ConfigurationError(
                "ConvmemSessionService.list_sessions needs a user_id: convmem scopes sessions by user"
            )
        prefix = session_key(app_name, "")
        app_state, user_state = self._scope(app_name, None, "app"), self._scope(app_name, user_id, "user")
        found = [
            Session(
                id=info.id[len(prefix) :],
                app_name=app_name,
                user_id=user_id,
                state=_merged(_own_state(info), app_state, user_state),
                last_update_time=info.updated_at.timestamp(),
            )
            for info in self.store.list_sessions(user_id=user_id)
            if info.id.startswith(prefix)
        ]
        found.sort(key=lambda s: (s.last_update_time, s.id))  # ADK's order: oldest first
        return ListSessionsResponse(sessions=found)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        key = session_key(app_name, session_id)
        memory = self._memories.pop((user_id, key), None)
        if memory is not None:
            memory.close()
        if self._info(key, user_id) is not None:
            self.store.delete_session(key, user_id=user_id)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return self._scope(app_name, user_id, "user")

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        key = session_key(session.app_name, session.id)
        info = self._info(key, session.user_id)
        if info is None:
            raise AdkSessionNotFoundError(f"Session {session.id} not found.")
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        messages = event_messages(event)
        if messages:
            self.memory(session).add_many(messages)  # the event's id is the first message's: a retry stores nothing
        scoped = _split(event.actions.state_delta if event.actions else {})
        self._write_scope(session.app_name, None, "app", scoped["app"])
        self._write_scope(session.app_name, session.user_id, "user", scoped["user"])
        own = dict(info.metadata.get(KEY) or {})
        side = list(own.get("events") or ())
        changed = bool(scoped["session"])
        if not messages and all(e.get("id") != event.id for e in side):
            side.append(dumped(event))
            changed = True
        if changed:
            own["state"] = {**(own.get("state") or {}), **scoped["session"]}
            own["events"] = side
            self.store.update_session(key, user_id=session.user_id, metadata={**info.metadata, KEY: own})
        self._commit_event_to_session(session, event)
        session.last_update_time = event.timestamp
        return event

    # -- the memory of a session -------------------------------------------------------------
    def memory(self, session: Session) -> Memory:
        """The convmem memory of an ADK session (opened once per service, then kept among the recent ones)."""
        key = session_key(session.app_name, session.id)
        memory = self._memories.get((session.user_id, key))
        if memory is None:
            if self._info(key, session.user_id) is None:
                raise AdkSessionNotFoundError(f"Session {session.id} not found.")
            memory = Memory.open(key, store=self.store, user_id=session.user_id)
            self._memories[(session.user_id, key)] = memory
            while len(self._memories) > _CACHED:
                self._memories.popitem(last=False)[1].close()
        else:
            self._memories.move_to_end((session.user_id, key))
        return memory

    # -- the store ---------------------------------------------------------------------------
    def _info(self, key: str, user_id: str | None) -> SessionInfo | None:
        try:
            info = self.store.get_session(key, user_id=user_id)
        except SessionNotFoundError:
            return None
        return info if info.id == key else None  # the store also accepts a prefix: only the exact id is this one

    def _create(
        self, key: str, user_id: str | None, metadata: Mapping[str, Any], options: Mapping[str, Any]
    ) -> SessionInfo:
        """An empty session with its options saved (the store creates one by its first message otherwise)."""
        memory = Memory(store=self.store, session_id=key, user_id=user_id, **options)  # validates the options
        try:
            now = datetime.now(timezone.utc)
            info = SessionInfo(key, user_id, None, memory.model, dict(metadata), now, now, 0, 0)
            return self.store.import_jsonl(export_header(info, initial_state(memory.options), 0), user_id=user_id)
        finally:
            memory.close()

    def _events(self, key: str, user_id: str, info: SessionInfo) -> list[Event]:
        # Each event is a JSON string (see _events.event_messages); one stored as an object is read too.
        events = [
            Event.model_validate_json(meta["event"])
            if isinstance(meta["event"], str)
            else Event.model_validate(meta["event"])
            for stored in self.store.messages(key, user_id=user_id)
            if isinstance(meta := stored.message.metadata.get(KEY), Mapping) and "event" in meta
        ]
        side = [Event.model_validate(e) for e in (info.metadata.get(KEY) or {}).get("events") or ()]
        if side:
            events = sorted(events + side, key=lambda e: e.timestamp)  # stable: a tie keeps the stored order
        return events

    def _scope(self, app_name: str, user_id: str | None, scope: str) -> dict[str, Any]:
        info = self._info(_registry(app_name, scope), user_id)
        return dict((info.metadata.get(KEY) or {}).get("state") or {}) if info is not None else {}

    def _write_scope(self, app_name: str, user_id: str | None, scope: str, delta: Mapping[str, Any]) -> None:
        if not delta:
            return
        key = _registry(app_name, scope)
        info = self._info(key, user_id)
        if info is None:
            self._create(key, user_id, {KEY: {"state": dict(delta)}}, {"max_tokens": 1_000, "counter": "approximate"})
            return
        state = {**((info.metadata.get(KEY) or {}).get("state") or {}), **delta}
        self.store.update_session(key, user_id=user_id, metadata={**info.metadata, KEY: {"state": state}})

    def _session(self, app_name: str, user_id: str, session_id: str, info: SessionInfo, events: list[Event]) -> Session:
        state = _merged(_own_state(info), self._scope(app_name, None, "app"), self._scope(app_name, user_id, "user"))
        return Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=state,
            events=events,
            last_update_time=max([info.updated_at.timestamp(), *(e.timestamp for e in events[-1:])]),
        )


def _split(delta: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {"app": {}, "user": {}, "session": {}}
    for key, value in delta.items():
        if key.startswith(State.APP_PREFIX):
            out["app"][key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            out["user"][key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            out["session"][key] = value
    return out


def _own_state(info: SessionInfo) -> dict[str, Any]:
    return dict((info.metadata.get(KEY) or {}).get("state") or {})


def _merged(own: Mapping[str, Any], app: Mapping[str, Any], user: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **own,
        **{State.APP_PREFIX + k: v for k, v in app.items()},
        **{State.USER_PREFIX + k: v for k, v in user.items()},
    }


def _filtered(events: list[Event], config: GetSessionConfig | None) -> list[Event]:
    if config is None:
        return events
    if config.after_timestamp is not None:
        events = [e for e in events if e.timestamp >= config.after_timestamp]
    if config.num_recent_events is not None:
        events = events[-config.num_recent_events :] if config.num_recent_events else []
    return events
