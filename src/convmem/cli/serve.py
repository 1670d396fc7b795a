"""``convmem serve`` and ``convmem keys``: run the HTTP service, and manage its tenants' API keys.

``serve`` needs the ``server`` extra (FastAPI + uvicorn); ``keys`` does not.
Both find the key registry the same way (``--keys``, ``$CONVMEM_KEYS``, or
``keys.db`` in the user data directory), so a key made by ``keys create``
works at once on a running service.

Usage::

    convmem keys create --tenant acme            # prints the key once; only its hash is stored
    CONVMEM_ADMIN_KEY=... convmem serve --store postgresql://127.0.0.1/test --workers 4
"""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import ConvmemError
from ._help import PlainCommand

__all__ = ["keys_app", "serve"]

keys_app = typer.Typer(
    name="keys", help="Create, list and revoke the service's API keys.", no_args_is_help=True, rich_markup_mode=None
)
KeysOption = Annotated[
    str | None,
    typer.Option(
        "--keys",
        metavar="KEYS",
        help="Key registry: a SQLite path or postgresql://...#schema; default: $CONVMEM_KEYS, else keys.db in "
        "the user data dir.",
    ),
]


def _fail(exc: Exception) -> typer.Exit:
    Console(stderr=True).print(f"[bold red]error:[/bold red] {escape(str(exc))}", soft_wrap=True)
    return typer.Exit(code=2)


def serve(
    store: Annotated[
        str | None,
        typer.Option("--store", metavar="URL", help="sqlite (default), a .db path, postgresql://..., redis://..."),
    ] = None,
    pg_schema: Annotated[
        str | None, typer.Option("--pg-schema", metavar="SCHEMA", help="PostgreSQL schema of the store.")
    ] = None,
    redis_prefix: Annotated[
        str | None, typer.Option("--redis-prefix", metavar="PREFIX", help="Redis key prefix of the store.")
    ] = None,
    keys: KeysOption = None,
    host: Annotated[str, typer.Option("--host", metavar="HOST", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="Port to listen on.")] = 8000,
    workers: Annotated[
        int, typer.Option("--workers", metavar="N", min=1, help="Processes (a server store for more than 1).")
    ] = 1,
    embedder: Annotated[
        str, typer.Option("--embedder", metavar="NAME", help="none (lexical recall) or hashing (hybrid).")
    ] = "none",
    max_body_bytes: Annotated[
        int, typer.Option("--max-body-bytes", metavar="BYTES", min=1024, help="The largest request body.")
    ] = 4 * 1024 * 1024,
    request_timeout: Annotated[
        float, typer.Option("--request-timeout", metavar="SECONDS", min=0.1, help="A longer request gets 503.")
    ] = 30.0,
    ui: Annotated[bool, typer.Option("--ui/--no-ui", help="Serve the inspector at /ui.")] = True,
    metrics: Annotated[
        bool, typer.Option("--metrics/--no-metrics", help="Serve /metrics (Prometheus text format).")
    ] = True,
    otel: Annotated[bool, typer.Option("--otel", help="Send spans and metrics to OpenTelemetry (extra otel).")] = False,
    log_json: Annotated[
        bool, typer.Option("--log-json", help="Log JSON lines with request ids (never content).")
    ] = False,
    log_level: Annotated[
        str,
        typer.Option("--log-level", metavar="LEVEL", help="uvicorn's: critical, error, warning, info, debug, trace."),
    ] = "info",
    access_log: Annotated[
        bool, typer.Option("--access-log/--no-access-log", help="Log each request (never a header).")
    ] = True,
) -> None:
    """Run the HTTP service (FastAPI + uvicorn); every request needs a key made by: convmem keys create."""
    from ..server import require_server_extra
    from ..server.settings import Settings

    try:
        require_server_extra()
        if workers > 1 and (store == "memory"):
            raise ConvmemError("an in-memory store cannot be shared by several workers; use sqlite or a server store")
        if embedder not in ("none", "hashing"):
            raise ConvmemError(f"--embedder must be none or hashing, got {embedder!r}")
        settings = Settings(
            store,
            pg_schema,
            keys,
            embedder,
            max_body_bytes,
            request_timeout,
            ui=ui,
            redis_prefix=redis_prefix,
            metrics=metrics,
            otel=otel,
            log_json=log_json,
        )
        from ..server.app import create_app

        create_app(settings).state.service.close()  # opens (and migrates) the store and registry once, up front
    except ConvmemError as exc:
        raise _fail(exc) from None
    import uvicorn

    os.environ.update(settings.to_env())
    if not os.environ.get("CONVMEM_ADMIN_KEY"):
        Console(stderr=True).print("note: CONVMEM_ADMIN_KEY is not set; the /v1/admin routes refuse every request")
    uvicorn.run(
        "convmem.server:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        access_log=access_log,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=10,
        h11_max_incomplete_event_size=64 * 1024,
    )


@keys_app.command("create", cls=PlainCommand)
def create_key(
    tenant: Annotated[str, typer.Option("--tenant", "-t", metavar="TENANT", help="The tenant (created if new).")],
    label: Annotated[
        str | None, typer.Option("--label", metavar="TEXT", help="A note to recognise the key by.")
    ] = None,
    keys: KeysOption = None,
) -> None:
    """Make a key for TENANT and print it once: only its hash is stored, so keep it now."""
    from ..server.keys import open_registry

    try:
        registry = open_registry(keys)
        key = registry.create_key(tenant, label=label)
        registry.close()
    except (ConvmemError, ValueError) as exc:
        raise _fail(exc) from None
    Console(stderr=True).print(f"key {key.info.key_id} for tenant {tenant!r} (shown once; store it now):")
    typer.echo(key.secret)


@keys_app.command("list", cls=PlainCommand)
def list_keys(
    tenant: Annotated[
        str | None, typer.Option("--tenant", "-t", metavar="TENANT", help="Only this tenant's keys.")
    ] = None,
    keys: KeysOption = None,
) -> None:
    """Key ids, tenants and dates (never a key)."""
    from ..server.keys import open_registry

    try:
        registry = open_registry(keys)
        rows = registry.keys(tenant)
        registry.close()
    except ConvmemError as exc:
        raise _fail(exc) from None
    for info in rows:
        state = f"revoked {info.revoked_at}" if info.revoked_at else "active"
        typer.echo(f"{info.key_id}  {info.tenant}  {info.created_at}  {state}  {info.label or ''}".rstrip())


@keys_app.command("revoke", cls=PlainCommand)
def revoke_key(
    key_id: Annotated[str, typer.Argument(metavar="KEY_ID", help="The key id (the 8 hex digits after cmk_).")],
    keys: KeysOption = None,
) -> None:
    """Revoke a key (other workers stop accepting it within 5 s)."""
    from ..server.keys import open_registry

    try:
        registry = open_registry(keys)
        info = registry.revoke(key_id)
        registry.close()
    except ConvmemError as exc:  # no such key among them
        raise _fail(exc) from None
    typer.echo(f"revoked {info.key_id} ({info.tenant})")
