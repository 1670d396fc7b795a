"""When each version of a user's working blocks took effect, so a turn replay can use the blocks of its time.

A block store keeps only a block's newest version. A past turn's context
depended on the versions then: their text is in the request, and a capped
block's ``max_tokens`` is claimed ahead of the window, so it decided what was
evicted and summarized. The service records every version it saves, with the
time it was saved, in the same block store under a scope of its own
(``\\x1fhistory:<tenant>:<user>``, which no user's scope can equal: neither
tenant names nor user ids may hold a control character). The record is
written after the block itself; if it is lost, or a version was written by
something other than the service, :meth:`Timeline.at` says so and the
replay reports ``exact: false`` instead of guessing.

Example::

    log = BlockLog(store)
    log.record("acme:alice", saved_record)
    log.timeline("acme:alice").at(message.created_at)   # (blocks then, what is unknown)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from ..longterm.blocks.base import StaticBlock, stored_block
from ..longterm.blocks.store import BlockRecord, BlockStore

__all__ = ["BlockLog", "Timeline", "static_blocks"]

PREFIX = "\x1fhistory:"


@dataclass(frozen=True, slots=True)
class _Version:
    at: datetime
    record: BlockRecord


class Timeline:
    """Each of a user's blocks as a list of versions with the time each took effect, and the current ones."""

    def __init__(self, current: Sequence[BlockRecord], logged: Sequence[tuple[datetime, BlockRecord]]) -> None:
        self.current = {r.name: r for r in current}
        self.versions: dict[str, list[_Version]] = {}
        for at, record in sorted(logged, key=lambda x: (x[1].name, x[1].version)):
            self.versions.setdefault(record.name, []).append(_Version(at, record))
        # What a cached replay depends on: a new version (or a lost record) changes it.
        self.signature = tuple(
            (name, r.version, tuple((v.record.version, v.at) for v in self.versions.get(name, [])))
            for name, r in sorted(self.current.items())
        )

    def at(self, when: datetime | None) -> tuple[tuple[BlockRecord, ...], tuple[str, ...]]:
        """The block versions in effect at ``when``, and why any of them is not known (then: the current one)."""
        blocks: list[BlockRecord] = []
        unknown: list[str] = []
        for name, current in sorted(self.current.items()):
            known = {v.record.version: v for v in self.versions.get(name, [])}
            if current.version not in known:
                unknown.append(f"block {name!r} is at version {current.version}, which the service did not record")
                blocks.append(current)
                continue
            if when is None:
                blocks.append(current)
                continue
            picked: BlockRecord | None = None
            gap = False
            for version in range(current.version, 0, -1):
                found = known.get(version)
                if found is None:
                    gap = True
                    break
                if _aware(found.at) <= _aware(when):
                    picked = found.record
                    break
            if gap:
                unknown.append(f"block {name!r}: version {version} is not recorded, so its text then is unknown")
                blocks.append(current)
            elif picked is not None:
                blocks.append(picked)
            # else: the block did not exist yet at that time
        return tuple(blocks), tuple(unknown)


class BlockLog:
    """Records and reads the versions of a user's blocks (see the module docstring)."""

    def __init__(self, store: BlockStore) -> None:
        self.store = store

    def record(self, user: str, record: BlockRecord, *, at: datetime | None = None) -> None:
        """Log ``record`` (just saved) as in effect from ``at`` (now); a version logged already is kept."""
        when = (at or datetime.now(timezone.utc)).isoformat()
        entry = replace(record, scope=PREFIX + user, name=f"{record.name}@{record.version}", description=when)
        if self.store.load_block(entry.scope, entry.name) is None:
            self.store.save_block(replace(entry, version=0), expected_version=0)

    def timeline(self, user: str) -> Timeline:
        logged: list[tuple[datetime, BlockRecord]] = []
        for entry in self.store.list_blocks(PREFIX + user):
            name, _, version = entry.name.rpartition("@")
            try:
                at = datetime.fromisoformat(entry.description or "")
                number = int(version)
            except ValueError:
                continue  # not one of ours: ignored, so the version reads as unrecorded
            logged.append((at, replace(entry, scope=user, name=name, version=number, description=None)))
        return Timeline(self.store.list_blocks(user), logged)


def static_blocks(records: Sequence[BlockRecord]) -> list[StaticBlock]:
    """Block records as the ``StaticBlock`` list a ``Memory`` of the service is opened with (never trusted)."""
    return [stored_block(r) for r in records]


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)
