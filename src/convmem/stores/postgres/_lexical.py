"""Lexical recall searched in PostgreSQL: which of the query's words to match, and the ranked match, as flows.

What comes in, what happens, what goes out:

* **The index** (migration ``0005_recall_lexical_by_owner``): one GIN index over two columns, the owner
  (``array_to_tsvector(ARRAY[md5(user_key)])``, one lexeme per user) and the document's ``tsvector``. A
  search's two conditions are then one index scan that intersects the user's postings with the words'
  postings. With a GIN over ``tsv`` alone, a common word read every user's postings (80,000 row ids for a
  question at 100k documents of 100 users, 170 ms) before the user filter kept 1%.
* **The words**: the user's text cut into words (letters and digits, so no user text is ever tsquery
  syntax), normalized by ``to_tsvector('english')`` (stemming, stop words) in the server. How many of the
  user's documents hold each lexeme is estimated from the user's newest :data:`SAMPLE` documents, scaled
  by the user's count (kept in ``recall_user_counts`` by a trigger), and
  :func:`~convmem.longterm.recall.lexical.pick_terms` keeps the rarest lexemes whose documents fit the budget: a
  word most of the user's documents hold would make the server fetch and rank most of them.
* **The ranking** is unchanged: ``ts_rank`` (the key weighs A, twice the previous turn's B; length
  normalized) over **every** lexeme of the query, computed only for the documents that match the kept ones.

Two statements: the frequencies, then the search (or the combined search of :mod:`._recall`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from ...longterm.recall import lexical
from ._ops import Flow, Query, user_key

__all__ = ["OWNER", "SAMPLE", "Terms", "lexical_search", "terms", "words"]

_WORDS = re.compile(r"[^\W_]+", re.UNICODE)
MAX_QUERY_TERMS = 64
SAMPLE = 256  # the user's newest documents that estimate how common each query word is

# The owner expression of the index (over ``recall_docs d``); a query must spell it the same to use the index.
OWNER = "array_to_tsvector(ARRAY[md5(d.user_key)])"

# Rows: (lexeme, sampled documents holding it, sample size, the user's documents; 0 when the sample is all).
FREQUENCIES = f"""
    WITH s AS MATERIALIZED (
        SELECT tsv FROM recall_docs WHERE user_key = %(user)s ORDER BY number DESC LIMIT {SAMPLE}
    ), n AS (SELECT count(*) AS n FROM s), q AS (
        SELECT lexeme, (chr(39) || replace(replace(lexeme, chr(92), repeat(chr(92), 2)), chr(39), repeat(chr(39), 2))
            || chr(39))::tsquery AS one  -- the lexeme quoted: a tsquery of it alone
        FROM unnest(to_tsvector('english', %(text)s))
    )
    SELECT q.lexeme, (SELECT count(*) FROM s WHERE s.tsv @@ q.one), n.n,
        CASE WHEN n.n < {SAMPLE} THEN n.n ELSE (SELECT docs FROM recall_user_counts WHERE user_key = %(user)s) END
    FROM q, n
"""

SEARCH = f"""
    SELECT d.session_id, d.message_id, ts_rank('{{0, 0, 0.5, 1}}', d.tsv, %(rank)s::tsquery, 1) AS score
    FROM recall_docs d
    WHERE {OWNER} @@ %(owner)s::tsquery AND d.tsv @@ %(match)s::tsquery AND d.user_key = %(user)s
    ORDER BY score DESC, d.number
    LIMIT %(limit)s
"""


def words(text: str) -> str | None:
    """The user's words (letters and digits, case folded), space-separated; None if there are none."""
    found = list(dict.fromkeys(_WORDS.findall(text.casefold())))[:MAX_QUERY_TERMS]
    return " ".join(found) or None


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


Terms = dict[str, str]


def terms(user_id: str | None, text: str) -> Flow[Terms | None]:
    """The parameters of a search for ``text``: ``rank`` (every lexeme), ``match`` (the kept ones), ``owner``.

    None when no word is left (all stop words).
    """
    key = user_key(user_id)
    rows = yield Query(FREQUENCIES, {"user": key, "text": text})
    if not rows:
        return None
    estimated = [(str(r[0]), int(r[1]) * (int(r[3]) / int(r[2]) if int(r[2]) else 0.0)) for r in rows]
    kept = lexical.pick_terms(estimated)
    return {
        "rank": " | ".join(_quote(str(r[0])) for r in rows),
        "match": " | ".join(_quote(t) for t in kept),
        "owner": _quote(hashlib.md5(key.encode()).hexdigest()),
    }


def lexical_search(user_id: str | None, text: str, limit: int) -> Flow[list[tuple[Any, ...]]]:
    """(session id, message id, score) of the user's best ``limit`` documents for ``text``."""
    params = yield from terms(user_id, text)
    if params is None:
        return []
    rows: Sequence[tuple[Any, ...]] = yield Query(SEARCH, {**params, "user": user_key(user_id), "limit": limit})
    return list(rows)
