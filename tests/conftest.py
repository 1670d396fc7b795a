"""The quick loop's promise, enforced: ``scripts/dev.py test --quick`` runs no test that talks to a server.

The quick subset is chosen by marks, names and paths (see ``QUICK`` in scripts/dev.py); a new test that
reaches PostgreSQL or Redis without being named so would slip in and make the loop slow and dependent on
services. With ``CONVMEM_QUICK=1``, connecting to their ports fails the test that tried.
"""

from __future__ import annotations

import sys
from typing import Any

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
