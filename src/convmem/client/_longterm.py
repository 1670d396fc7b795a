"""The calls of a client beyond its session, and their answers, without I/O: sessions, facts, blocks, recall.

What comes in: the arguments of a ``Client`` method (the user comes from the
client's ``params``). What happens: each becomes a :class:`~convmem.client._core.Call`
on the service's routes (``docs/service.md``, "API map"); an answer's JSON becomes
the library's own objects. What goes out: ``SessionInfo``, ``Fact``, ``BlockRecord``
and ``RecallHit`` (with its ``RecallDoc``), as the library returns them in process.

Which calls may be repeated (:mod:`convmem.client._retry`): reads and the recall
search; a fact's add (a duplicate of an open fact is merged into it) and a
session's delete (a repeat that finds it gone is the first one's work). Block
writes carry the version they expect, so a repeat after a lost answer would be
refused as stale: they are sent once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..longterm.blocks.store import BlockRecord
from ..longterm.facts.model import Fact
from ..longterm.recall.hits import RecallHit
from ..longterm.recall.model import RecallDoc
from ..session import SessionInfo
from ._core import Call

__all__ = [
    "block_call",
    "block_of",
    "delete_call",
    "fact_add_call",
    "fact_invalidate_call",
    "fact_of",
    "fact_update_call",
    "facts_call",
    "hits_of",
    "import_call",
    "recall_call",
    "session_of",
    "sessions_call",
]


# -- sessions ----------------------------------------------------------------------------------
def sessions_call(params: dict[str, Any], limit: int, query: str | None) -> Call:
    """``GET /v1/sessions``: the user's sessions by recency, those whose id, title or metadata hold ``query``."""
    extra: dict[str, Any] = {"limit": limit} | ({"q": query} if query else {})
    return Call("GET", "/v1/sessions", params | extra, retry=True)


def session_of(body: Mapping[str, Any]) -> SessionInfo:
    return SessionInfo(
        body["id"],
        body.get("user_id"),
        body.get("title"),
        body.get("model"),
        dict(body.get("metadata") or {}),
        _time(body["created_at"]),
        _time(body["updated_at"]),
        int(body["message_count"]),
        int(body["tokens"]),
        body.get("parent_id"),
        body.get("fork_seq"),
    )


def delete_call(params: dict[str, Any], session_id: str) -> Call:
    """Delete a session; a repeat that gets 404 means the first attempt deleted it."""
    return Call("DELETE", f"/v1/sessions/{session_id}", params, retry=True, landed=404)


def import_call(params: dict[str, Any], data: bytes | str, session_id: str | None) -> Call:
    text = data.decode() if isinstance(data, bytes) else data
    return Call("POST", "/v1/sessions/import", params, {"jsonl": text, "id": session_id})


# -- facts -------------------------------------------------------------------------------------
def facts_call(params: dict[str, Any], *, valid_at: datetime | None, history: bool) -> Call:
    extra: dict[str, Any] = {"history": history} | ({"valid_at": _iso(valid_at)} if valid_at else {})
    return Call("GET", "/v1/facts", params | extra, retry=True)


def fact_add_call(params: dict[str, Any], text: str, fields: Mapping[str, Any]) -> Call:
    body: dict[str, Any] = {"text": text, **{k: v for k, v in fields.items() if v is not None}}
    if isinstance(body.get("valid_from"), datetime):
        body["valid_from"] = _iso(body["valid_from"])
    body["source_message_ids"] = list(body.get("source_message_ids", ()))
    return Call("POST", "/v1/facts", params, body, retry=True)  # a duplicate of an open fact is merged


def fact_update_call(params: dict[str, Any], fact_id: str, text: str, subject: str | None, reason: str) -> Call:
    body = {"text": text, "subject": subject, "reason": reason}
    return Call("POST", f"/v1/facts/{fact_id}/update", params, body)


def fact_invalidate_call(params: dict[str, Any], fact_id: str, reason: str, replaced_by: str | None) -> Call:
    return Call("POST", f"/v1/facts/{fact_id}/invalidate", params, {"reason": reason, "replaced_by": replaced_by})


def fact_of(body: Mapping[str, Any]) -> Fact:
    return Fact(
        body["id"],
        body.get("user_id"),
        body["text"],
        _time(body["valid_from"]),
        _time(body["created_at"]),
        subject=body.get("subject"),
        valid_to=_time(body["valid_to"]) if body.get("valid_to") else None,
        session_id=body.get("session_id"),
        source_message_ids=tuple(body.get("source_message_ids") or ()),
        confidence=body.get("confidence"),
        invalid_reason=body.get("invalid_reason"),
        replaced_by=body.get("replaced_by"),
        invalidated_by=tuple(body.get("invalidated_by") or ()),
        metadata=dict(body.get("metadata") or {}),
    )


# -- blocks ------------------------------------------------------------------------------------
def block_call(params: dict[str, Any], method: str, name: str | None = None, body: Any = None) -> Call:
    """``GET /v1/blocks`` (no name), ``GET``/``PUT /v1/blocks/{name}``, ``POST .../edit`` (method "EDIT")."""
    if name is None:
        return Call("GET", "/v1/blocks", params, retry=True)
    if method == "EDIT":
        return Call("POST", f"/v1/blocks/{name}/edit", params, body)
    return Call(method, f"/v1/blocks/{name}", params, body, retry=method == "GET")


def block_of(body: Mapping[str, Any], user_id: str | None) -> BlockRecord:
    return BlockRecord(
        user_id,
        body["name"],
        body["value"],
        int(body["version"]),
        int(body["priority"]),
        body["position"],
        body.get("max_tokens"),
        body.get("description"),
    )


# -- recall ------------------------------------------------------------------------------------
def recall_call(params: dict[str, Any], query: str, k: int, mode: str | None, session_id: str | None) -> Call:
    body = {"query": query, "k": k, "mode": mode, "session_id": session_id}
    return Call("POST", "/v1/recall", params, body, retry=True)


def hits_of(body: Mapping[str, Any], user_id: str | None) -> list[RecallHit]:
    """The hits as ``RecallIndex.search`` returns them (the indexed key and context stay in the service)."""
    return [_hit(item, user_id) for item in body["items"]]


def _hit(item: Mapping[str, Any], user_id: str | None) -> RecallHit:
    doc = RecallDoc(
        item["message_id"],
        item["session_id"],
        user_id,
        int(item["seq"]),
        item["role"],
        item["text"],
        _time(item["created_at"]),
        item["text"],
    )
    signals = item.get("signals") or {}
    lexical, dense, fused = (signals.get(name) or {} for name in ("lexical", "dense", "fused"))
    return RecallHit(
        doc,
        float(item["score"]),
        lexical_rank=lexical.get("rank"),
        dense_rank=dense.get("rank"),
        bm25=lexical.get("bm25"),
        lexical=lexical.get("score"),
        dense=dense.get("score"),
        fused=fused.get("score"),
        boosts=tuple(_pairs(item.get("boosts") or {})),
        rank=int(item.get("rank", 0)),
        ranked_by=str(item.get("ranked_by", "")),
    )


def _pairs(boosts: Mapping[str, float]) -> Sequence[tuple[str, float]]:
    return [(name, float(value)) for name, value in boosts.items()]


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _iso(value: datetime) -> str:
    return value.isoformat()
