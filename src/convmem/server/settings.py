"""What a service is started with: one frozen object, read from ``convmem serve``'s options or the environment.

``--workers N`` starts N processes that each build the app from the
environment (``CONVMEM_SERVE_*``), so every setting has an environment name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

__all__ = ["Settings"]

_PREFIX = "CONVMEM_SERVE_"


@dataclass(frozen=True)
class Settings:
    """Service settings.

    Attributes:
        store: a store spec (``sqlite``, a path, ``postgresql://...``, ``redis://...``, ``files:///dir``,
            ``memory``); None is the embedded SQLite default.
        pg_schema: the PostgreSQL schema of the store.
        redis_prefix: the Redis key prefix of the store.
        keys: where tenants and key hashes live (a SQLite path or ``postgresql://...#schema``).
        embedder: ``none`` (lexical recall) or ``hashing`` (offline dense vectors, for hybrid recall).
        max_body_bytes: larger request bodies get 413.
        request_timeout: seconds a request may take before it gets 503 (the work may still finish).
        max_replay: the longest session the inspector replays.
        ui: serve the inspector at ``/ui``.
        keep_sessions: how many open memories a worker keeps between requests (0: open every request).
        keep_tokens: the window tokens those kept memories may hold in all.
        metrics: serve ``/metrics`` (Prometheus text format): the memories' and the requests' metrics.
        otel: also send the memories' spans and metrics to OpenTelemetry's global providers (configured by
            the operator, e.g. ``opentelemetry-instrument``; needs ``pip install 'convmem[otel]'``).
        log_json: write the ``convmem`` loggers' lines as JSON objects with the request id (stderr).
    """

    store: str | None = None
    pg_schema: str | None = None
    keys: str | None = None
    embedder: str = "none"
    max_body_bytes: int = 4 * 1024 * 1024
    request_timeout: float = 30.0
    max_replay: int = 20_000
    ui: bool = True
    redis_prefix: str | None = None
    keep_sessions: int = 256
    keep_tokens: int = 4_000_000
    metrics: bool = True
    otel: bool = False
    log_json: bool = False

    def to_env(self) -> dict[str, str]:
        """The environment that makes :meth:`from_env` return these settings (for worker processes)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[_PREFIX + f.name.upper()] = str(int(value) if isinstance(value, bool) else value)
        return out

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for f in fields(cls):
            raw = env.get(_PREFIX + f.name.upper())
            if raw is None:
                continue
            kind = f.type if isinstance(f.type, str) else f.type.__name__
            if kind.startswith("int"):
                values[f.name] = int(raw)
            elif kind.startswith("float"):
                values[f.name] = float(raw)
            elif kind.startswith("bool"):
                values[f.name] = raw not in ("0", "false", "")
            else:
                values[f.name] = raw
        return cls(**values)  # type: ignore[arg-type]
