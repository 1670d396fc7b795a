"""``forget`` in the file store: the sessions' directories go, the long-term logs are rewritten without the user.

Sessions are removed forks first, each under its own lock by the store's own rule (a session a
surviving fork still reads keeps only the shared lines, rewritten), so a writer that holds a view of
one gets :class:`~convmem.errors.SessionLostError` on its next append. A directory is renamed into
the trash in one step, then removed. The long-term logs (``facts.jsonl``, ``blocks.jsonl``, the recall
documents and each model's vectors) are append-only, so they are rewritten without the erased
lines (a new file replaces the old one atomically; every reader notices the new inode and reads it
again). Nothing waits for a compaction: once ``forget`` returns, the erased bytes are in no file of
the store (the file system may keep freed blocks until it reuses them, as it does for any deleted file).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from ...errors import SessionNotFoundError
from ...longterm.recall.model import DocRef
from .._forget import KINDS, descendants, in_sessions
from ._layout import Layout
from ._meta import Meta
from .longterm import FileBlockStore, FileFactStore, FileRecallStore

__all__ = ["erase"]


def _depth(meta: Meta, by_id: dict[str, Meta]) -> int:
    depth, seen = 0, {meta.id}
    while meta.parent_id is not None and meta.parent_id in by_id and meta.parent_id not in seen:
        meta = by_id[meta.parent_id]
        seen.add(meta.id)
        depth += 1
    return depth


def erase(
    files: Layout,
    root: Path,
    user_id: str | None,
    session_id: str | None,
    remove: Callable[[str | None, str], None],
) -> tuple[dict[str, int], list[str]]:
    """Erase the user (``session_id`` None) or the session and its forks; returns (counts, session ids)."""
    counts = dict.fromkeys(KINDS, 0)
    metas = {m.id: m for m in files.all(user_id)}
    if session_id is None:
        order = sorted(metas, key=lambda i: -_depth(metas[i], metas))
    else:
        try:
            target = files.resolve(session_id, user_id)
        except SessionNotFoundError:
            return counts, []
        order = descendants(target, [(m.id, m.parent_id) for m in metas.values()])
    for sid in order:
        remove(user_id, sid)
    left = {m.id: m for m in files.all(user_id)}
    counts["sessions"] = len(metas) - len(left)
    counts["messages"] = sum(m.count for m in metas.values()) - sum(m.count for m in left.values())
    erased = None if session_id is None else set(order)
    if session_id is None:
        # Its name is the user's id; a writer that has just started a new session of the user keeps it.
        with contextlib.suppress(OSError):
            os.rmdir(files.home(user_id))
    facts = FileFactStore(root)._log.rewrite(lambda f: not (f.user_id == user_id and in_sessions(f.session_id, erased)))
    counts["facts"] = len({f.id for f in facts})
    if session_id is None:
        blocks = FileBlockStore(root)._log.rewrite(lambda b: b.scope != user_id)
        counts["blocks"] = len({b.name for b in blocks})
    recall = FileRecallStore(root)
    docs = recall._docs
    with docs._lock:
        docs.refresh()
        first: dict[str, tuple[str | None, DocRef]] = {}  # a legacy vector line's owner: its id's first document
        for doc in docs.records:
            first.setdefault(doc.message_id, (doc.user_id, doc.ref))
    gone = docs.rewrite(lambda d: not (d.user_id == user_id and in_sessions(d.session_id, erased)))
    counts["recall_docs"] = len(gone)
    owned = {(d.user_id, d.ref) for d in gone}
    if gone:
        for path in sorted(recall._dir.glob("vectors-*.jsonl")):
            log = recall._vector_log(path.name[len("vectors-") : -len(".jsonl")])
            if log.path != path:
                continue  # a file name that no model name maps to: not a log this store writes
            dropped = log.rewrite(
                lambda r: (
                    (first.get(r.message_id) if r.session_id is None else (r.user_id, (r.session_id, r.message_id)))
                    not in owned
                )
            )
            counts["vectors"] += len({(r.session_id, r.message_id) for r in dropped})
    return counts, sorted(order)
