"""The file store's index of message ids, so that refusing a duplicate id reads one small file, not the history.

Layout: ``<session>/ids/<bucket>.txt``, 256 buckets chosen by the CRC-32 of
the id; each line is ``<seq>\\t<id as JSON>``. The index is derived data:
it is appended without ``fsync``, and ``session.json`` records how far into
``messages.jsonl`` it is complete (``indexed``). Whatever lies beyond is
added (under the session's lock) before the next check, and a rewrite of the
message file rebuilds it. Every write starts with a newline, so a line torn
by a crash ends there. An index that is lost (its directory gone) or damaged
(a bucket that is not all ``<seq>\t<id>`` lines, a torn line included) is
rebuilt from the message file before it answers, so a duplicate id is still refused.
"""

from __future__ import annotations

import json
import shutil
import zlib
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from ._jsonl import LineFile

__all__ = ["IdIndex", "IndexDamaged", "scan_ids"]


class IndexDamaged(Exception):
    """A bucket of the index cannot be read; the index is rebuilt from the message file (derived data)."""


def scan_ids(lines: LineFile, ids: Iterable[str], upto: int) -> dict[str, list[int]]:
    """What :meth:`IdIndex.locate` answers, read from the message file itself (an index that is damaged)."""
    wanted = set(ids)
    found: dict[str, list[int]] = defaultdict(list)
    for line in lines.scan(0)[0]:
        if line.id in wanted and line.seq <= upto:
            found[line.id].append(line.seq)
    return dict(found)


class IdIndex:
    """The id index of one session directory."""

    def __init__(self, session_dir: Path) -> None:
        self.dir = session_dir / "ids"

    @staticmethod
    def _bucket(message_id: str) -> str:
        return f"{zlib.crc32(message_id.encode()) & 0xFF:02x}.txt"

    def _bucket_entries(self, bucket: str) -> list[tuple[int, str]]:
        """The ``(seq, id)`` entries of one bucket; IndexDamaged if any line is not one."""
        try:
            raw = (self.dir / bucket).read_bytes()
        except FileNotFoundError:
            return []
        entries = []
        try:
            for line in raw.decode("ascii").split("\n"):
                if line:
                    seq, _, encoded = line.partition("\t")
                    message_id = json.loads(encoded)
                    if not isinstance(message_id, str):
                        raise ValueError("not an id")
                    entries.append((int(seq), message_id))
        except ValueError:  # undecodable, garbled, or a line torn by a crash: the caller rebuilds
            raise IndexDamaged(str(self.dir / bucket)) from None
        return entries

    def locate(self, ids: Iterable[str], upto: int | None = None) -> dict[str, list[int]]:
        """The seqs the index records for each of ``ids`` it holds (at most ``upto``, if given).

        An entry may be stale (its line was cut after a failed write): callers
        read the line at the seq to confirm it. A damaged bucket raises :class:`IndexDamaged`.
        """
        wanted: dict[str, set[str]] = defaultdict(set)
        for message_id in ids:
            wanted[self._bucket(message_id)].add(message_id)
        found: dict[str, list[int]] = defaultdict(list)
        for bucket, group in wanted.items():
            for seq, message_id in self._bucket_entries(bucket):
                if message_id in group and (upto is None or seq <= upto):
                    found[message_id].append(seq)
        return dict(found)

    def lost(self, indexed: int) -> bool:
        """Whether the index the record says is complete up to ``indexed`` is gone."""
        return indexed > 0 and not self.dir.is_dir()

    def add(self, entries: Iterable[tuple[int, str | None]]) -> None:
        by_bucket: dict[str, list[str]] = defaultdict(list)
        for seq, message_id in entries:
            if message_id is not None:
                by_bucket[self._bucket(message_id)].append(f"{seq}\t{json.dumps(message_id)}")
        if by_bucket:
            self.dir.mkdir(exist_ok=True)
        for bucket, lines in by_bucket.items():
            with open(self.dir / bucket, "a", encoding="ascii") as handle:
                handle.write("\n" + "\n".join(lines))

    def catch_up(self, lines: LineFile, offset: int) -> int:
        """Index the lines from ``offset``; returns where the complete data ends."""
        if offset > lines.size():  # the message file was rewritten under us: start over
            shutil.rmtree(self.dir, ignore_errors=True)
            offset = 0
        tail, end = lines.scan(offset)
        self.add((line.seq, line.id) for line in tail)
        return end

    def rebuild(self, lines: LineFile) -> int:
        """Index the whole message file from scratch (after a rewrite); returns its end."""
        shutil.rmtree(self.dir, ignore_errors=True)
        return self.catch_up(lines, 0)
