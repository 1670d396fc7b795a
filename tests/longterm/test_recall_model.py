"""The recall contract's types are public in ``convmem.longterm.recall`` and need no numpy."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import convmem.longterm.recall as recall
from convmem.longterm.recall import _partition, model


def test_the_contract_types_are_exported_from_the_recall_package() -> None:
    assert recall.RecallDoc is model.RecallDoc
    assert recall.Where is model.Where
    assert recall.DocRef == tuple[str, str]
    # The private partition only uses them: nothing outside imports the contract from it.
    assert not {"RecallDoc", "Where", "DocRef"} & set(_partition.__all__)


def test_the_model_imports_without_numpy() -> None:
    # A store decodes and encodes documents with these types; it must not need the recall extra to do so.
    code = (
        "import sys; sys.modules['numpy'] = None\n"
        "from convmem.longterm.recall.model import RecallDoc, Where\n"
        "from convmem.stores._longterm_codec import *\n"
        "print(RecallDoc.__name__, Where().sessions)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["RecallDoc", "None"]


def test_a_document_is_identified_by_session_and_message_within_its_user() -> None:
    said = datetime(2024, 5, 1, tzinfo=UTC)
    one = model.RecallDoc("m1", "s1", "u", 0, "user", "hi", said, "hi")
    other_session = model.RecallDoc("m1", "s2", "u", 0, "user", "hi", said, "hi")
    assert one.ref == ("s1", "m1")
    assert one.ref != other_session.ref
    assert one.context == ""
