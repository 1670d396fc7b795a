"""Recall searched by RediSearch: the indexes over the document hashes, and the search flow.

What comes in, what happens, what goes out:

* **Indexes** (``FT.CREATE ... ON HASH PREFIX 1 P rd:``, the document hashes of
  :mod:`convmem.stores.redis._recall`): ``P ft:lex`` with the key (TEXT,
  weight 2) and the previous turn (TEXT, weight 1), English stemming, no stop
  list of its own (the query drops convmem's), and one ``P ft:v:<model tag>:<dim>``
  per model with an HNSW vector field (cosine). Both carry the filters: TAG
  ``u`` (user), ``s`` (session), ``r`` (role), NUMERIC ``t`` (time) and ``q``
  (seq). The lexical index is made when the store opens; a model's vector
  index at its first write. An index made over existing hashes fills in the
  background, so the store says it searches only once the lexical one is full.
* **Search**, each ``FT.SEARCH`` scoped by ``@u:{tag}`` and the filters, every
  word a plain term (letters and digits only, so no user text is query
  syntax): first one pipeline counts what the filters admit and how many of
  those documents hold each query word; then one matches the rarest words
  whose documents fit ``MATCH_BUDGET`` (as the SQL stores do) and runs ``KNN``
  over the vector (RediSearch picks brute force over the user's documents or
  a filtered HNSW walk); then the vectors of the lexical candidates, to give
  each its exact cosine. The candidates are ranked here with convmem's BM25
  (its tokens, the previous turn's words at the context weight, the user's
  counts for the idf): RediSearch's own ``BM25STD`` gave every term the same
  idf and scored the user tag as a term (``EXPLAINSCORE``, RediSearch 2.10),
  so short documents that held a speaker's name came first.
* A hit is kept only if its key is a document hash of this store and its
  JSON names the asked user: no result can cross users, nor stores whose
  prefixes nest.

Why RediSearch and not Redis 8's vector sets (``VADD``/``VSIM``): a vector
set per user would isolate users by key and needs no module, but it has no
lexical search, so RediSearch would be needed beside it anyway, and RediSearch
serves both retrievers, with one filter language, over the hashes the
fallback already reads. Vector sets also quantize to 8 bits by default.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ...longterm.recall._np import np
from ...longterm.recall.lexical import STOPWORDS, bm25_idf, context_weight, pick_terms, tokenize
from ...longterm.recall.model import RecallDoc, Where
from ...longterm.recall.ranking import DEFAULT_TUNING
from ...longterm.recall.store import StoreHit, StoreQuery, StoreResult
from .._longterm_codec import doc_from_json
from ._ops import Cmd, Flow, Keys, Pipe
from ._recall import tag, user_tag, vector_field

__all__ = ["Where", "ensure_lexical", "ensure_vectors", "filters", "lexical_index", "ready", "results", "search"]

EF_RUNTIME = 100  # candidates kept per step of the HNSW walk
MAX_TERMS = 64
MAX_CANDIDATES = 1_000  # lexical candidates fetched and ranked at most (the rarest word alone may hold more)
_WORDS = re.compile(r"[^\W_]+", re.UNICODE)
_FILTERS = ["u", "TAG", "s", "TAG", "r", "TAG", "t", "NUMERIC", "q", "NUMERIC", "SORTABLE"]


def lexical_index(keys: Keys) -> str:
    return keys.prefix + "ft:lex"


def vector_index(keys: Keys, model: str, dim: int) -> str:
    return f"{keys.prefix}ft:v:{tag(model)}:{dim}"


def _create(name: str, keys: Keys, options: Sequence[Any], schema: Sequence[Any]) -> Flow[None]:
    args = ("FT.CREATE", name, "ON", "HASH", "PREFIX", 1, keys.prefix + "rd:", *options, "SCHEMA", *schema)
    yield Cmd(args, tolerate="already exists")  # another process made it first: the same index


def ensure_lexical(keys: Keys) -> Flow[None]:
    schema = [*_FILTERS, "k", "TEXT", "WEIGHT", 2.0, "c", "TEXT", "WEIGHT", 1.0]
    yield from _create(lexical_index(keys), keys, ["LANGUAGE", "english", "STOPWORDS", 0], schema)


def ensure_vectors(keys: Keys, model: str, dim: int) -> Flow[None]:
    vector = ["HNSW", 10, "TYPE", "FLOAT32", "DIM", dim, "DISTANCE_METRIC", "COSINE", "M", 16]
    vector += ["EF_CONSTRUCTION", 200]
    schema = [*_FILTERS, vector_field(model), "AS", "v", "VECTOR", *vector]
    yield from _create(vector_index(keys, model, dim), keys, [], schema)


def ready(keys: Keys) -> Flow[bool]:
    """Whether the lexical index holds every document hash (it fills in the background when made late)."""
    info = yield Cmd(("FT.INFO", lexical_index(keys)))
    fields = info if isinstance(info, dict) else dict(zip(info[::2], info[1::2], strict=False))
    return float(fields.get(b"percent_indexed", b"0")) >= 1.0 and int(fields.get(b"indexing", 0)) == 0


def filters(user_id: str | None, where: Where) -> str:
    """The user's scope and the filters, in RediSearch query syntax (every value a hex tag or a number)."""
    parts = [f"@u:{{{user_tag(user_id)}}}"]
    if where.sessions is not None:
        sessions = "|".join(tag(s) for s in where.sessions) or "-"  # '-' is no session's tag: nothing matches
        parts.append(f"@s:{{{sessions}}}")
    if where.roles is not None:
        parts.append(f"@r:{{{'|'.join(tag(r) for r in where.roles) or '-'}}}")
    if where.since is not None or where.until is not None:
        low = repr(where.since.timestamp()) if where.since is not None else "-inf"
        high = f"({where.until.timestamp()!r}" if where.until is not None else "+inf"
        parts.append(f"@t:[{low} {high}]")
    if where.exclude_session is not None:
        window = f"@s:{{{tag(where.exclude_session)}}} @q:[{where.exclude_from or 0} +inf]"
        parts.append(f"-({window})")
    return " ".join(parts)


def words(text: str) -> list[str]:
    """The query's distinct words, stop words left out, as plain RediSearch terms."""
    return [w for w in dict.fromkeys(_WORDS.findall(text.casefold())) if w not in STOPWORDS][:MAX_TERMS]


def bm25(rows: Sequence[dict[bytes, bytes]], counts: dict[str, int], admitted: int) -> list[float]:
    """convmem's BM25 score of each candidate (its ``w`` field, else its ``k`` and ``c`` texts tokenized here)
    for the query words ``counts`` (word -> the user's documents holding it), as the in-process index gives
    it with the default tuning; the average length is the candidates'."""
    tuning = DEFAULT_TUNING
    idf: dict[str, float] = {}
    for word, held in counts.items():
        rarity = bm25_idf(admitted, held)
        for term in tokenize(word):
            idf[term] = max(idf.get(term, 0.0), rarity)
    frequencies: list[list[float]] = []  # per candidate, the frequency of each query term (in idf's order)
    lengths: list[float] = []
    for fields in rows:
        stored = fields.get(b"w")
        if stored is not None:
            own_text, _, context_text = stored.decode().partition("|")
            own, context = own_text.split(), context_text.split()
        else:  # saved before the tokens were kept
            own = tokenize(fields.get(b"k", b"").decode(errors="replace"))
            context = tokenize(fields.get(b"c", b"").decode(errors="replace"))
        # A previous-turn word weighs this much against a word of the document itself (as RecallIndex indexes it).
        weight = context_weight(tuning.context_weight, len(own), len(context), tuning.context_decay)
        frequencies.append([own.count(term) + weight * context.count(term) for term in idf])
        lengths.append(len(own) + weight * len(context))
    average = (sum(lengths) / len(lengths)) if lengths else 1.0
    k1, b = tuning.k1, tuning.b
    idfs = list(idf.values())
    scores = []
    for tfs, length in zip(frequencies, lengths, strict=True):
        norm = k1 * (1.0 - b + b * length / (average or 1.0))
        scores.append(sum(w * tf * (k1 + 1.0) / (tf + norm) for w, tf in zip(idfs, tfs, strict=True) if tf))
    return scores


Row = tuple[bytes, float | None, dict[bytes, bytes]]


def results(reply: Any, scored: bool) -> tuple[int, list[Row]]:
    """The total and the (key, score, fields) rows of an ``FT.SEARCH`` reply, RESP3 map or RESP2 array."""
    if isinstance(reply, dict):
        rows = [
            (r[b"id"], float(r[b"score"]) if scored else None, dict(r.get(b"extra_attributes") or {}))
            for r in reply[b"results"]
        ]
        return int(reply[b"total_results"]), rows
    out = []
    step = 3 if scored else 2
    for i in range(1, len(reply), step):
        fields = reply[i + step - 1]
        score = float(reply[i + 1]) if scored else None
        out.append((reply[i], score, dict(zip(fields[::2], fields[1::2], strict=True))))
    return int(reply[0]), out


def search(keys: Keys, query: StoreQuery) -> Flow[StoreResult]:
    scope = filters(query.user_id, query.where)
    terms = words(query.text) if query.text is not None else []
    both = bool(terms) and query.vector is not None and query.model is not None
    index = lexical_index(keys)
    admitted, held, chosen = 0, dict[str, int](), list[str]()
    if terms:
        replies = yield Pipe(
            [
                ("FT.SEARCH", index, scope, "LIMIT", 0, 0, "DIALECT", 2),
                *(("FT.SEARCH", index, f"{scope} {word}", "LIMIT", 0, 0, "DIALECT", 2) for word in terms),
            ],
            atomic=False,
        )
        admitted = results(replies[0], False)[0]
        held = {word: results(reply, False)[0] for word, reply in zip(terms, replies[1:], strict=True)}
        chosen = pick_terms([(word, n) for word, n in held.items() if n])
    calls: list[tuple[Any, ...]] = []
    if chosen:
        fetch = min(MAX_CANDIDATES, max(query.limit, sum(held[word] for word in chosen)))
        match = f"{scope} ({'|'.join(chosen)})"
        calls.append(("FT.SEARCH", index, match, "RETURN", 3, "w", "k", "c", "LIMIT", 0, fetch, "DIALECT", 2))
    vector = None
    if query.vector is not None and query.model is not None:
        vector = np.ascontiguousarray(query.vector, dtype=np.float32)
        knn = f"({scope})=>[KNN $k @v $vec EF_RUNTIME $ef AS dist]"
        calls.append(
            (
                "FT.SEARCH",
                vector_index(keys, query.model, len(vector)),
                knn,
                "PARAMS",
                6,
                "k",
                query.limit,
                "vec",
                vector.tobytes(),
                "ef",
                EF_RUNTIME,
                "SORTBY",
                "dist",
                "RETURN",
                2,
                "j",
                "dist",
                "LIMIT",
                0,
                query.limit,
                "DIALECT",
                2,
            )
        )
    replies = (yield Pipe(calls, atomic=False)) if calls else []
    candidates = [row for row in results(replies[0], False)[1] if _is_doc(keys, row[0])] if chosen else []
    dense = results(replies[-1], False)[1] if vector is not None else []
    dense.sort(key=lambda row: (float(row[2].get(b"dist", 2.0)), len(row[0]), row[0]))  # ties: the older first
    docs: dict[bytes, RecallDoc] = {}
    for key, _, fields in dense:
        doc = _own(keys, key, fields.get(b"j"), query.user_id)
        if doc is not None:
            docs[key] = doc
    cosines = {k: 1.0 - float(f[b"dist"]) for k, _, f in dense if k in docs}
    scores = bm25([fields for _, _, fields in candidates], held, admitted)
    top = sorted(
        zip([key for key, _, _ in candidates], scores, strict=True),
        key=lambda pair: (-pair[1], len(pair[0]), pair[0]),  # ties: the older first
    )[: query.limit]
    # The documents of the lexical hits, and their vectors to give each its exact cosine, in one round trip.
    unread = [key for key, _ in top if key not in docs]
    if unread:
        wanted = ["j", vector_field(query.model)] if vector is not None and query.model is not None else ["j"]
        found = yield Pipe([("HMGET", key, *wanted) for key in unread], atomic=False)
        for key, values in zip(unread, found, strict=True):
            doc = _own(keys, key, values[0], query.user_id)
            if doc is None:
                continue
            docs[key] = doc
            blob = values[1] if len(values) > 1 else None
            if blob is not None and vector is not None and len(blob) == 4 * len(vector):
                cosines[key] = float(np.frombuffer(blob, dtype=np.float32) @ vector)
    scored = [(key, score) for key, score in top if key in docs]
    lex_rank = {k: (r, score) for r, (k, score) in enumerate(scored, start=1)}
    den_rank = {k: r for r, (k, _, _) in enumerate([x for x in dense if x[0] in docs], start=1)}
    hits = [
        StoreHit(
            docs[k],
            lex_rank[k][1] if k in lex_rank else None,
            lex_rank[k][0] if k in lex_rank else None,
            cosines.get(k),
            den_rank.get(k),
        )
        for k in dict.fromkeys([*lex_rank, *den_rank])
    ]
    return StoreResult(hits, admitted if both else 0)


def _is_doc(keys: Keys, key: bytes) -> bool:
    """Whether ``key`` names a document hash of this store (and not of a store whose prefix nests in it)."""
    name = key.decode(errors="replace")
    return name.startswith(keys.prefix + "rd:") and name[len(keys.prefix) + 3 :].isdigit()


def _own(keys: Keys, key: bytes, raw: bytes | None, user_id: str | None) -> RecallDoc | None:
    """The document of a hit, if the hash is one of this store's and holds the asked user's document."""
    if raw is None or not _is_doc(keys, key):
        return None
    doc = doc_from_json(raw)
    return doc if doc.user_id == user_id else None
