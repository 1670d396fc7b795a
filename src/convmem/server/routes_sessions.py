"""``/v1/sessions``: sessions, their messages, contexts, and the inspector's turn replays."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from fastapi import Path as Path_

from ..memory.options import stored_config
from ..session import MessageStatus
from .deps import IdempotencyKey, PrefixQuery, SessionPath, UserScope, service_of
from .problems import responses
from .schemas import (
    ClearIn,
    ContextIn,
    ContextOut,
    ForkIn,
    ImportIn,
    MessagePage,
    MessagesAdded,
    MessagesIn,
    ResponseIn,
    SessionCreate,
    SessionDetail,
    SessionList,
    SessionOut,
    SessionUpdate,
    SummaryOut,
    TurnOut,
    UsageIn,
)
from .views import added_view, context_view, detail_view, message_view, session_view, summary_view

__all__ = ["router"]

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])
Svc = Annotated[Any, Depends(service_of)]
FormatQuery = Annotated[str | None, Query(pattern="^(openai|anthropic|responses)$")]


@router.get("", response_model=SessionList, responses=responses(), operation_id="listSessions")
def list_sessions(
    scope: UserScope,
    service: Svc,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    q: Annotated[str | None, Query(max_length=200, description="Search ids, titles and metadata.")] = None,
) -> dict[str, Any]:
    """The user's sessions, most recently updated first."""
    return {"items": [session_view(scope, s) for s in service.sessions.list_sessions(scope, limit=limit, query=q)]}


@router.post("", status_code=201, response_model=SessionOut, responses=responses(409), operation_id="createSession")
def create_session(body: SessionCreate, scope: UserScope, service: Svc) -> dict[str, Any]:
    """Create a session; its options are saved with it and decide every context it builds."""
    fields = body.model_dump(exclude_none=True, exclude={"title", "metadata"})
    info = service.sessions.create(scope, fields, title=body.title, metadata=body.metadata)
    return session_view(scope, info)


@router.post(
    "/import", status_code=201, response_model=SessionOut, responses=responses(409), operation_id="importSession"
)
def import_session(body: ImportIn, scope: UserScope, service: Svc) -> dict[str, Any]:
    """Import an export (all or nothing)."""
    return session_view(scope, service.sessions.import_(scope, body.jsonl, body.id))


@router.get("/{session_id}", response_model=SessionDetail, responses=responses(404, 409), operation_id="getSession")
def get_session(session_id: SessionPath, scope: UserScope, service: Svc, prefix: PrefixQuery = False) -> dict[str, Any]:
    """A session, the options it opens with, and its running figures."""
    info, memory = service.sessions.detail(scope, session_id, prefix=prefix)
    state = service.backend.store.load(info.id, user_id=scope.store_user).state
    return detail_view(scope, info, memory, stored_config(state))


@router.patch("/{session_id}", response_model=SessionOut, responses=responses(404, 409), operation_id="updateSession")
def update_session(session_id: SessionPath, body: SessionUpdate, scope: UserScope, service: Svc) -> dict[str, Any]:
    """Set the title and/or replace the metadata."""
    return session_view(scope, service.sessions.update(scope, session_id, title=body.title, metadata=body.metadata))


@router.delete("/{session_id}", status_code=204, responses=responses(404, 409), operation_id="deleteSession")
def delete_session(session_id: SessionPath, scope: UserScope, service: Svc) -> Response:
    """Delete a session and its messages (history its forks share stays, hidden)."""
    service.sessions.delete(scope, session_id)
    return Response(status_code=204)


@router.post(
    "/{session_id}/fork",
    status_code=201,
    response_model=SessionOut,
    responses=responses(404, 409),
    operation_id="forkSession",
)
def fork_session(session_id: SessionPath, body: ForkIn, scope: UserScope, service: Svc) -> dict[str, Any]:
    """A new session sharing this one's history up to ``at_seq``."""
    return session_view(scope, service.sessions.fork(scope, session_id, body.at_seq))


@router.get(
    "/{session_id}/export",
    responses={200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}}}, **responses(404, 409)},
    response_class=Response,
    operation_id="exportSession",
)
def export_session(session_id: SessionPath, scope: UserScope, service: Svc, prefix: PrefixQuery = False) -> Response:
    """The session as versioned JSONL (import it with ``POST /v1/sessions/import``)."""
    return Response(service.sessions.export(scope, session_id, prefix=prefix), media_type="application/x-ndjson")


@router.post(
    "/{session_id}/messages",
    status_code=201,
    response_model=MessagesAdded,
    responses=responses(404, 409),
    operation_id="addMessages",
)
def add_messages(
    session_id: SessionPath, body: MessagesIn, scope: UserScope, service: Svc, key: IdempotencyKey = None
) -> dict[str, Any]:
    """Add messages in one write (``Memory.add_many``): all are stored, or none.

    A message's ``id`` (in any format) is its idempotency key: sending it again stores nothing.
    """
    added = service.sessions.add(scope, session_id, body.messages, codec=body.format == "convmem", key=key)
    return added_view(scope, session_id, added)


@router.get(
    "/{session_id}/messages", response_model=MessagePage, responses=responses(404, 409), operation_id="listMessages"
)
def list_messages(
    session_id: SessionPath,
    scope: UserScope,
    service: Svc,
    status: Annotated[list[MessageStatus] | None, Query(description="Only these statuses.")] = None,
    cursor: Annotated[int, Query(ge=0, le=2**53)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    prefix: PrefixQuery = False,
) -> dict[str, Any]:
    """Stored messages oldest first, with their status, ``limit`` at a time."""
    rows, next_cursor = service.sessions.page(
        scope, session_id, status=status or [], cursor=cursor, limit=limit, prefix=prefix
    )
    items = [
        {"seq": s.seq, "tokens": s.tokens, "status": kind, "message": message_view(scope, s.message)}
        for s, kind in rows
    ]
    return {"items": items, "next_cursor": next_cursor}


@router.post(
    "/{session_id}/responses",
    status_code=201,
    response_model=MessagesAdded,
    responses=responses(404, 409),
    operation_id="addResponse",
)
def add_response(
    session_id: SessionPath, body: ResponseIn, scope: UserScope, service: Svc, key: IdempotencyKey = None
) -> dict[str, Any]:
    """Add a provider response's output (and record its usage, once: a repeat under the same key adds neither)."""
    added = service.sessions.add_response(scope, session_id, body.response, body.format, key=key)
    return added_view(scope, session_id, added)


@router.post("/{session_id}/usage", responses=responses(404, 409), operation_id="recordUsage")
def record_usage(session_id: SessionPath, body: UsageIn, scope: UserScope, service: Svc) -> dict[str, Any]:
    """Add a provider's usage to the session's stats and cost."""
    return service.sessions.record_usage(scope, session_id, body.usage)  # type: ignore[no-any-return]


@router.post(
    "/{session_id}/context", response_model=ContextOut, responses=responses(404, 409), operation_id="getContext"
)
def context(session_id: SessionPath, body: ContextIn, scope: UserScope, service: Svc) -> dict[str, Any]:
    """The request for the next turn within the budget, its token account, and what was left out and why."""
    return context_view(service.sessions.context(scope, session_id, body.input, body.format))


@router.post("/{session_id}/clear", status_code=204, responses=responses(404, 409), operation_id="clearSession")
def clear(session_id: SessionPath, body: ClearIn, scope: UserScope, service: Svc) -> Response:
    """Archive the whole window (nothing is deleted)."""
    service.sessions.clear(scope, session_id, keep_system=body.keep_system)
    return Response(status_code=204)


@router.post(
    "/{session_id}/rollback",
    response_model=MessagesAdded,
    responses=responses(404, 409),
    operation_id="rollbackIncomplete",
)
def rollback(session_id: SessionPath, scope: UserScope, service: Svc) -> dict[str, Any]:
    """Delete a trailing tool call that lacks results; returns what was removed."""
    return added_view(scope, session_id, service.sessions.rollback(scope, session_id))


@router.post(
    "/{session_id}/repair",
    status_code=201,
    response_model=MessagesAdded,
    responses=responses(404, 409),
    operation_id="repairSession",
)
def repair(session_id: SessionPath, scope: UserScope, service: Svc) -> dict[str, Any]:
    """Answer unanswered trailing tool calls with marked synthetic results; returns the added messages."""
    return added_view(scope, session_id, service.sessions.repair(scope, session_id))


@router.get("/{session_id}/turns/{seq}", response_model=TurnOut, responses=responses(404, 409), operation_id="getTurn")
def turn(
    session_id: SessionPath,
    seq: Annotated[int, Path_(ge=0, le=2**53)],
    scope: UserScope,
    service: Svc,
    format: FormatQuery = None,
) -> dict[str, Any]:
    """The context as it was right after message ``seq`` was added, rebuilt by replay (see ``exact``/``notes``).

    Kept per worker once built; a seq past the session's end is refused before anything is replayed."""
    info = service.sessions.resolve(scope, session_id)
    # A turn past the end (422) or a replay still on its way (503) is a ServiceError: answered as its problem.
    result = service.sessions.replays.turn(info, scope.store_user, seq, format, limit=service.settings.max_replay)
    assert result.context is not None
    return {
        "seq": result.seq,
        "last_seq": result.last_seq,
        "context": context_view(result.context),
        "summary": summary_view(result.summary) if result.summary is not None else None,
        "exact": result.exact,
        "notes": result.notes,
    }


@router.get(
    "/{session_id}/summaries",
    response_model=list[SummaryOut],
    responses=responses(404, 409),
    operation_id="listSummaries",
)
def summaries(session_id: SessionPath, scope: UserScope, service: Svc) -> list[dict[str, Any]]:
    """Every running summary the session had, oldest first (rebuilt by replay, kept per worker)."""
    info = service.sessions.resolve(scope, session_id)
    steps = service.sessions.replays.summaries(info, scope.store_user, limit=service.settings.max_replay)
    return [summary_view(s) for s in steps]
