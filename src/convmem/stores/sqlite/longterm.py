"""Long-term memory in the SQLite store: facts, working blocks, and recall with FTS5 + vectors.

Each class shares the :class:`~convmem.stores.sqlite.SQLiteStore`'s
connection (pass the store) or opens the database itself (pass a path); the
tables come from migration ``0002_long_term_memory`` in
:mod:`convmem.stores.sqlite._sql`, so one file holds sessions and long-term memory.

* :class:`SQLiteFactStore`: one row per fact, its JSON payload beside the
  indexed validity interval. Ending a fact is ``UPDATE ... WHERE valid_to_ts
  IS NULL``: a concurrent writer that ended it first makes the whole write
  roll back with ConflictError.
* :class:`SQLiteBlockStore`: ``UPDATE ... WHERE version = ?`` is the optimistic check.
* :class:`SQLiteRecallStore`: documents keyed by (user, session, message id),
  a contentless FTS5 index (porter stemming, BM25 with the message's own
  words weighted twice its context's) and float32 vector blobs keyed by
  their document's number (migration ``0005_recall_keyed_by_owner``). User text never reaches FTS5 syntax: it is cut
  into words and each word is quoted (:func:`fts_terms`). An FTS rowid carries its user's number in the high
  bits (migration ``0006_recall_fts_by_user_range``): a search reads one rowid range, that user's rows, and
  matches only the rarest of the query's words that fit :data:`~convmem.longterm.recall.lexical.MATCH_BUDGET` of
  them (:func:`~convmem.longterm.recall.lexical.pick_terms`), so its cost does not grow with the other users' rows
  nor with how common a word is.

Example::

    store = SQLiteStore("chat.db")
    facts = Facts(SQLiteFactStore(store))
    recall = RecallIndex(store=SQLiteRecallStore(store), embedder=SentenceTransformerEmbedder())
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from ...errors import ConflictError, StoreError
from ...longterm.blocks.store import BlockRecord, check_save
from ...longterm.facts.model import Fact, query_time
from ...longterm.facts.store import select_facts
from ...longterm.recall import lexical
from ...longterm.recall._np import np
from ...longterm.recall.lexical import STOPWORDS
from ...longterm.recall.model import DocRef, RecallDoc
from .._longterm_codec import block_from_json, block_to_json, created_at, fact_from_json, fact_to_json, key
from ..codec import encode_datetime
from . import _sql as sql
from ._db import Database

__all__ = ["SQLiteBlockStore", "SQLiteFactStore", "SQLiteRecallStore", "fts_query", "fts_terms"]

_WORDS = re.compile(r"[^\W_]+", re.UNICODE)
MAX_QUERY_TERMS = 64
_NUMBER_MASK = (1 << sql.FTS_USER_SHIFT) - 1
_MAX_USERS = 1 << (63 - sql.FTS_USER_SHIFT)


def fts_terms(text: str) -> list[str]:
    """The words of ``text`` as FTS5 strings (each quoted, so no input is ever FTS syntax), stop words dropped."""
    words = [w for w in dict.fromkeys(_WORDS.findall(text.casefold())) if w not in STOPWORDS]
    return ['"' + w.replace('"', '""') + '"' for w in words[:MAX_QUERY_TERMS]]


def fts_query(text: str) -> str | None:
    """An FTS5 query matching any word of ``text`` (see :func:`fts_terms`); None if no word is left."""
    return " OR ".join(fts_terms(text)) or None


class _HasDatabase(Protocol):
    db: Database  # a SQLiteStore: the long-term stores share its connection


class _Shared:
    def __init__(self, target: _HasDatabase | Database | str | os.PathLike[str] | None) -> None:
        if isinstance(target, Database):
            self.db, self._owned = target, False
        elif target is None or isinstance(target, str | os.PathLike):
            self.db, self._owned = Database(target), True
        else:
            self.db, self._owned = target.db, False  # a SQLiteStore's: closes with the store

    def close(self) -> None:
        if self._owned:
            self.db.close()


class SQLiteFactStore(_Shared):
    """A :class:`~convmem.longterm.facts.FactStore` in a SQLite database."""

    def write_facts(self, added: Sequence[Fact], changed: Sequence[Fact]) -> None:
        with self.db.transaction(write=True) as conn:
            for fact in changed:
                row = conn.execute(sql.SELECT_FACT, (fact.id,)).fetchone()
                if row is None or row[0] != key(fact.user_id):
                    raise ConflictError(f"fact {fact.id!r} does not exist for user {fact.user_id!r}")
                cursor = conn.execute(sql.UPDATE_FACT, (fact_to_json(fact), _ts(fact.valid_to), fact.id))
                if cursor.rowcount != 1:
                    raise ConflictError(f"fact {fact.id!r} was already ended; reload and retry")
            for fact in added:
                if conn.execute(sql.SELECT_FACT, (fact.id,)).fetchone() is not None:
                    raise ConflictError(f"fact {fact.id!r} already exists")
                conn.execute(
                    sql.INSERT_FACT,
                    (fact.id, key(fact.user_id), fact_to_json(fact), fact.valid_from.timestamp(), _ts(fact.valid_to)),
                )

    def list_facts(
        self, *, user_id: str | None, valid_at: datetime | None = None, open_only: bool = False
    ) -> list[Fact]:
        valid_at = query_time(valid_at)  # naive is UTC, never the machine's local time
        with self.db.transaction(write=False) as conn:
            if valid_at is not None:
                ts = valid_at.timestamp()
                rows = conn.execute(sql.LIST_FACTS_AT, (key(user_id), ts, ts)).fetchall()
            else:
                rows = conn.execute(sql.LIST_OPEN_FACTS if open_only else sql.LIST_FACTS, (key(user_id),)).fetchall()
        # The float columns narrow the rows; the exact datetimes decide (and order) them.
        return select_facts([fact_from_json(r[0]) for r in rows], valid_at=valid_at, open_only=open_only)


class SQLiteBlockStore(_Shared):
    """A :class:`~convmem.longterm.blocks.store.BlockStore` in a SQLite database."""

    def load_block(self, scope: str | None, name: str) -> BlockRecord | None:
        with self.db.transaction(write=False) as conn:
            row = conn.execute(sql.SELECT_BLOCK, (key(scope), name)).fetchone()
        return block_from_json(row[0]) if row is not None else None

    def save_block(self, record: BlockRecord, *, expected_version: int) -> BlockRecord:
        with self.db.transaction(write=True) as conn:
            row = conn.execute(sql.SELECT_BLOCK, (key(record.scope), record.name)).fetchone()
            saved = check_save(block_from_json(row[0]) if row is not None else None, record, expected_version)
            if row is None:
                conn.execute(sql.INSERT_BLOCK, (key(saved.scope), saved.name, block_to_json(saved), saved.version))
            else:
                conn.execute(
                    sql.UPDATE_BLOCK,
                    (block_to_json(saved), saved.version, key(saved.scope), saved.name, expected_version),
                )
        return saved

    def list_blocks(self, scope: str | None) -> list[BlockRecord]:
        with self.db.transaction(write=False) as conn:
            rows = conn.execute(sql.LIST_BLOCKS, (key(scope),)).fetchall()
        return [block_from_json(r[0]) for r in rows]


class SQLiteRecallStore(_Shared):
    """A :class:`~convmem.longterm.recall.store.LexicalRecallStore`: documents, FTS5 and vectors in SQLite.

    A search reads the user's rowid range only, so FTS5 ranks the user's rows
    only (and the documents are checked against the user again); its BM25
    statistics (document frequencies) still span every user's rows, so what
    crosses users is at most a term frequency, never a document.
    """

    def save_docs(self, docs: Sequence[RecallDoc]) -> None:
        if not docs:
            return
        with self.db.transaction(write=True) as conn:
            users: dict[str, int] = {}
            for doc in docs:
                owner = key(doc.user_id)
                if owner not in users:
                    users[owner] = _user_number(conn, owner)
                cursor = conn.execute(
                    sql.INSERT_RECALL_DOC,
                    (
                        doc.message_id,
                        key(doc.user_id),
                        doc.session_id,
                        doc.seq,
                        doc.role,
                        encode_datetime(doc.created_at),
                        doc.created_at.timestamp(),
                        doc.text,
                        doc.key,
                        doc.context,
                    ),
                )
                if cursor.rowcount == 1:
                    number = int(cursor.lastrowid or 0)
                    if number > _NUMBER_MASK:
                        raise StoreError(f"recall documents are numbered below 2**{sql.FTS_USER_SHIFT}; got {number}")
                    rowid = (users[owner] << sql.FTS_USER_SHIFT) | number
                    conn.execute(sql.INSERT_RECALL_FTS, (rowid, doc.key, doc.context))

    def load_docs(self, user_id: str | None) -> list[RecallDoc]:
        with self.db.transaction(write=False) as conn:
            rows = conn.execute(sql.LOAD_RECALL_DOCS, (key(user_id),)).fetchall()
        return [
            RecallDoc(mid, session, user_id, seq, role, text, created_at(created), doc_key, context)
            for mid, session, seq, role, created, text, doc_key, context in rows
        ]

    def save_vectors(self, model: str, docs: Sequence[RecallDoc], vectors: Any) -> None:
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        with self.db.transaction(write=True) as conn:
            conn.executemany(
                sql.UPSERT_VECTOR,
                [
                    (model, matrix.shape[1], matrix[i].tobytes(), key(d.user_id), d.session_id, d.message_id)
                    for i, d in enumerate(docs)
                ],
            )

    def load_vectors(self, user_id: str | None, model: str) -> tuple[list[DocRef], Any]:
        with self.db.transaction(write=False) as conn:
            rows = conn.execute(sql.LOAD_VECTORS, (key(user_id), model)).fetchall()
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        dim = rows[0][2]
        kept = [r for r in rows if r[2] == dim]  # a model's vectors share one dimension; others are stale
        matrix = np.frombuffer(b"".join(r[3] for r in kept), dtype=np.float32).reshape(-1, dim)
        return [(r[0], r[1]) for r in kept], matrix

    def lexical_search(self, query: str, *, user_id: str | None, limit: int) -> list[tuple[DocRef, float]]:
        terms = fts_terms(query)
        if not terms or limit <= 0:
            return []
        owner = key(user_id)
        with self.db.transaction(write=False) as conn:
            row = conn.execute(sql.SELECT_RECALL_USER, (owner,)).fetchone()
            if row is None:
                return []  # the user has no documents
            low = int(row[0]) << sql.FTS_USER_SHIFT
            high = low | _NUMBER_MASK
            if len(terms) > 1:
                counts = conn.execute(
                    "SELECT " + ", ".join([sql.COUNT_TERM] * len(terms)), [v for t in terms for v in (t, low, high)]
                ).fetchone()
                terms = lexical.pick_terms(list(zip(terms, counts, strict=True)))
            rows = conn.execute(sql.SEARCH_RECALL, (" OR ".join(terms), low, high, limit, owner)).fetchall()
        return [((r[0], r[1]), float(r[2])) for r in rows]


def _user_number(conn: Any, owner: str) -> int:
    """The user's number (the high bits of its FTS rowids), given on its first document."""
    conn.execute(sql.ADD_RECALL_USER, (owner,))
    number = int(conn.execute(sql.SELECT_RECALL_USER, (owner,)).fetchone()[0])
    if number >= _MAX_USERS:
        raise StoreError(f"a SQLite recall store holds at most {_MAX_USERS - 1} users; this is user {number}")
    return number


def _ts(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None
