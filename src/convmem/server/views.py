"""Library objects as JSON bodies, with store-side ids turned back into the client's."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..longterm.blocks.store import BlockRecord
from ..longterm.facts.model import Fact
from ..longterm.recall.index import RecallHit
from ..memory import Memory
from ..messages import Message
from ..policy.context import Context
from ..session import SessionInfo
from ..stores.codec import encode_datetime, encode_message
from ..tokens import counter_for
from .replay import SummaryStep
from .tenancy import Scope

__all__ = [
    "added_view",
    "block_view",
    "context_view",
    "detail_view",
    "fact_view",
    "hit_view",
    "message_view",
    "session_view",
    "summary_view",
]


def session_view(scope: Scope, info: SessionInfo) -> dict[str, Any]:
    return {
        "id": scope.client_session(info.id),
        "user_id": scope.user_id,
        "title": info.title,
        "model": info.model,
        "metadata": dict(info.metadata),
        "created_at": info.created_at,
        "updated_at": info.updated_at,
        "message_count": info.message_count,
        "tokens": info.tokens,
        "parent_id": scope.client_session(info.parent_id) if info.parent_id else None,
        "fork_seq": info.fork_seq,
    }


def detail_view(scope: Scope, info: SessionInfo, memory: Memory, state_config: dict[str, Any]) -> dict[str, Any]:
    stats = dataclasses.asdict(memory.stats())
    stats["warnings"] = [scope.scrub(w) for w in stats["warnings"]]
    return {
        **session_view(scope, info),
        "budget": memory.budget,
        "reserved_output": memory.reserved_output,
        "options": state_config,
        "stats": stats,
        "pending_tool_calls": memory.pending_tool_calls,
    }


def added_view(scope: Scope, session_id: str, messages: list[Message]) -> dict[str, Any]:
    """A ``MessagesAdded`` body: the messages and the session and user they are in."""
    return {"session_id": session_id, "user_id": scope.user_id, "messages": [message_view(scope, m) for m in messages]}


def message_view(scope: Scope, message: Message) -> dict[str, Any]:
    encoded = encode_message(message)
    if "id" in encoded:
        encoded["id"] = scope.client_message(encoded["id"])
    return encoded


def context_view(ctx: Context) -> dict[str, Any]:
    account = ctx.account
    return {
        "format": ctx.format,
        "request": ctx.request(),
        "messages": ctx.messages,
        "system": ctx.system,
        "account": {**account._asdict(), "blocks": dict(account.blocks), "total": account.total, "free": account.free},
        "left_out": [item._asdict() for item in ctx.left_out],
        "truncated": [item._asdict() for item in ctx.truncated],
        "window": list(ctx.window) if ctx.window is not None else None,
        "warnings": list(ctx.warnings),
    }


def summary_view(step: SummaryStep) -> dict[str, Any]:
    return dataclasses.asdict(step)


def fact_view(scope: Scope, fact: Fact) -> dict[str, Any]:
    return {
        "id": fact.id,
        "user_id": scope.user_id,
        "text": fact.text,
        "subject": fact.subject,
        "valid_from": fact.valid_from,
        "valid_to": fact.valid_to,
        "created_at": fact.created_at,
        "session_id": scope.client_session(fact.session_id) if fact.session_id else None,
        "source_message_ids": list(fact.source_message_ids),
        "confidence": fact.confidence,
        "invalid_reason": fact.invalid_reason,
        "replaced_by": fact.replaced_by,
        "invalidated_by": list(fact.invalidated_by),
        "metadata": dict(fact.metadata),
    }


def block_view(scope: Scope, record: BlockRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "user_id": scope.user_id,
        "value": record.value,
        "version": record.version,
        "priority": record.priority,
        "position": record.position,
        "max_tokens": record.max_tokens,
        "description": record.description,
        "tokens": counter_for("gpt-4o").count_text(record.value),
    }


def hit_view(scope: Scope, hit: RecallHit) -> dict[str, Any]:
    doc = hit.doc
    signals: dict[str, dict[str, Any]] = {
        "lexical": {"rank": hit.lexical_rank, "score": hit.lexical, "bm25": hit.bm25},
        "dense": {"rank": hit.dense_rank, "score": hit.dense},
        "fused": {"rank": hit.rank if hit.fused is not None else None, "score": hit.fused},
    }
    return {
        "session_id": scope.client_session(doc.session_id),
        "seq": doc.seq,
        "message_id": scope.client_message(doc.message_id),
        "role": doc.role,
        "text": doc.text,
        "created_at": encode_datetime(doc.created_at),
        "score": float(hit.score),
        "signals": signals,
        "boosts": dict(hit.boosts),
        "rank": hit.rank,
        "ranked_by": hit.ranked_by,
        "reason": hit.reason,
    }
