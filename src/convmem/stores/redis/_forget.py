"""``forget`` in Redis: one Lua script (:mod:`._lua_forget`); nothing waits for a compaction.

Deleted keys leave the server's memory at once, and RediSearch drops a document from its indexes when
its hash goes. What a persistent server wrote before (an RDB snapshot, the AOF) holds the erased data
until its next rewrite: that is the server's own file, outside convmem's keys, so the receipt names
``BGREWRITEAOF`` / ``BGSAVE`` for a server that persists, and ``compact`` runs the one its
configuration uses.
"""

from __future__ import annotations

import time

from ...errors import SessionNotFoundError, StoreError
from .._forget import KINDS
from .._record import unscoped, user_prefix
from ._ops import Cmd, Flow, Keys, Op, resolve, user_key

__all__ = ["compact", "erase", "persists"]


def erase(keys: Keys, user_id: str | None, session_id: str | None) -> Op[tuple[dict[str, int], list[str]]]:
    """Erase the user (``session_id`` None) or the session and its forks; returns (counts, session ids)."""

    def flow(retried: bool) -> Flow[tuple[dict[str, int], list[str]]]:
        target = ""
        if session_id is not None:
            try:
                target, _ = yield from resolve(keys, session_id, user_id)
            except SessionNotFoundError:
                return dict.fromkeys(KINDS, 0), []  # gone already: forgetting twice erases nothing
        out = yield keys.script("forget", user_key(user_id), user_prefix(user_id), target)
        counts = dict(zip(KINDS, (int(n) for n in out[:6]), strict=True))
        return counts, sorted(unscoped(s.decode()) for s in out[6:])

    return Op("forget", flow, retry=False)


def persists() -> Op[list[str]]:
    """The server's persistence that still holds erased data until rewritten: ``aof``, ``rdb``, both or none."""

    def flow(retried: bool) -> Flow[list[str]]:
        aof = yield Cmd(("CONFIG", "GET", "appendonly"))
        save = yield Cmd(("CONFIG", "GET", "save"))
        found = []
        if _value(aof) == "yes":
            found.append("aof")
        if _value(save):
            found.append("rdb")
        return found

    return Op("read the persistence settings", flow)


def _value(reply: object) -> str:
    if isinstance(reply, dict):
        values = list(reply.values())
    elif isinstance(reply, list | tuple):
        values = list(reply[1::2])
    else:
        values = []
    raw = values[0] if values else b""
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def compact(kinds: list[str], *, wait: float = 60.0) -> Op[None]:
    """Rewrite the server's files that still hold erased keys (the AOF, the RDB snapshot), and wait for it."""

    def flow(retried: bool) -> Flow[None]:
        for kind, command, flag in (("aof", "BGREWRITEAOF", "aof_rewrite"), ("rdb", "BGSAVE", "rdb_bgsave")):
            if kind not in kinds:
                continue
            yield from _idle(flag, wait)  # one already running would refuse the command
            yield Cmd((command,))
            yield from _idle(flag, wait)

    return Op("compact", flow, retry=False)


def _idle(flag: str, wait: float) -> Flow[None]:
    """Wait until the server's ``<flag>_in_progress`` (and a scheduled one) is 0; StoreError after ``wait`` s."""
    deadline = time.monotonic() + wait
    while True:
        info = yield Cmd(("INFO", "persistence"))
        if not isinstance(info, dict):  # a client that does not parse INFO: its "key:value" lines
            text = info.decode() if isinstance(info, bytes) else str(info)
            info = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        busy = any(
            str(info.get(f"{flag}_{state}", 0)).strip() not in ("0", "") for state in ("in_progress", "scheduled")
        )
        if not busy:
            return
        if time.monotonic() > deadline:
            raise StoreError(f"the Redis server's {flag.replace('_', ' ')} did not finish within {wait:.0f} s")
        time.sleep(0.05)
