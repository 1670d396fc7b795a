"""``convmem forget``, ``sweep`` and ``compact``: erase a user, a session or old sessions, then clear the disk.

``forget`` erases a user (``--user``), or one session with its forks (``--session``), from every
kind of data the store keeps (see :mod:`convmem.stores._forget`) and prints the receipt as JSON:
the counts per kind, the sessions erased, and what the storage still holds until ``convmem compact``
(the command to run is in the receipt, with this store's flags). ``--compact`` does both at once.
Without ``--yes`` it asks first. A failure prints ``error: ...`` and exits with code 2.

Usage::

    convmem forget --user alice --yes
    convmem forget --user alice --session 3f2a --db postgresql://db/app --compact --yes
    convmem compact --db sqlite:///var/lib/app/convmem.db
    convmem sweep --user alice --max-age-days 30 --keep 100 --yes

``sweep`` erases the sessions a retention policy no longer allows (:mod:`convmem.stores._sweep`), each
as ``forget`` does, and prints one receipt for all of them.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Annotated

import typer
from rich.console import Console

from ..errors import ConfigurationError
from ..stores._forget import Forgetting
from ..stores._sweep import Retention, doomed
from ..stores._sweep import sweep as run_sweep
from ..stores._writes import now
from ._hints import program, store_flags
from .sessions import DbOption, _store

__all__ = ["compact", "forget", "sweep"]

# One of --user and --anonymous is required: erasing the anonymous user must never be a default.
UserRequired = Annotated[str | None, typer.Option("--user", "-u", metavar="USER", help="The user to erase.")]


def _forgetting(store: object) -> Forgetting:
    if not isinstance(store, Forgetting):
        raise ConfigurationError(f"{type(store).__name__} cannot erase (it has no forget/compact)")
    return store


def forget(
    user: UserRequired = None,
    session: Annotated[
        str | None,
        typer.Option("--session", "-s", metavar="SESSION", help="Only this session (id or prefix) and its forks."),
    ] = None,
    anonymous: Annotated[bool, typer.Option("--anonymous", help="Erase the sessions saved without a user.")] = False,
    db: DbOption = None,
    compact_now: Annotated[bool, typer.Option("--compact", help="Compact the storage right after.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Erase a user, or one session with its forks, everywhere the store keeps anything of it."""
    if (user is None) == (not anonymous):
        Console(stderr=True).print("[bold red]error:[/bold red] give --user USER, or --anonymous", soft_wrap=True)
        raise typer.Exit(code=2)
    what = f"session {session!r} (and its forks) of " if session is not None else "everything of "
    who = "the anonymous user" if anonymous else f"user {user!r}"
    if not yes and not typer.confirm(f"Erase {what}{who}? This cannot be undone"):
        raise typer.Exit(code=1)
    with _store(db, user) as store:
        receipt = _forgetting(store).forget(user_id=user, session_id=session, compact=compact_now)
    out = receipt.as_dict()
    if receipt.pending:
        out["compact"] = f"{program()} compact{store_flags(db, None)}"  # this store's flags, never a password
    typer.echo(json.dumps(out, indent=2))


def sweep(
    user: UserRequired = None,
    anonymous: Annotated[bool, typer.Option("--anonymous", help="Sweep the sessions saved without a user.")] = False,
    max_age_days: Annotated[
        float | None, typer.Option("--max-age-days", metavar="DAYS", help="Erase sessions not updated for this long.")
    ] = None,
    keep: Annotated[
        int | None, typer.Option("--keep", metavar="N", help="Keep only the N most recently updated sessions.")
    ] = None,
    db: DbOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Erase the sessions a retention policy no longer allows (kept forks keep their history)."""
    if (user is None) == (not anonymous) or (max_age_days is None and keep is None):
        Console(stderr=True).print(
            "[bold red]error:[/bold red] give --user USER (or --anonymous) and --max-age-days and/or --keep",
            soft_wrap=True,
        )
        raise typer.Exit(code=2)
    with _store(db, user) as store:
        policy = Retention(None if max_age_days is None else timedelta(days=max_age_days), keep)
        if not yes:
            count = len(doomed(store.list_sessions(user_id=user), policy, now()))
            if not typer.confirm(f"Erase {count} sessions of {'the anonymous user' if anonymous else repr(user)}?"):
                raise typer.Exit(code=1)
        receipt = run_sweep(_forgetting(store), user_id=user, policy=policy)
    out = receipt.as_dict()
    if receipt.pending:
        out["compact"] = f"{program()} compact{store_flags(db, None)}"
    typer.echo(json.dumps(out, indent=2))


def compact(db: DbOption = None) -> None:
    """Rewrite the storage so that nothing erased by forget remains in its files."""
    with _store(db) as store:
        _forgetting(store).compact()
    Console().print("compacted")
