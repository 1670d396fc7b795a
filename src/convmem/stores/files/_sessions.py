"""Session management of the file store: list, retitle, delete, expire, fork, export and import.

A deleted session moves to the store's ``.trash`` directory in one rename,
then is removed; an import is built in a ``.import-*`` directory and renamed
into place. Either way other processes see the whole session or none of it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from ...errors import StoreError
from ...session import SessionInfo
from .._export import export_line, export_session, parse_export
from .._record import damaged_info
from .._writes import check_fork, fork_home, fork_record, json_object, new_session_id, now, taken
from ._base import MESSAGES, META, FilesBase, guarded
from ._ids import IdIndex
from ._jsonl import LineFile, fsync_dir
from ._meta import BACKEND, Meta, write_meta

__all__ = ["FileSessions"]


class FileSessions(FilesBase):
    """Session management over :class:`FilesBase`."""

    def list_sessions(self, *, user_id: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        found = []
        for entry, meta in self._scan(user_id):
            if isinstance(meta, StoreError):
                found.append(damaged_info(entry, user_id, meta))
            elif not meta.deleted:
                try:
                    found.append(meta.caught_up(self._lines(user_id, meta.id))[0].record().info())
                except StoreError as exc:
                    found.append(damaged_info(meta.id, user_id, exc))
        found.sort(key=lambda i: (i.updated_at, i.id), reverse=True)
        return found[:limit]

    @guarded
    def update_session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        with self._session(session_id, user_id) as (meta, _):
            meta = replace(
                meta,
                title=meta.title if title is None else title,
                updated_at=now(),
                metadata=meta.metadata if metadata is None else json_object(metadata),
            )
            write_meta(self._dir(user_id, meta.id) / META, meta)
            return meta.record().info()

    @guarded
    def delete_session(self, session_id: str, *, user_id: str | None = None) -> None:
        self._remove(user_id, self._resolve(session_id, user_id))

    def _remove(self, user_id: str | None, session_id: str) -> None:
        directory = self._dir(user_id, session_id)
        with self._locked(user_id, session_id):
            meta = self._meta(user_id, session_id)
            if meta is None:
                return
            children = [m.fork_seq or 0 for m in self._all(user_id) if m.parent_id == session_id]
            if children:
                # Forks still read this history: hide the session and keep only the rows they share.
                lines = self._lines(user_id, session_id)
                lines.rewrite(upto=max(children))
                indexed = IdIndex(directory).rebuild(lines)
                write_meta(directory / META, replace(meta, deleted=True, indexed=indexed).recounted(lines))
                return
            trash = self._trash / os.urandom(8).hex()
            os.rename(directory, trash)  # atomic: the session is gone at once
            fsync_dir(directory.parent)
        shutil.rmtree(trash, ignore_errors=True)
        if meta.parent_id is not None:
            parent = self._meta(user_id, meta.parent_id)
            if parent is not None and parent.deleted:
                self._remove(user_id, parent.id)

    @guarded
    def expire(self, older_than: timedelta, *, user_id: str | None = None) -> list[str]:
        cutoff = now() - older_than
        doomed = sorted(m.id for m in self._all(user_id) if not m.deleted and self._updated(m) < cutoff)
        for session_id in doomed:
            self._remove(user_id, session_id)
        return doomed

    def _updated(self, meta: Meta) -> datetime:
        """When the session last changed; a damaged message file leaves the record's own time."""
        try:
            return meta.caught_up(self._lines(meta.user_id, meta.id))[0].updated_at
        except StoreError:
            return meta.updated_at

    @guarded
    def fork(self, session_id: str, at_seq: int, *, user_id: str | None = None) -> SessionInfo:
        with self._session(session_id, user_id) as (source, _):
            check_fork(source.id, source.next_seq, at_seq)
            chain = self._chain(source)
            count = tokens = 0
            for row in self._read(chain, 0, at_seq):
                count, tokens = count + 1, tokens + row.tokens
            ancestors = [m for m, _ in chain.values()]
            parent = ancestors[fork_home([(m.id, m.fork_seq) for m in ancestors], at_seq)]
            fork_id = new_session_id()
            made = fork_record(
                source.record(),
                at_seq,
                key=fork_id,
                session_id=fork_id,
                parent=(parent.id, parent.id),
                shared=(count, tokens),
                when=now(),
            )
            fork = Meta.of(made)
            # Hold the parent's lock (fork before ancestor) so it cannot be removed meanwhile.
            with self._locked(user_id, parent.id) if parent.id != source.id else nullcontext():
                self._index_shared(user_id, parent.id)
                self._dir(user_id, fork.id).mkdir()
                write_meta(self._dir(user_id, fork.id) / META, fork)
            return made.info()

    def _index_shared(self, user_id: str | None, session_id: str) -> None:
        """Complete the id index of a session whose rows a new fork will share (its lock is held).

        The shared rows never change again, but a crash may have left their ids
        unindexed, and a hidden parent never appends again to catch up.
        """
        meta = self._meta(user_id, session_id)
        if meta is not None:
            lines = self._lines(user_id, session_id)
            current = meta.caught_up(lines)[0]
            indexed = self._indexed(current, lines)
            if indexed.indexed != meta.indexed:
                write_meta(self._dir(user_id, session_id) / META, indexed)

    # -- export / import -------------------------------------------------------------------
    @guarded
    def export_jsonl(self, session_id: str, *, user_id: str | None = None) -> bytes:
        with self._session(session_id, user_id) as (meta, _):
            return export_session(meta.record(), list(self._read(self._chain(meta), 0, None)))

    @guarded
    def import_jsonl(self, data: bytes | str, *, user_id: str | None = None) -> SessionInfo:
        parsed = parse_export(data)
        target = self._dir(user_id, parsed.id, creating=True)
        if target.exists():  # the user's own session of that id
            raise taken(parsed.id)
        # Build the session aside and rename it into place: an import is visible whole or not at all.
        target.parent.mkdir(exist_ok=True)
        staging = target.parent / f".import-{os.urandom(6).hex()}"
        staging.mkdir()
        try:
            lines = LineFile(staging / MESSAGES)
            lines.append(b"".join(map(export_line, parsed.rows)))
            IdIndex(staging).add((r.seq, r.message.id) for r in parsed.rows)
            made = parsed.record(BACKEND, parsed.id, user_id)
            meta = Meta.of(made).recounted(lines)
            write_meta(staging / META, replace(meta, updated_at=parsed.updated_at, indexed=meta.synced))
            try:
                os.rename(staging, target)
            except OSError:
                raise taken(parsed.id) from None
            fsync_dir(target.parent)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return made.info()
