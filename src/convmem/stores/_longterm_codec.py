"""JSON forms of facts, working blocks and recall documents, shared by the SQLite and file stores."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ..errors import StoreError
from ..longterm.blocks.store import BlockRecord
from ..longterm.facts.model import Fact
from ..longterm.recall.model import RecallDoc
from .codec import READ_ERRORS, decode_datetime, dumps, encode_datetime

__all__ = ["block_from_json", "block_to_json", "doc_from_json", "doc_to_json", "fact_from_json", "fact_to_json", "key"]


def key(value: str | None) -> str:
    """The indexable key of a user id or scope: JSON, so None and "" stay distinct."""
    return json.dumps(value)


def fact_to_json(fact: Fact) -> str:
    return dumps(
        {
            "id": fact.id,
            "user_id": fact.user_id,
            "text": fact.text,
            "valid_from": encode_datetime(fact.valid_from),
            "created_at": encode_datetime(fact.created_at),
            "subject": fact.subject,
            "valid_to": encode_datetime(fact.valid_to) if fact.valid_to is not None else None,
            "session_id": fact.session_id,
            "source_message_ids": list(fact.source_message_ids),
            "confidence": fact.confidence,
            "invalid_reason": fact.invalid_reason,
            "replaced_by": fact.replaced_by,
            "invalidated_by": list(fact.invalidated_by),
            "metadata": dict(fact.metadata),
        }
    )


def _fact(text: str | bytes) -> Fact:
    data: dict[str, Any] = json.loads(text)
    return Fact(
        id=data["id"],
        user_id=data["user_id"],
        text=data["text"],
        valid_from=decode_datetime(data["valid_from"]),
        created_at=decode_datetime(data["created_at"]),
        subject=data["subject"],
        valid_to=decode_datetime(data["valid_to"]) if data["valid_to"] is not None else None,
        session_id=data["session_id"],
        source_message_ids=tuple(data["source_message_ids"]),
        confidence=data["confidence"],
        invalid_reason=data["invalid_reason"],
        replaced_by=data["replaced_by"],
        invalidated_by=tuple(data["invalidated_by"]),
        metadata=data["metadata"],
    )


def block_to_json(record: BlockRecord) -> str:
    return dumps(
        {
            "scope": record.scope,
            "name": record.name,
            "value": record.value,
            "version": record.version,
            "priority": record.priority,
            "position": record.position,
            "max_tokens": record.max_tokens,
            "description": record.description,
        }
    )


def _block(text: str | bytes) -> BlockRecord:
    data: dict[str, Any] = json.loads(text)
    return BlockRecord(
        data["scope"],
        data["name"],
        data["value"],
        data["version"],
        data["priority"],
        data["position"],
        data["max_tokens"],
        data["description"],
    )


def doc_to_json(doc: RecallDoc) -> str:
    return dumps(
        {
            "message_id": doc.message_id,
            "session_id": doc.session_id,
            "user_id": doc.user_id,
            "seq": doc.seq,
            "role": doc.role,
            "text": doc.text,
            "created_at": encode_datetime(doc.created_at),
            "key": doc.key,
            "context": doc.context,
        }
    )


def _doc(text: str | bytes) -> RecallDoc:
    data: dict[str, Any] = json.loads(text)
    return RecallDoc(
        data["message_id"],
        data["session_id"],
        data["user_id"],
        data["seq"],
        data["role"],
        data["text"],
        decode_datetime(data["created_at"]),
        data["key"],
        data["context"],
    )


# A long-term row that does not decode is a StoreError, as a message row is (codec.read_row): never the
# ValueError or KeyError of the field that broke.
def fact_from_json(text: str | bytes) -> Fact:
    try:
        return _fact(text)
    except READ_ERRORS as exc:
        raise _corrupt("fact", exc) from None


def block_from_json(text: str | bytes) -> BlockRecord:
    try:
        return _block(text)
    except READ_ERRORS as exc:
        raise _corrupt("block", exc) from None


def doc_from_json(text: str | bytes) -> RecallDoc:
    try:
        return _doc(text)
    except READ_ERRORS as exc:
        raise _corrupt("recall document", exc) from None


def created_at(value: Any) -> datetime:
    """A recall document's time as a server store reads it from its column."""
    try:
        return decode_datetime(value)
    except READ_ERRORS as exc:
        raise _corrupt("recall document", exc) from None


def _corrupt(what: str, exc: BaseException) -> StoreError:
    reason = f"{type(exc).__name__}: {exc}"
    return StoreError(f"a stored {what} does not decode ({reason[:200]})")
