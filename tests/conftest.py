"""The quick loop's promise, enforced: ``scripts/dev.py test --quick`` runs no test that talks to a server.

The quick subset is chosen by marks, names and paths (see ``QUICK`` in scripts/dev.py); a new test that
reaches PostgreSQL or Redis without being named so would slip in and make the loop slow and dependent on
services. With ``CONVMEM_QUICK=1``, connecting to their ports fails the test that tried.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tests._quick import QUICK

SERVER_PORTS = {5432: "PostgreSQL", 6379: "Redis"}


def _refuse_servers(event: str, args: tuple[Any, ...]) -> None:
    if event != "socket.connect":
        return
    address = args[1]
    if isinstance(address, tuple) and len(address) >= 2 and address[1] in SERVER_PORTS:
        raise RuntimeError(
            f"a test of the quick subset connected to {SERVER_PORTS[address[1]]} at {address[0]}:{address[1]}; "
            "name it after its backend or move it out of QUICK in scripts/dev.py"
        )


if QUICK:
    sys.addaudithook(_refuse_servers)


# -- what the suite leaves on the machine's servers ------------------------------------------------------
# Tests write to the machine's PostgreSQL and Redis under names of their own (tests/stores/_servers.py) and
# remove them; a test that writes under convmem's defaults, or forgets to clean up, leaves data behind that
# the next run, or the user's own convmem data on that server, then sees. The run fails on any new one.
LEFTOVER_TIMEOUT = 2.0
_BEFORE = pytest.StashKey[set[str]]()


def _namespaces_on_servers() -> set[str]:
    """convmem's schemas in PostgreSQL and key prefixes in Redis (the part before the first colon)."""
    found: set[str] = set()
    try:
        import psycopg

        from tests.stores._servers import PG_URL

        with psycopg.connect(PG_URL, connect_timeout=LEFTOVER_TIMEOUT) as conn:
            rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'convmem%%'").fetchall()
            found |= {f"postgres schema {name}" for (name,) in rows if not name.startswith("convmem_bench")}
    except Exception:  # a server that is down has nothing left on it
        pass
    try:
        import redis

        from tests.stores._servers import REDIS_URL

        with redis.Redis.from_url(REDIS_URL, socket_timeout=LEFTOVER_TIMEOUT) as client:
            for key in client.scan_iter(match="convmem*", count=5000):
                prefix = key.decode(errors="replace").split(":", 1)[0]
                if not prefix.startswith("convmem-bench"):
                    found.add(f"redis prefix {prefix}:")
    except Exception:  # as above
        pass
    return found


def _controller(config: Any) -> bool:
    return not QUICK and not hasattr(config, "workerinput")  # xdist workers report to the controller


def pytest_sessionstart(session: Any) -> None:
    if _controller(session.config):
        session.config.stash[_BEFORE] = _namespaces_on_servers()


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if not _controller(session.config) or _BEFORE not in session.config.stash:
        return
    left = sorted(_namespaces_on_servers() - session.config.stash[_BEFORE])
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"\ntests left data on the machine's servers: {', '.join(left)}", red=True)
        session.exitstatus = 1
