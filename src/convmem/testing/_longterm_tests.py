"""The conformance tests of a store's long-term memory: ``store.facts()``, ``store.blocks()``, ``store.recall()``.

Mixed into :class:`~convmem.testing.StoreConformance` (and, for the facts,
:class:`~convmem.testing.AsyncStoreConformance`); skipped for a store that
keeps no long-term memory (:class:`~convmem.stores.base.LongTermStores`).
What they check on every backend the same way: the long-term stores a
session store gives live in the same place as its sessions (two calls, and a
reopened store, see the same data; a backend's per-kind class over the same
store, named by :meth:`LongTermTests.per_kind`, sees it too), they keep each
user apart, and they close with the store (closing one of them leaves the
session store open).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ..errors import StoreError
from ..longterm.blocks.store import BlockRecord
from ..longterm.facts.model import Fact
from ..stores.base import AppendRequest, LongTermStores
from ._data import numbered

__all__ = ["LongTermTests"]

_WHEN = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)


def fact(fact_id: str, user_id: str | None, text: str) -> Fact:
    return Fact(fact_id, user_id, text, _WHEN, _WHEN, subject=f"{user_id}.home")


def recall_doc(user_id: str | None, message_id: str, text: str) -> Any:
    from ..longterm.recall import RecallDoc

    return RecallDoc(message_id, "s1", user_id, 0, "user", text, _WHEN, text)


class LongTermTests:
    """Long-term memory from the session store; see the module docstring."""

    persistent: ClassVar[bool]
    #: Whether closing the store closes a connection its long-term stores use (SQLite, PostgreSQL): then they
    #: fail with a StoreError once it is closed. Stores with nothing to close, or whose client reconnects on
    #: its own (Redis), leave it False.
    releases_connection: ClassVar[bool] = False

    def reopen(self, store: Any, location: Path) -> Any:
        raise NotImplementedError

    def per_kind(self, store: Any, kind: str) -> Any:
        """The backend's own class of ``kind`` (``facts``, ``blocks``, ``recall``) over ``store``; None: no check."""
        return None

    def _long_term(self, store: Any) -> Any:
        if not isinstance(store, LongTermStores):
            pytest.skip("the store keeps no long-term memory")
        return store

    def test_facts_live_with_the_sessions_and_keep_users_apart(self, store: Any, tmp_path: Path) -> None:
        store = self._long_term(store)
        store.facts().write_facts([fact("f1", "alice", "lives in Lyon"), fact("f2", "bob", "lives in Oslo")], [])
        assert [f.text for f in store.facts().list_facts(user_id="alice")] == ["lives in Lyon"]
        assert [f.text for f in store.facts().list_facts(user_id="bob")] == ["lives in Oslo"]
        assert store.facts().list_facts(user_id=None) == []
        own = self.per_kind(store, "facts")
        if own is not None:
            assert [f.id for f in own.list_facts(user_id="alice")] == ["f1"]
            own.write_facts([fact("f3", "alice", "has a cat")], [])
            assert {f.id for f in store.facts().list_facts(user_id="alice")} == {"f1", "f3"}
        store.append(AppendRequest("s1", numbered(1), user_id="alice"))  # sessions and facts side by side
        store = self.reopen(store, tmp_path)
        assert "f1" in {f.id for f in store.facts().list_facts(user_id="alice")}
        assert [m.seq for m in store.messages("s1", user_id="alice")] == [0]

    def test_blocks_live_with_the_sessions_and_keep_scopes_apart(self, store: Any, tmp_path: Path) -> None:
        store = self._long_term(store)
        saved = store.blocks().save_block(BlockRecord("alice", "persona", "terse", 0), expected_version=0)
        assert saved.version == 1
        found = store.blocks().load_block("alice", "persona")
        assert found is not None
        assert found.value == "terse"
        assert store.blocks().load_block("bob", "persona") is None
        own = self.per_kind(store, "blocks")
        if own is not None:
            seen = own.load_block("alice", "persona")
            assert seen is not None
            assert seen.value == "terse"
        store = self.reopen(store, tmp_path)
        assert [b.name for b in store.blocks().list_blocks("alice")] == ["persona"]

    def test_recall_documents_live_with_the_sessions_and_keep_users_apart(self, store: Any, tmp_path: Path) -> None:
        store = self._long_term(store)
        store.recall().save_docs([recall_doc("alice", "m1", "the invoice is due"), recall_doc("bob", "m1", "hi")])
        assert [d.text for d in store.recall().load_docs("alice")] == ["the invoice is due"]
        assert [d.text for d in store.recall().load_docs("bob")] == ["hi"]
        numpy = pytest.importorskip("numpy")
        alice = store.recall().load_docs("alice")
        store.recall().save_vectors("test-model", alice, numpy.array([[0.6, 0.8, 0.0]], dtype=numpy.float32))
        refs, vectors = store.recall().load_vectors("alice", "test-model")
        assert refs == [("s1", "m1")]
        assert numpy.allclose(vectors, [[0.6, 0.8, 0.0]])
        assert store.recall().load_vectors("bob", "test-model")[0] == []
        own = self.per_kind(store, "recall")
        if own is not None:
            assert [d.message_id for d in own.load_docs("alice")] == ["m1"]
            assert own.load_vectors("alice", "test-model")[0] == [("s1", "m1")]
        store = self.reopen(store, tmp_path)
        assert [d.message_id for d in store.recall().load_docs("alice")] == ["m1"]

    def test_long_term_stores_close_with_the_store(self, store: Any) -> None:
        store = self._long_term(store)
        facts = store.facts()
        facts.write_facts([fact("f1", "alice", "lives in Lyon")], [])
        facts.close()  # the session store's connection is not the fact store's to close
        store.append(AppendRequest("s1", numbered(1), user_id="alice"))
        assert [f.id for f in store.facts().list_facts(user_id="alice")] == ["f1"]
        store.close()
        if self.releases_connection:
            with pytest.raises(StoreError):
                facts.list_facts(user_id="alice")
