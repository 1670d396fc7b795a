"""``convmem sessions``: list, show, export, import, delete and fork stored sessions.

Every command works on one store: the SQLite database at the default path
(``$CONVMEM_DB`` or the user data directory) unless ``--db`` names another
database file or a store spec (``files:///dir``, ``sqlite:///path.db``).
Sessions are named by id or by a unique prefix of it; ``--user`` selects the
user namespace. Only ``import`` creates a database: the other commands refuse a
``--db`` path that does not exist, so a typo never leaves an empty database
behind. A failure prints ``error: ...`` and exits with code 2.

Usage::

    convmem sessions list --limit 10
    convmem sessions show 3f2a --last 20
    convmem sessions export 3f2a -o chat.jsonl
    convmem sessions import chat.jsonl --db other.db
    convmem sessions fork 3f2a --at 41
    convmem sessions delete 3f2a --yes
"""

from __future__ import annotations

import json
import sys
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import ConvmemError, MissingDatabaseError, SessionNotFoundError, StoreError
from ..memory import Memory
from ..messages import StoredMessage
from ..stores import SessionStore, SQLiteStore, open_store
from ..stores.sqlite._db import default_path
from ._help import PlainCommand
from ._hints import local_path, store_flags
from ._sessions_view import info_panel, message_table, sessions_table

__all__ = ["sessions_app"]

sessions_app = typer.Typer(
    name="sessions",
    help="List, show, export, import, delete and fork stored sessions.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="DB",
        help="SQLite file or store URL (sqlite:///f.db, files:///dir, postgresql://..., redis://...); "
        "default: $CONVMEM_DB or the user data dir.",
    ),
]
UserOption = Annotated[str | None, typer.Option("--user", "-u", metavar="USER", help="User namespace of the sessions.")]
SessionArg = Annotated[str, typer.Argument(metavar="SESSION", help="Session id or a unique prefix of it.")]


@contextmanager
def _store(db: str | None, user: str | None = None, *, creates: bool = False) -> Iterator[SessionStore]:
    """Open the store, turn convmem errors into ``error: ...`` and exit code 2, and close it.

    Unless the command ``creates`` one, a database path that does not exist is an error.
    """
    err = Console(stderr=True)
    store: SessionStore | None = None
    try:
        path = local_path(db, default_path())
        if not creates and path is not None and not path.exists():
            default = db in (None, "sqlite")
            raise MissingDatabaseError(
                f"the default database {path} does not exist yet" if default else f"no database at {path}"
            )
        plain = db is not None and "://" not in db and db not in ("memory", "sqlite")
        store = SQLiteStore(str(path or db)) if plain else open_store(db)  # a path as typed: ~ expanded
        store = _with_key(store)
        yield store
    except SessionNotFoundError as exc:
        hint = "" if user is not None else "; a session saved with a user id needs -u USER"
        err.print(
            f"[bold red]error:[/bold red] {escape(str(exc))}{hint}; "
            f"`convmem sessions list{escape(store_flags(db, user))}` lists them",
            soft_wrap=True,
        )
        raise typer.Exit(code=2) from None
    except ConvmemError as exc:
        err.print(f"[bold red]error:[/bold red] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(code=2) from None
    finally:
        if store is not None:
            store.close()


def _with_key(store: SessionStore) -> SessionStore:
    """The store encrypted at rest when ``$CONVMEM_KEY_FILE`` names a key file (the extra ``crypto``)."""
    from ..stores.encrypted import EncryptedStore, KeyRing

    ring = KeyRing.from_env()
    return store if ring is None else EncryptedStore(store, ring)


@sessions_app.command("list", cls=PlainCommand)
def list_sessions(
    db: DbOption = None,
    user: UserOption = None,
    limit: Annotated[int, typer.Option("--limit", "-n", metavar="N", min=1, help="Show at most this many.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """The most recently updated sessions first, with message counts and tokens."""
    if db in (None, "sqlite") and not default_path().exists():
        Console().print(
            f"[dim]no sessions yet (the default database {escape(str(default_path()))} is not created)[/dim]"
        )
        return
    with _store(db, user) as store:
        found = store.list_sessions(user_id=user, limit=limit)
    if as_json:
        rows = [
            {
                "id": i.id,
                "title": i.title,
                "model": i.model,
                "messages": i.message_count,
                "tokens": i.tokens,
                "updated_at": i.updated_at.isoformat(),
                "parent_id": i.parent_id,
                "fork_seq": i.fork_seq,
            }
            for i in found
        ]
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    console = Console()
    if not found:
        console.print("[dim]no sessions[/dim]" + ("" if user else " (sessions saved with a user id: -u USER)"))
        return
    console.print(sessions_table(found, width=console.width))
    console.print(
        f"[dim]show one:[/dim] convmem sessions show ID{escape(store_flags(db, user))}", soft_wrap=True, highlight=False
    )


@sessions_app.command("show", cls=PlainCommand)
def show(
    session: SessionArg,
    db: DbOption = None,
    user: UserOption = None,
    last: Annotated[
        int, typer.Option("--last", metavar="N", help="Show only the newest N messages (0: all).", min=0)
    ] = 50,
    model: Annotated[
        str | None, typer.Option("--model", metavar="MODEL", help="Model whose budget builds the context.")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", metavar="N", help="Context budget, for unknown models.")
    ] = None,
) -> None:
    """The conversation with roles and tool calls; the messages in the current context are marked."""
    with _store(db, user) as store:
        info = store.get_session(session, user_id=user)
        memory = _open_memory(store, info.id, user, model or info.model, max_tokens)
        ctx = memory.context()
        loaded = store.load(info.id, user_id=user)
        rows: deque[StoredMessage] = deque(store.messages(info.id, user_id=user), maxlen=last or None)
    # Pinned messages are always in context, so they are shown even when older than the rows.
    first = rows[0].seq if rows else 0
    shown = [r for r in loaded.pinned if r.seq < first] + list(rows)
    console = Console()
    console.print(info_panel(info, loaded.state, ctx))
    console.print(message_table(shown, loaded.state, ctx.window, hidden=info.message_count - len(shown)))


def _open_memory(
    store: SessionStore, session_id: str, user: str | None, model: str | None, max_tokens: int | None
) -> Memory:
    options: dict[str, Any] = {"max_tokens": max_tokens} if max_tokens is not None else {}
    try:
        return Memory.open(session_id, store=store, user_id=user, model=model, **options)
    except (KeyError, ConvmemError):
        # No model, or one convmem does not know: show the context of a generic 128k budget.
        options.setdefault("max_tokens", 128_000)
        return Memory.open(session_id, store=store, user_id=user, model=None, **options)


@sessions_app.command("export", cls=PlainCommand)
def export(
    session: SessionArg,
    db: DbOption = None,
    user: UserOption = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", metavar="FILE", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """Write the session as versioned JSONL (lossless: importing it gives back the same bytes)."""
    with _store(db, user) as store:
        data = store.export_jsonl(session, user_id=user)
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        output.write_bytes(data)
        count = data.count(b"\n") - 1  # one header line, then one line per message
        Console(stderr=True).print(f"exported {count} messages to {escape(str(output))}")


@sessions_app.command("import", cls=PlainCommand)
def import_(
    source: Annotated[str, typer.Argument(metavar="SOURCE", help="An export file, or - for stdin.")],
    db: DbOption = None,
    user: UserOption = None,
) -> None:
    """Import an export, all or nothing; a malformed line is reported by number."""
    data = sys.stdin.buffer.read() if source == "-" else None
    with _store(db, user, creates=True) as store:
        if data is None:
            try:
                data = Path(source).read_bytes()
            except OSError as exc:
                raise ConvmemError(f"{source}: {exc.strerror or exc}") from None
        try:
            info = store.import_jsonl(data, user_id=user)
        except StoreError as exc:
            raise StoreError(f"{source}: {exc}") from None
    Console().print(f"imported session [bold]{escape(info.id)}[/bold] ({info.message_count} messages)")


@sessions_app.command("delete", cls=PlainCommand)
def delete(
    session: SessionArg,
    db: DbOption = None,
    user: UserOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a session and its messages (history its forks share is kept for them)."""
    with _store(db, user) as store:
        info = store.get_session(session, user_id=user)
        if not yes and not typer.confirm(f"Delete session {info.id} ({info.message_count} messages)?"):
            raise typer.Exit(code=1)
        store.delete_session(info.id, user_id=user)
    Console().print(f"deleted session [bold]{escape(info.id)}[/bold]")


@sessions_app.command("fork", cls=PlainCommand)
def fork(
    session: SessionArg,
    db: DbOption = None,
    user: UserOption = None,
    at: Annotated[
        int | None, typer.Option("--at", metavar="SEQ", help="Branch after this seq (default: the newest).")
    ] = None,
) -> None:
    """Start a new session that shares this one's history up to a seq."""
    with _store(db, user) as store:
        info = store.get_session(session, user_id=user)
        if at is None:
            loaded = store.load(info.id, user_id=user)
            seqs = [r.seq for r in (*loaded.pinned, *loaded.window)]
            at = max(seqs) if seqs else max((r.seq for r in store.messages(info.id, user_id=user)), default=-1)
        new = store.fork(info.id, at, user_id=user)
    Console().print(
        f"forked [bold]{escape(new.id)}[/bold] from {escape(info.id)} at seq {at} ({new.message_count} shared messages)"
    )
