"""The fact data model: validation, half-open validity, normalization."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from convmem.errors import InvalidFactError
from convmem.longterm.facts.model import Fact, FactAdd, FactInvalidate, FactUpdate, normalize

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def test_validity_is_half_open() -> None:
    fact = Fact("f1", "alice", "Alice lives in Lisbon", T0, T0, valid_to=T0 + timedelta(days=1))
    assert fact.valid_at(T0)
    assert fact.valid_at(T0 + timedelta(hours=23))
    assert not fact.valid_at(T0 + timedelta(days=1))
    assert not fact.valid_at(T0 - timedelta(seconds=1))


def test_fact_rejects_bad_values() -> None:
    with pytest.raises(InvalidFactError, match="non-empty"):
        Fact("f1", None, "  ", T0, T0)
    assert Fact("f1", None, "x", datetime(2024, 1, 1), T0).valid_from == T0  # naive is UTC
    with pytest.raises(InvalidFactError, match="valid_from must be a datetime"):
        Fact("f1", None, "x", "2024-01-01", T0)  # type: ignore[arg-type]
    with pytest.raises(InvalidFactError, match="lone surrogate"):
        Fact("f1", None, "likes \ud83d pizza", T0, T0)
    with pytest.raises(InvalidFactError, match="before valid_from"):
        Fact("f1", None, "x", T0, T0, valid_to=T0 - timedelta(days=1))
    with pytest.raises(InvalidFactError, match="confidence"):
        Fact("f1", None, "x", T0, T0, confidence=1.5)
    assert issubclass(InvalidFactError, ValueError)  # what code that caught the ValueError it was still catches


def test_operations_must_name_their_target() -> None:
    with pytest.raises(InvalidFactError, match="name the fact"):
        FactInvalidate("", reason="moved")
    with pytest.raises(InvalidFactError, match="reason"):
        FactInvalidate("f1", reason=" ")
    with pytest.raises(InvalidFactError, match="name the fact"):
        FactUpdate("", text="x")
    assert FactAdd("x", source_message_ids="m1").source_message_ids == ("m1",)  # type: ignore[arg-type]


def test_normalize_merges_trivial_variants() -> None:
    assert normalize("  Alice  LIVES in\tLisbon. ") == normalize("alice lives in lisbon")
    assert normalize("ﬁsh") == "fish"  # NFKC ligature
    assert normalize("Alice lives in Lisbon") != normalize("Alice lived in Lisbon")
