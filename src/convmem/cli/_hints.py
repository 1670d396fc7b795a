"""Commands the CLI prints for the user to run next, and the database a ``--db`` names.

What comes in: the ``--db`` / ``--store`` spec and the user id a command ran with.
What goes out: flags that reach the same sessions when pasted (quoted for the
shell, a URL's password replaced by ``***`` so no secret is ever printed), and
the local file or folder a spec names, so that a command which only reads can
refuse a path that does not exist instead of creating an empty database there.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

__all__ = ["local_path", "program", "redact", "store_flags"]

_DEFAULT = (None, "sqlite")


def redact(spec: str) -> str:
    """``spec`` with a URL password replaced by ``***``."""
    if "://" not in spec:
        return spec
    parts = urlsplit(spec)
    if parts.password is None:
        return spec
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


def store_flags(db: str | None, user: str | None) -> str:
    """`` --db SPEC -u USER`` as needed to reach a session from ``convmem sessions``; empty for the defaults."""
    flags = ""
    if db not in _DEFAULT:
        flags += f" --db {shlex.quote(redact(db))}"
    if user is not None:
        flags += f" -u {shlex.quote(user)}"
    return flags


def program() -> str:
    """How to run convmem again the way it was run: ``convmem`` when that is on PATH, else its path."""
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0.endswith("__main__.py"):
        return f"{shlex.quote(sys.executable)} -m convmem"
    if Path(argv0).name != "convmem":
        return "convmem"
    on_path = shutil.which("convmem")
    if on_path is not None and Path(on_path).resolve() == Path(argv0).resolve():
        return "convmem"
    try:
        relative = os.path.relpath(argv0)
    except ValueError:  # another drive on Windows
        relative = argv0
    shorter = relative if len(relative) < len(argv0) else argv0
    return shlex.quote(shorter if os.sep in shorter else f".{os.sep}{shorter}")


def local_path(spec: str | None, default: Path) -> Path | None:
    """The file or folder a store spec names on this machine (None for server URLs and ``memory``)."""
    if spec in _DEFAULT:
        return default
    assert spec is not None
    if spec == "memory":
        return None
    for scheme in ("sqlite://", "files://"):
        if spec.startswith(scheme):
            rest = spec[len(scheme) :].lstrip("/")
            return Path(rest).expanduser() if rest.startswith("~") else Path("/" + rest)
    if "://" in spec:
        return None
    return Path(spec).expanduser()
