"""Recall searched in PostgreSQL: pgvector HNSW for dense, the stored ``tsvector`` for lexical, as flows.

What comes in, what happens, what goes out:

* **Vectors** stay float32 ``bytea`` in ``recall_vectors`` (the portable copy:
  nothing is lost if pgvector is dropped, and a server without it reads them).
  When the ``vector`` extension is installed, :func:`vector_setup` (run at
  every open, under the migration lock when it has work) adds an
  ``embedding`` column of pgvector's type, fills it for rows written before,
  and builds one HNSW index (cosine) per model and dimension:
  ``hnsw ((embedding::vector(d)) vector_cosine_ops) WHERE model = '<model>' AND dim = d``.
  An extension installed later is picked up by the next open; a new model's
  index is made by its first write.
* **Dense search** walks that index with the user's filter, with pgvector's
  iterative index scans (``hnsw.iterative_scan = relaxed_order``, re-sorted
  after): the scan goes on until ``limit`` rows of the user (and the other
  filters) are found. ``recall_vectors`` is hash-partitioned by user (64
  partitions, each with its own HNSW graph), so the walk runs in the user's
  partition, where the user is a large share of the rows. One index over
  every user walked ~13x longer for the same recall (400 against 30 ms at
  100k vectors of 100 users); per-user partial indexes would need DDL for
  every new user (bench/README.md, "Search at scale").
* **Lexical search** is the ``tsvector`` search of :mod:`convmem.stores.postgres._lexical` (the rarest query
  words that fit a budget matched through the (owner, tsvector) GIN index, ranked with all of them).
* A search returns candidates of both, the exact cosine of every candidate,
  and how many documents the filters admit, in one snapshot transaction.

The extension's schema is found at open and written into the SQL (its types,
operator and operator class are qualified by it), so it works whatever the
connection's ``search_path``. The model name is a SQL literal in the index
predicate and the query (so the planner can match the partial index); it is
quoted here, and a model with a NUL byte is refused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ...errors import ConfigurationError
from ...longterm.recall._np import np
from ...longterm.recall.model import RecallDoc, Where
from ...longterm.recall.store import StoreHit, StoreQuery, StoreResult
from .._longterm_codec import created_at
from . import _lexical
from ._ops import Flow, Query, user_key

__all__ = ["EF_SEARCH", "save_vectors", "search", "vector_setup"]

EF_SEARCH = 100  # candidates kept per step of the HNSW walk (pgvector's default is 40)

DOC_COLUMNS = "d.number, d.session_id, d.message_id, d.seq, d.role, d.created_at, d.text, d.key, d.context"

FIND_EXTENSION = "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'"
HAS_EMBEDDING = (
    "SELECT 1 FROM information_schema.columns "
    "WHERE table_schema = current_schema() AND table_name = 'recall_vectors' AND column_name = 'embedding'"
)
MODELS = "SELECT DISTINCT model, dim FROM recall_vectors"
INDEXES = "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'recall_vectors'"
UNFILLED = "SELECT number, model, user_key, vector FROM recall_vectors WHERE embedding IS NULL LIMIT 1000"


def literal(text: str) -> str:
    """``text`` as a SQL string literal (standard_conforming_strings, on by default since PostgreSQL 9.1)."""
    if "\x00" in text:
        raise ConfigurationError(f"model name {text!r} holds a NUL byte")
    return "'" + text.replace("'", "''") + "'"


def ident(schema: str) -> str:
    return '"' + schema.replace('"', '""') + '"'


def index_name(model: str, dim: int) -> str:
    return f"recall_hnsw_{hashlib.sha1(model.encode()).hexdigest()[:16]}_{dim}"


def create_index(vs: str, model: str, dim: int) -> str:
    typ = f"{ident(vs)}.vector({dim})"
    return (
        f"CREATE INDEX IF NOT EXISTS {index_name(model, dim)} ON recall_vectors "
        f"USING hnsw ((embedding::{typ}) {ident(vs)}.vector_cosine_ops) WHERE model = {literal(model)} AND dim = {dim}"
    )


def texts(matrix: Any) -> list[str]:
    """Each row in pgvector's text form. psycopg dumps a list of floats one Python call per float (7 s for
    1,000 x 384); these strings cost a tenth of that, and parse back to the same float32 values."""
    rows: list[list[float]] = np.asarray(matrix, dtype=np.float32).reshape(-1, np.shape(matrix)[-1]).tolist()
    return ["[" + ",".join(map(str, row)) + "]" for row in rows]


def fill(vs: str) -> str:
    """Set the embedding of the rows ``(number, model, user key)`` from vectors in text form."""
    return (
        f"UPDATE recall_vectors r SET embedding = u.e::{ident(vs)}.vector "
        "FROM unnest(%(numbers)s::bigint[], %(models)s::text[], %(users)s::text[], %(vectors)s::text[]) "
        "AS u (number, model, user_key, e) "
        "WHERE r.number = u.number AND r.model = u.model AND r.user_key = u.user_key"
    )


def vector_setup(vs: str | None, lock: Query) -> Flow[None]:
    """Add pgvector's column, values and indexes when the extension is there and they are not (see the docstring).

    An open checks the column and that some HNSW index exists (two catalog reads); with none (the extension
    is new, or the indexes were dropped for a bulk import), it builds one per model found.
    """
    if vs is None:
        return
    has_column = bool((yield Query(HAS_EMBEDDING)))
    indexes = {n for (n,) in (yield Query(INDEXES)) if n.startswith("recall_hnsw_")}
    if has_column and indexes:
        return  # set up already; listing the models would read every vector row at every open
    models = [(m, d) for m, d in (yield Query(MODELS))]
    if has_column and not models:
        return
    yield lock
    yield Query(f"ALTER TABLE recall_vectors ADD COLUMN IF NOT EXISTS embedding {ident(vs)}.vector")
    while rows := (yield Query(UNFILLED)):
        params = {
            "vectors": [texts(np.frombuffer(bytes(r[3]), dtype=np.float32))[0] for r in rows],
            "numbers": [r[0] for r in rows],
            "models": [r[1] for r in rows],
            "users": [r[2] for r in rows],
        }
        yield Query(fill(vs), params)
    for model, dim in (yield Query(MODELS)):
        yield Query(create_index(vs, model, dim))


def upsert(vs: str) -> str:
    """Like ``UPSERT_BYTES``, with pgvector's copy of each vector (given in its text form)."""
    return f"""
        INSERT INTO recall_vectors (number, user_key, model, dim, vector, embedding)
        SELECT d.number, d.user_key, %(model)s, %(dim)s, u.v, u.e::{ident(vs)}.vector
        FROM unnest(%(users)s::text[], %(sessions)s::text[], %(ids)s::text[], %(blobs)s::bytea[], %(vectors)s::text[])
            AS u (uk, s, m, v, e)
        JOIN recall_docs d ON d.user_key = u.uk AND d.session_id = u.s AND d.message_id = u.m
        ON CONFLICT (user_key, number, model) DO UPDATE
            SET dim = excluded.dim, vector = excluded.vector, embedding = excluded.embedding
    """


def save_vectors(vs: str | None, model: str, docs: Sequence[RecallDoc], matrix: Any, known: set[str]) -> Flow[None]:
    """Write vectors (and, with pgvector, make the model's index on its first write; ``known``: indexes seen)."""
    dim = int(matrix.shape[1])
    params: dict[str, Any] = {
        "model": model,
        "dim": dim,
        "users": [user_key(d.user_id) for d in docs],
        "sessions": [d.session_id for d in docs],
        "ids": [d.message_id for d in docs],
        "blobs": [matrix[i].tobytes() for i in range(len(docs))],
    }
    if vs is None:
        yield Query(UPSERT_BYTES, params)
        return
    name = index_name(model, dim)
    if name not in known:
        yield Query(LOCK_INDEXES)
        yield Query(create_index(vs, model, dim))
        known.add(name)
    yield Query(upsert(vs), {**params, "vectors": texts(matrix)})


# A vector is stored against its document, found by (user, session, message id); none found, nothing stored.
UPSERT_BYTES = """
    INSERT INTO recall_vectors (number, user_key, model, dim, vector)
    SELECT d.number, d.user_key, %(model)s, %(dim)s, u.v
    FROM unnest(%(users)s::text[], %(sessions)s::text[], %(ids)s::text[], %(blobs)s::bytea[]) AS u (uk, s, m, v)
    JOIN recall_docs d ON d.user_key = u.uk AND d.session_id = u.s AND d.message_id = u.m
    ON CONFLICT (user_key, number, model) DO UPDATE SET dim = excluded.dim, vector = excluded.vector
"""
LOCK_INDEXES = "SELECT pg_advisory_xact_lock(hashtext('convmem.recall_index:' || current_schema()))"


# -- search ----------------------------------------------------------------------------------------
def where_sql(where: Where, params: dict[str, Any]) -> str:
    """The filters as SQL over ``recall_docs d`` (values added to ``params``)."""
    parts = []
    if where.sessions is not None:
        params["sessions"] = list(where.sessions)
        parts.append("d.session_id = ANY(%(sessions)s::text[])")
    if where.since is not None:
        params["since"] = where.since.timestamp()
        parts.append("d.created_ts >= %(since)s")
    if where.until is not None:
        params["until"] = where.until.timestamp()
        parts.append("d.created_ts < %(until)s")
    if where.roles is not None:
        params["roles"] = list(where.roles)
        parts.append("d.role = ANY(%(roles)s::text[])")
    if where.exclude_session is not None:
        params["xs"], params["xf"] = where.exclude_session, where.exclude_from or 0
        parts.append("NOT (d.session_id = %(xs)s AND d.seq >= %(xf)s)")
    return "".join(f" AND {p}" for p in parts)


def _distance(vs: str, dim: int) -> str:
    typ = f"{ident(vs)}.vector({dim})"
    return f"v.embedding::{typ} OPERATOR({ident(vs)}.<=>) %(q)s::{typ}"


KEPT_COUNT = "coalesce((SELECT docs FROM recall_user_counts WHERE user_key = %(user)s), 0)"
# The recall block leaves out the live window on every turn: that filter alone admits the kept count less
# the window's rows, read through the (user, session) index instead of counting all of the user's rows.
WINDOW_ROWS = (
    "(SELECT count(*) FROM recall_docs d WHERE d.user_key = %(user)s AND d.session_id = %(xs)s AND d.seq >= %(xf)s)"
)


def admitted_sql(filters: str, window_only: bool) -> str:
    """How many of the user's documents the filters admit."""
    if not filters:  # every document of the user: the kept count, not a scan of the user's rows
        return f"SELECT {KEPT_COUNT} AS n"
    if window_only:
        return f"SELECT {KEPT_COUNT} - {WINDOW_ROWS} AS n"
    return f"SELECT count(*) AS n FROM recall_docs d WHERE d.user_key = %(user)s{filters}"


def search_sql(vs: str | None, model: str | None, dim: int, lexical: bool, filters: str, window_only: bool) -> str:
    """One statement: both retrievers' candidates, the cosine of each, their documents, the admitted count.

    Rows: the document columns, its lexical score, its distance if the walk found it, its cosine, and
    the admitted count; a last row holds only the count. The walk is a materialized step of its own
    (the HNSW index scan, stopped at ``limit``), which the planner cannot merge with the rest.
    """
    # Only fusion needs the admitted count; a single retriever's ranking does not pay for it.
    both = lexical and vs is not None and model is not None
    count = admitted_sql(filters, window_only) if both else "SELECT 0 AS n"
    ctes = [f"adm AS ({count})"]
    if lexical:
        ctes.append(
            f"""lex AS (
            SELECT d.number, ts_rank('{{0, 0, 0.5, 1}}', d.tsv, %(rank)s::tsquery, 1) AS score
            FROM recall_docs d
            WHERE {_lexical.OWNER} @@ %(owner)s::tsquery AND d.tsv @@ %(match)s::tsquery
            AND d.user_key = %(user)s{filters}
            ORDER BY score DESC, d.number LIMIT %(limit)s)"""
        )
    else:
        ctes.append("lex AS (SELECT NULL::bigint AS number, NULL::real AS score WHERE false)")
    cosine = distance = "NULL::double precision"
    joins, numbers = "", "SELECT number FROM lex"
    if vs is not None and model is not None:
        scope = f"v.model = {literal(model)} AND v.dim = {dim} AND v.user_key = %(user)s"
        ctes.append(
            f"""knn AS MATERIALIZED (
            SELECT v.number, {_distance(vs, dim)} AS distance
            FROM recall_vectors v JOIN recall_docs d ON d.number = v.number
            WHERE {scope} AND d.user_key = %(user)s{filters}
            ORDER BY distance LIMIT %(limit)s)"""
        )
        ctes.append(
            f"""cos AS (SELECT v.number, 1 - ({_distance(vs, dim)}) AS cosine FROM recall_vectors v
            WHERE {scope} AND v.number IN (SELECT number FROM lex EXCEPT SELECT number FROM knn))"""
        )
        cosine, distance = "coalesce(1 - knn.distance, cos.cosine)", "knn.distance"
        joins = "LEFT JOIN knn ON knn.number = c.number LEFT JOIN cos ON cos.number = c.number"
        numbers = "SELECT number FROM lex UNION SELECT number FROM knn"
    nulls = ", ".join(["NULL"] * 12)
    return f"""
        WITH {", ".join(ctes)}, c AS ({numbers})
        SELECT {DOC_COLUMNS}, lex.score::double precision, {distance}, {cosine}, adm.n
        FROM c JOIN recall_docs d ON d.number = c.number AND d.user_key = %(user)s
        LEFT JOIN lex ON lex.number = c.number {joins}
        CROSS JOIN adm
        UNION ALL SELECT {nulls}, adm.n FROM adm
    """


MISSING = f"""
    SELECT {DOC_COLUMNS} FROM recall_docs d WHERE d.user_key = %(user)s
    AND NOT EXISTS (SELECT 1 FROM recall_vectors v WHERE v.number = d.number AND v.model = %(model)s)
    ORDER BY d.number
"""
SAMPLE = (
    "SELECT dim, vector FROM recall_vectors WHERE user_key = %(user)s AND model = %(model)s "
    "ORDER BY number DESC LIMIT %(n)s"
)
LAST = f"""
    SELECT {DOC_COLUMNS} FROM recall_docs d WHERE d.user_key = %(user)s AND d.session_id = %(session)s
    ORDER BY d.seq DESC, d.number DESC LIMIT 1
"""
COUNT = f"SELECT {KEPT_COUNT}"


def doc_of(row: Sequence[Any], user_id: str | None) -> RecallDoc:
    _, session, mid, seq, role, created, text, key, context = row
    return RecallDoc(mid, session, user_id, seq, role, text, created_at(created), key, context)


def search(vs: str | None, query: StoreQuery, words: str | None) -> Flow[StoreResult]:
    """Both retrievers' candidates for ``query`` (``words``: its words, None for no lexical search)."""
    params: dict[str, Any] = {"user": user_key(query.user_id), "limit": query.limit}
    if words is not None:
        terms = yield from _lexical.terms(query.user_id, words)
        if terms is not None:
            params.update(terms)
        else:
            words = None  # only stop words: no lexical candidates
    filters = where_sql(query.where, params)
    dense = query.vector is not None and query.model is not None and vs is not None
    dim = len(query.vector) if dense else 0
    if dense:
        params["q"] = texts(query.vector)[0]
    w = query.where
    # Derived from the dataclass, so a filter added to Where later can never be taken for "window only".
    window_only = w.exclude_session is not None and replace(w, exclude_session=None, exclude_from=None) == Where()
    sql = search_sql(vs, query.model if dense else None, dim, words is not None, filters, window_only)
    rows = yield Query(sql, params)
    admitted = int(rows[-1][-1])  # the last row carries only the count
    found = [r for r in rows if r[0] is not None]
    lexical = sorted((r for r in found if r[9] is not None), key=lambda r: (-r[9], r[0]))
    walked = sorted((r for r in found if r[10] is not None), key=lambda r: (r[10], r[0]))
    lex_rank = {r[0]: i for i, r in enumerate(lexical, start=1)}
    den_rank = {r[0]: i for i, r in enumerate(walked, start=1)}
    by_number = {r[0]: r for r in found}
    hits = []
    for number in dict.fromkeys([r[0] for r in lexical] + [r[0] for r in walked]):
        r = by_number[number]
        score = float(r[9]) if r[9] is not None else None
        cosine = float(r[11]) if r[11] is not None else None
        hits.append(StoreHit(doc_of(r[:9], query.user_id), score, lex_rank.get(number), cosine, den_rank.get(number)))
    return StoreResult(hits, admitted)
