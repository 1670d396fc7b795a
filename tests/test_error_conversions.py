"""What ``tests/test_raised_errors.py`` found outside the tree, checked where a user meets it.

Each of these left the package as a plain ``ValueError``, ``KeyError`` or an
internal exception; each is now a ``ConvmemError`` naming what is wrong (and a
``ValueError`` still where code may have caught one).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest

from convmem import Memory
from convmem.errors import ConfigurationError, InvalidMessageError, ServiceError, StoreError
from convmem.longterm.facts.model import Fact
from convmem.server.keys import open_registry
from convmem.server.tenancy import check_tenant
from convmem.session import SessionState
from convmem.stores import SQLiteFactStore
from convmem.stores._longterm_codec import block_from_json, created_at, doc_from_json, fact_from_json
from convmem.stores._writes import written_state
from convmem.stores.base import AppendRequest
from convmem.tokens import lookup_model
from convmem.tokens.calibrated import Calibration
from convmem.tokens.images import image_tiles
from convmem.tokens.models import cost

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def test_an_unknown_format_at_context_is_the_configuration_error_the_constructor_gives() -> None:
    memory = Memory(model="gpt-4o")
    memory.add({"role": "user", "content": "hi"})
    with pytest.raises(ConfigurationError, match=r"format .*'bogus'"):
        memory.context(format="bogus")  # type: ignore[arg-type]


def test_impossible_token_counts_are_invalid_usage() -> None:
    info = lookup_model("gpt-4o")
    with pytest.raises(InvalidMessageError, match="must not be negative") as negative:
        cost(info, input_tokens=-1, output_tokens=0)
    assert negative.value.field == "usage"
    with pytest.raises(InvalidMessageError, match="exceeds input_tokens"):
        cost(info, input_tokens=10, output_tokens=0, cached_input_tokens=11)
    assert isinstance(negative.value, ValueError)


def test_an_image_without_a_size_is_an_invalid_message() -> None:
    with pytest.raises(InvalidMessageError, match="image size must be positive"):
        image_tiles(0, 512)


def test_a_calibration_needs_a_positive_prior() -> None:
    with pytest.raises(ConfigurationError, match="prior must be a positive number"):
        Calibration("gpt-x", 0.0)


def test_mixing_embedders_in_one_index_is_a_configuration_error() -> None:
    pytest.importorskip("numpy")
    from convmem.longterm.recall._np import np
    from convmem.longterm.recall._partition import Partition
    from convmem.longterm.recall.fusion import rrf

    partition = Partition()
    partition.set_vectors("model-a", [], np.zeros((0, 4), dtype=np.float32))
    with pytest.raises(ConfigurationError, match="cannot mix in 'model-b'"):
        partition.missing_vectors("model-b")
    with pytest.raises(ConfigurationError, match="dimension 8 cannot join an index of dimension 4"):
        partition.set_vectors("model-a", [], np.zeros((0, 8), dtype=np.float32))
    with pytest.raises(ConfigurationError, match="1 weights for 2 rankings"):
        rrf([["a"], ["b"]], weights=[1.0])


def test_a_bad_tenant_name_and_an_unknown_key_are_the_services_own_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="a tenant name is 1 to 40 characters"):
        check_tenant("Not A Tenant")
    registry = open_registry(str(tmp_path / "keys.db"))
    try:
        with pytest.raises(ServiceError, match="key not found: 'deadbeef'") as missing:
            registry.revoke("deadbeef")
        assert (missing.value.status, missing.value.kind) == (404, "not-found")
    finally:
        registry.close()


def test_a_state_without_the_version_it_replaces_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="needs expected_version"):
        written_state(AppendRequest("s", [], state=SessionState()))


@pytest.mark.parametrize("decode", [fact_from_json, block_from_json, doc_from_json])
@pytest.mark.parametrize("text", ['{"id": "f1"}', "not json", '{"created_at": 5}', "[]"])
def test_a_long_term_row_that_does_not_decode_is_a_store_error(decode: object, text: str) -> None:
    with pytest.raises(StoreError, match="does not decode"):
        decode(text)  # type: ignore[operator]


def test_a_corrupt_fact_row_reaches_the_reader_as_a_store_error(tmp_path: Path) -> None:
    store = SQLiteFactStore(tmp_path / "facts.db")
    try:
        store.write_facts([Fact("f1", "alice", "Alice lives in Lisbon", T0, T0)], [])
        assert store.list_facts(user_id="alice")
    finally:
        store.close()
    with sqlite3.connect(tmp_path / "facts.db") as db:
        payload = json.loads(db.execute("SELECT payload FROM facts").fetchone()[0])
        payload["valid_from"] = "yesterday"
        db.execute("UPDATE facts SET payload = ?", (json.dumps(payload),))
    store = SQLiteFactStore(tmp_path / "facts.db")
    try:
        with pytest.raises(StoreError, match="a stored fact does not decode"):
            store.list_facts(user_id="alice")
    finally:
        store.close()


def test_a_recall_documents_time_that_does_not_decode_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="a stored recall document does not decode"):
        created_at("not a time")


def test_a_file_store_whose_id_index_stays_damaged_reads_its_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bucket damaged again as it is rebuilt is bypassed, never an IndexDamaged out of the store."""
    from convmem import Message
    from convmem.stores import FileStore
    from convmem.stores.files import _ids

    Memory(model="gpt-4o", store=FileStore(tmp_path), session_id="s").add(Message(role="user", content="hi", id="m1"))

    def damaged(self: object, *args: object, **kwargs: object) -> None:
        raise _ids.IndexDamaged("ids/00.txt")

    monkeypatch.setattr(_ids.IdIndex, "locate", damaged)
    again = Memory.open("s", store=FileStore(tmp_path))
    assert again.add(Message(role="user", content="hi", id="m1")).id == "m1"  # a retry, found in the lines
    assert [m.id for m in again.messages()] == ["m1"]
