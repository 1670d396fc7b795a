"""``forget`` in the in-memory store: the same erasure as every backend, over the process's dicts.

Nothing is on disk, so nothing waits for a compaction; what Python freed is the allocator's until reused.
"""

from __future__ import annotations

from typing import Any

from ..errors import SessionNotFoundError
from ._forget import KINDS, descendants, in_sessions

__all__ = ["erase"]


def erase(store: Any, user_id: str | None, session_id: str | None) -> tuple[dict[str, int], list[str]]:
    """Erase the user (``session_id`` None) or the session and its forks; returns (counts, session ids).

    ``store`` is the :class:`~convmem.stores.memory.MemoryStore` (typed loosely: naming it here would make
    an import cycle with the module that imports this one); the caller holds its lock, so no append
    interleaves.
    """
    counts = dict.fromkeys(KINDS, 0)
    mine = {sid: s for (u, sid), s in store._sessions.items() if u == user_id}
    if session_id is None:
        order = list(mine)
    else:
        try:
            target = store._session(session_id, user_id).id
        except SessionNotFoundError:
            return counts, []
        order = descendants(target, [(sid, s.parent_id) for sid, s in mine.items()])
    before = (len(mine), sum(len(s.all.rows) for s in mine.values()))
    for sid in order:
        if session_id is None:
            del store._sessions[(user_id, sid)]  # every fork goes too: no rows are kept for one
            continue
        session = store._sessions.get((user_id, sid))
        if session is not None:  # removing a fork may have removed its hidden parent already
            store._remove(session)
    left = [s for (u, _), s in store._sessions.items() if u == user_id]
    counts["sessions"] = before[0] - len(left)
    counts["messages"] = before[1] - sum(len(s.all.rows) for s in left)
    erased = None if session_id is None else set(order)
    facts = store._facts
    with facts._lock:
        ids = facts._by_user.get(user_id, [])
        gone = [i for i in ids if in_sessions(facts._rows[i].session_id, erased)]
        for i in gone:
            del facts._rows[i]
        facts._by_user[user_id] = [i for i in ids if i in facts._rows]
        counts["facts"] = len(gone)
    if session_id is None:
        blocks = store._blocks
        with blocks._lock:
            doomed = [k for k in blocks._blocks if k[0] == user_id]
            for k in doomed:
                del blocks._blocks[k]
            counts["blocks"] = len(doomed)
    recall = store._recall
    if recall is not None:
        with recall._lock:
            docs = recall._docs.get(user_id, {})
            refs = [r for r, d in docs.items() if in_sessions(d.session_id, erased)]
            for r in refs:
                del docs[r]
            counts["recall_docs"] = len(refs)
            for (_, owner), vectors in recall._vectors.items():
                if owner == user_id:
                    for r in refs:
                        counts["vectors"] += vectors.pop(r, None) is not None
    return counts, sorted(order)
