"""Test support shipped with convmem: the store conformance suite.

A new store backend gets the whole suite from a factory and a few lines
(see :mod:`convmem.testing.conformance`)::

    from convmem.testing import AsyncStoreConformance, StoreConformance

    class TestMyStore(StoreConformance):
        def make_store(self, location):
            return MyStore(location / "data")

    class TestAsyncMyStore(AsyncStoreConformance):
        def make_store(self, location):
            return AsyncMyStore(location / "data")

It needs the test extras (``pytest``, ``hypothesis``, ``pytest-asyncio``).
"""

from __future__ import annotations

import pytest

# Before the import below: pytest rewrites asserts only in modules registered before they load.
pytest.register_assert_rewrite(
    "convmem.testing.conformance",
    "convmem.testing.conformance_async",
    "convmem.testing._longterm_tests",
    "convmem.testing._session_tests",
    "convmem.testing._write_tests",
)

from ._data import EchoSummarizer, conversations, json_values, messages, numbered, rich_messages  # noqa: E402
from .conformance import StoreConformance  # noqa: E402
from .conformance_async import AsyncStoreConformance  # noqa: E402

__all__ = [
    "AsyncStoreConformance",
    "EchoSummarizer",
    "StoreConformance",
    "conversations",
    "json_values",
    "messages",
    "numbered",
    "rich_messages",
]
