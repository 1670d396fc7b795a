"""Recall over the archive: a document per archived message, searched lexically, densely or both.

``model`` holds the contract's types every index and store speaks (:class:`RecallDoc`,
:class:`Where`, ``DocRef``); ``keys`` makes the documents, ``lexical`` is BM25, ``ranking``
the ranking steps, ``temporal`` the dates a query names, ``embedders`` the dense side,
``fusion`` joins the two, ``hits`` explains each result; ``index`` (:class:`RecallIndex`)
searches in process over a user's ``_partition``; ``store`` is the contract of a store that
keeps (and possibly searches) the documents; ``block`` renders the top hits into the context,
``tool`` offers them to the model on demand.

Most of it needs numpy (``pip install 'convmem[recall]'``), so every name is imported on
first use (``model`` does not: a store imports it without numpy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy

if TYPE_CHECKING:
    from .block import RecallBlock
    from .embedders import (
        AsyncEmbedder,
        E5Embedder,
        Embedder,
        HashingEmbedder,
        OpenAIEmbedder,
        SentenceTransformerEmbedder,
    )
    from .hits import Dropped, RecallHit
    from .index import Keys, Mode, RecallIndex
    from .model import DocRef, RecallDoc, Where
    from .ranking import Tuning
    from .store import LexicalRecallStore, RecallStore, SearchingRecallStore
    from .tool import RecallTool

_LAZY = {
    "AsyncEmbedder": "embedders",
    "E5Embedder": "embedders",
    "Embedder": "embedders",
    "HashingEmbedder": "embedders",
    "OpenAIEmbedder": "embedders",
    "SentenceTransformerEmbedder": "embedders",
    "Dropped": "hits",
    "RecallHit": "hits",
    "Keys": "index",
    "Mode": "index",
    "DocRef": "model",
    "RecallDoc": "model",
    "Where": "model",
    "RecallIndex": "index",
    "RecallBlock": "block",
    "RecallTool": "tool",
    "Tuning": "ranking",
    "LexicalRecallStore": "store",
    "RecallStore": "store",
    "SearchingRecallStore": "store",
}

__all__ = [
    "AsyncEmbedder",
    "DocRef",
    "Dropped",
    "E5Embedder",
    "Embedder",
    "HashingEmbedder",
    "Keys",
    "LexicalRecallStore",
    "Mode",
    "OpenAIEmbedder",
    "RecallBlock",
    "RecallDoc",
    "RecallHit",
    "RecallIndex",
    "RecallStore",
    "RecallTool",
    "SearchingRecallStore",
    "SentenceTransformerEmbedder",
    "Tuning",
    "Where",
]

__getattr__ = lazy(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(__all__)
