"""The LoCoMo claim holds: lexical recall alone beats the paper's DRAGON turn retrieval at every k.

Runs ``bench/locomo_recall.py``'s own archive and scoring (lexical only, no torch needed, about a
second). The data is read in place from ``../shared/data/locomo`` and never copied.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from convmem.longterm.recall import RecallIndex

BENCH = Path(__file__).resolve().parents[2] / "bench" / "locomo_recall.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("locomo_recall", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("locomo_recall", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.locomo
def test_lexical_recall_beats_dragon_on_locomo_dev() -> None:
    bench = _bench()
    if not bench.LOCOMO.exists():
        pytest.skip(f"LoCoMo not found at {bench.LOCOMO}")
    data = json.loads(bench.LOCOMO.read_text())
    recall = RecallIndex()
    dia, _ = bench.archive(data, recall)
    assert len(dia) == 2760
    result = bench.evaluate(data, recall, dia, "lexical")
    _, r5, r10, r25 = result["table"]["overall"]
    assert result["counts"]["overall"] == 997
    assert r5 > 58.8
    assert r10 > 67.5
    assert r25 > 79.9


def test_evidence_ids_are_parsed_leniently() -> None:
    bench = _bench()
    assert bench.evidence_ids(["D8:6; D9:17", "D:11:26", "D30:05", "garbage", "D1:3"]) == {
        "D8:6",
        "D9:17",
        "D11:26",
        "D30:5",
        "D1:3",
    }
