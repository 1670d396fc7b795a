"""The file store's index of message ids, so that refusing a duplicate id reads one small file, not the history.

Layout: ``<session>/ids/<bucket>.txt``, 256 buckets chosen by the CRC-32 of
the id; each line is ``<seq>\\t<id as JSON>``. The index is derived data:
it is appended without ``fsync``, and ``session.json`` records how far into
``messages.jsonl`` it is complete (``indexed``). Whatever lies beyond is
added (under the session's lock) before the next check, and a rewrite of the
message file rebuilds it. Every write starts with a newline, so a line torn
by a crash ends there and is skipped; its id is added again by the catch-up.
"""

from __future__ import annotations

import json
import shutil
import zlib
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from ._jsonl import LineFile

__all__ = ["IdIndex"]


class IdIndex:
    """The id index of one session directory."""

    def __init__(self, session_dir: Path) -> None:
        self.dir = session_dir / "ids"

    @staticmethod
    def _bucket(message_id: str) -> str:
        return f"{zlib.crc32(message_id.encode()) & 0xFF:02x}.txt"

    def find(self, ids: Iterable[str], upto: int | None = None) -> set[str]:
        """The ids among ``ids`` that the index holds (with a seq at most ``upto``, if given)."""
        wanted: dict[str, set[str]] = defaultdict(set)
        for message_id in ids:
            wanted[self._bucket(message_id)].add(message_id)
        found: set[str] = set()
        for bucket, group in wanted.items():
            try:
                text = (self.dir / bucket).read_text(encoding="ascii")
            except FileNotFoundError:
                continue
            for line in text.split("\n"):
                seq, _, encoded = line.partition("\t")
                try:
                    message_id = json.loads(encoded)
                    if message_id in group and (upto is None or int(seq) <= upto):
                        found.add(message_id)
                except ValueError:
                    continue  # empty, or torn by a crash: the catch-up adds it again
        return found

    def locate(self, ids: Iterable[str], upto: int | None = None) -> dict[str, list[int]]:
        """The seqs the index records for each of ``ids`` it holds (at most ``upto``, if given).

        An entry may be stale (its line was cut after a failed write): callers
        read the line at the seq to confirm it.
        """
        wanted: dict[str, set[str]] = defaultdict(set)
        for message_id in ids:
            wanted[self._bucket(message_id)].add(message_id)
        found: dict[str, list[int]] = defaultdict(list)
        for bucket, group in wanted.items():
            try:
                text = (self.dir / bucket).read_text(encoding="ascii")
            except FileNotFoundError:
                continue
            for line in text.split("\n"):
                seq, _, encoded = line.partition("\t")
                try:
                    message_id = json.loads(encoded)
                    if message_id in group and (upto is None or int(seq) <= upto):
                        found[message_id].append(int(seq))
                except ValueError:
                    continue  # empty, or torn by a crash: the catch-up adds it again
        return dict(found)

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
