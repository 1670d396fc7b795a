"""Lexical recall: a tokenizer and an incremental in-process BM25 index.

Design:

* Postings are append-only ``array`` columns per term (document numbers and
  term frequencies), so adding a document costs O(its length) and nothing is
  ever rebuilt; a query reads them as zero-copy numpy views.
* Scoring is Okapi BM25 (k1=1.2, b=0.75) with the Lucene idf
  ``log(1 + (N - df + 0.5) / (df + 0.5))``, computed from the statistics at
  query time, so the index stays exact as it grows.
* The tokenizer folds case and Unicode (NFKC), splits on non-word
  characters, drops a short English stop list and applies a light suffix
  stemmer ("moved", "moving", "moves" -> "move"). It never raises: any user
  text, including FTS syntax such as quotes, ``NEAR`` or ``*``, is just words.

Example::

    index = BM25Index()
    index.add(tokenize("Caroline: I went to a LGBTQ support group yesterday"))
    numbers, scores = index.scores(tokenize("When did Caroline go to the support group?"))
"""

from __future__ import annotations

import math
import re
import unicodedata
from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import ConfigurationError

try:
    import numpy as np
except ImportError:  # pragma: no cover - exercised in a subprocess test
    raise ConfigurationError("recall needs numpy: pip install 'convmem[recall]'") from None

__all__ = ["MATCH_BUDGET", "STOPWORDS", "BM25Index", "bm25_idf", "context_weight", "pick_terms", "stem", "tokenize"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

_STOP_LIST = """a an and are as at be been but by did do does for from had has have he her hers him his how i if
    in into is it its me my of on or our she so than that the their them then there these they
    this to was we were what when where which who whom why will with would you your yours
    s t d ll m re ve don didn doesn isn wasn aren weren haven hasn couldn wouldn shouldn"""
STOPWORDS = frozenset(_STOP_LIST.split())

_VOWELS = frozenset("aeiou")

# About how many of a user's documents a search inside a server (SQLite FTS5, PostgreSQL tsvector) scores.
MATCH_BUDGET = 300


def pick_terms(frequencies: Sequence[tuple[str, float]], budget: float | None = None) -> list[str]:
    """The query terms a search inside a server matches: the rarest first, while their documents fit ``budget``.

    ``frequencies`` pairs each term with the number of the user's documents holding it (counted or
    estimated). A server ranks every document that matches any query term, so a word most documents hold
    (a speaker's name, "said") makes the search score most of the user's archive, in time linear in it. A
    term that would take the matched documents past ``budget`` (:data:`MATCH_BUDGET` if None) is left out
    of the match, as are the more frequent ones after it; the rarest term is always kept. A left-out term
    is one of the least informative (BM25 weighs a term by its rarity), so the documents it alone would add
    rank last; when every term fits, all are kept and the results are the unpruned ones.
    """
    limit = MATCH_BUDGET if budget is None else budget
    kept: list[str] = []
    total = 0.0
    for term, count in sorted(frequencies, key=lambda pair: (pair[1], pair[0])):
        if kept and total + count > limit:
            break
        kept.append(term)
        total += count
    return kept


def _measure(word: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in ``word``."""
    pattern = "".join(
        "v" if c in _VOWELS or (c == "y" and i and word[i - 1] not in _VOWELS) else "c" for i, c in enumerate(word)
    )
    return len(re.findall(r"v+c+", pattern))


def _has_vowel(word: str) -> bool:
    return any(c in _VOWELS or c == "y" for c in word)


def stem(word: str) -> str:
    """A light English stemmer: plurals, ``-ed``, ``-ing`` and ``-ness``, with Porter's clean-ups.

    Deliberately conservative: a wrong merge costs precision for every query,
    a missed one only for queries that use another form of the word. A final
    ``e`` goes from words of five letters or more, so "receive" and "received"
    (or "practice" and "practiced") meet at "receiv" and "practic".
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    stemmed = _stem(word)
    return stemmed[:-1] if len(stemmed) >= 5 and stemmed[-1] == "e" else stemmed


def _stem(word: str) -> str:
    if word.endswith(("ies", "ied")) and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ness") and len(word) > 6:
        return word[:-4]
    for suffix in ("ing", "ed"):
        base = word[: -len(suffix)]
        if word.endswith(suffix) and len(base) >= 2 and _has_vowel(base):
            if len(base) >= 3 and base[-1] == base[-2] and base[-1] not in "lsz" and base[-1] not in _VOWELS:
                return base[:-1]  # "running" -> "run"
            if base.endswith(("at", "bl", "iz")) or (
                _measure(base) == 1
                and len(base) >= 3
                and base[-1] not in _VOWELS
                and base[-1] not in "wxy"
                and base[-2] in _VOWELS
                and base[-3] not in _VOWELS
            ):
                return base + "e"  # "moved" -> "move", "hoping" -> "hope"
            return base
    return word


_STEMS: dict[str, str] = {}


def tokenize(text: str) -> list[str]:
    """Stemmed, case-folded word tokens of ``text`` without stop words. Never raises."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    out = []
    cache = _STEMS
    for word in _WORD.findall(folded):
        if word in STOPWORDS:
            continue
        stemmed = cache.get(word)
        if stemmed is None:
            stemmed = stem(word)
            if len(cache) < 200_000:
                cache[word] = stemmed
        out.append(stemmed)
    return out


def context_weight(weight: float, own: int, context: int, decay: float) -> float:
    """The weight of a document's context words (the previous message's), per word against one of its own.

    ``weight`` times ``(own / context) ** decay`` where the context is the longer (``decay`` 0: always
    ``weight``): a short reply after a short question takes the question's words at ``weight``, but a short
    user turn after a long assistant answer is not buried under the answer's words.
    """
    if decay <= 0 or context <= own:
        return weight
    return float(weight * (own / context) ** decay)


def bm25_idf(documents: int, holding: int) -> float:
    """The Lucene BM25 idf of a term ``holding`` of ``documents`` documents hold (0 when none does)."""
    return math.log(1.0 + (documents - holding + 0.5) / (holding + 0.5)) if holding else 0.0


class _Postings:
    __slots__ = ("docs", "tfs")

    def __init__(self) -> None:
        self.docs = array("i")
        self.tfs = array("f")


class BM25Index:
    """An append-only BM25 index over documents numbered 0, 1, 2, ... in the order they are added."""

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        if k1 <= 0 or not 0.0 <= b <= 1.0:
            raise ConfigurationError(f"BM25 needs k1 > 0 and 0 <= b <= 1, got k1={k1!r}, b={b!r}")
        self.k1, self.b = k1, b
        self._postings: dict[str, _Postings] = {}
        self._lengths = array("f")
        self._total_length = 0.0
        self._norm: tuple[tuple[int, float, float], Any] | None = None  # (documents, k1, b) -> length norms

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, tokens: Sequence[str], context: Sequence[str] = (), context_weight: float = 0.5) -> int:
        """Index one document; returns its number.

        ``context`` words (e.g. the previous message's) count ``context_weight`` times a word of
        the document itself, in its term frequencies and its length.
        """
        number = len(self._lengths)
        postings = self._postings
        counts: dict[str, float] = dict(Counter(tokens))
        if context and context_weight > 0:
            for term in context:
                counts[term] = counts.get(term, 0.0) + context_weight
        for term, tf in counts.items():
            entry = postings.get(term)
            if entry is None:
                entry = postings[term] = _Postings()
            entry.docs.append(number)
            entry.tfs.append(tf)
        length = len(tokens) + (context_weight * len(context) if context_weight > 0 else 0.0)
        self._lengths.append(length)
        self._total_length += length
        return number

    def scores(
        self, query: Sequence[str], weights: Mapping[str, float] | None = None
    ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """(document numbers, BM25 scores) of every document sharing a term with ``query``, unordered.

        ``weights`` scales the contribution of the terms it names (query expansion); others weigh 1.
        """
        totals = self.score_vector(query, weights)
        if totals is None:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        hit = np.flatnonzero(totals)
        return hit, totals[hit]

    def score_vector(self, query: Sequence[str], weights: Mapping[str, float] | None = None) -> Any:
        """BM25 scores of every document (0 where no term matches), or None if no query term is indexed."""
        matrix = self.term_scores(query, weights)
        return None if matrix is None else matrix.sum(axis=0, dtype=np.float32)

    def term_scores(self, query: Sequence[str], weights: Mapping[str, float] | None = None) -> Any:
        """A (terms, documents) matrix: each indexed query term's BM25 contribution to each document, or None.

        ``weights`` scales the contribution of the terms it names (query expansion); others weigh 1.
        """
        n = len(self._lengths)
        terms = [t for t in dict.fromkeys(query) if t in self._postings]
        if not n or not terms:
            return None
        norm = self._length_norm(n)
        out = np.zeros((len(terms), n), dtype=np.float32)
        for row, term in enumerate(terms):
            entry = self._postings[term]
            docs = np.frombuffer(entry.docs, dtype=np.int32)
            tfs = np.frombuffer(entry.tfs, dtype=np.float32)
            weight = self.idf(term) * (weights.get(term, 1.0) if weights is not None else 1.0)
            out[row, docs] = weight * tfs * (self.k1 + 1.0) / (tfs + norm[docs])
        return out

    def _length_norm(self, n: int) -> Any:
        """``k1 * (1 - b + b * length / avgdl)`` per document: three passes over the archive, so it is kept
        until a document is added (the index is append-only: its size says whether it changed)."""
        kept, key = self._norm, (n, self.k1, self.b)
        if kept is not None and kept[0] == key:
            return kept[1]
        lengths = np.frombuffer(self._lengths, dtype=np.float32)
        avgdl = self._total_length / n or 1.0
        norm = self.k1 * (1.0 - self.b + self.b * lengths / avgdl)
        norm.flags.writeable = False  # shared by every query until the next add
        self._norm = (key, norm)
        return norm

    def idf(self, term: str) -> float:
        """The Lucene BM25 idf of ``term`` (0 for a term no document has)."""
        entry = self._postings.get(term)
        return 0.0 if entry is None else bm25_idf(len(self._lengths), len(entry.docs))

    def document_frequency(self, term: str) -> int:
        entry = self._postings.get(term)
        return 0 if entry is None else len(entry.docs)
