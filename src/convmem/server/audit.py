"""The audit trail of erasures: who erased what scope, when, and how much, never what was erased.

Each ``POST /v1/forget`` appends one row to the key registry's database (the service's own, SQLite or
PostgreSQL, beside the tenants and keys): the time, the tenant, the id of the API key that asked (never
the key), the action, the counts per kind, and the *subject*: the SHA-256 of (tenant, user, session).
The subject lets an operator prove that a named user was erased (hash the name and look it up) without
the trail keeping the name; it is not secret from someone who can guess names. ``GET /v1/erasures``
gives a tenant its own rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from .keys import KeyRegistry

__all__ = ["record", "subject", "trail"]

_TABLE = (
    "CREATE TABLE IF NOT EXISTS erasures (at TEXT NOT NULL, tenant TEXT NOT NULL, key_id TEXT, "
    "action TEXT NOT NULL, subject TEXT NOT NULL, counts TEXT NOT NULL)"
)


def subject(tenant: str, user_id: str | None, session_id: str | None) -> str:
    """The hash an erasure is recorded under (see the module docstring)."""
    return hashlib.sha256(json.dumps([tenant, user_id, session_id]).encode()).hexdigest()


def record(
    registry: KeyRegistry,
    *,
    tenant: str,
    key_id: str | None,
    action: str,
    user_id: str | None,
    session_id: str | None,
    counts: Mapping[str, int],
) -> None:
    """Append one erasure to the trail."""
    with registry._tx() as run:
        run(_TABLE)
        run(
            "INSERT INTO erasures (at, tenant, key_id, action, subject, counts) VALUES (?, ?, ?, ?, ?, ?)",
            (
                datetime.now(timezone.utc).isoformat(timespec="microseconds"),
                tenant,
                key_id,
                action,
                subject(tenant, user_id, session_id),
                json.dumps(dict(counts)),
            ),
        )


def trail(registry: KeyRegistry, tenant: str, *, limit: int = 100) -> list[dict[str, Any]]:
    """The tenant's erasures, newest first."""
    with registry._tx() as run:
        run(_TABLE)
        rows = run(
            "SELECT at, key_id, action, subject, counts FROM erasures WHERE tenant = ? ORDER BY at DESC LIMIT ?",
            (tenant, limit),
        )
    return [
        {"at": at, "key_id": key_id, "action": action, "subject": subj, "counts": json.loads(counts)}
        for at, key_id, action, subj, counts in rows
    ]
