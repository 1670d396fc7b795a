"""On LoCoMo: the shipped defaults beat DRAGON on held-out folds, and requests with recall stay in budget.

Runs the benchmarks' own archive, scoring and cross-validation helpers (``bench/_locomo.py``,
``bench/_cv.py``, ``bench/evidence.py``), lexical only (no torch needed). The data is read in place from
``../shared/data/locomo`` (or ``$CONVMEM_LOCOMO_DIR``) and never copied.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import _locomo  # noqa: E402
from convmem.longterm import RecallBlock  # noqa: E402
from convmem.longterm.recall.index import RecallIndex  # noqa: E402
from convmem.longterm.recall.ranking import DEFAULT_TUNING  # noqa: E402

needs_locomo = pytest.mark.skipif(not _locomo.LOCOMO.exists(), reason=f"LoCoMo not found at {_locomo.LOCOMO}")


@pytest.fixture(scope="module")
def data() -> list[dict[str, Any]]:
    return _locomo.load()


@pytest.mark.locomo
@needs_locomo
def test_default_lexical_recall_beats_dragon_on_every_conversation(data: list[dict[str, Any]]) -> None:
    import _cv

    evaluator = _cv.Evaluator(data)
    try:
        rows = evaluator.rows(_cv.Config("lexical", DEFAULT_TUNING))
    finally:
        evaluator.close()
    assert sum(len(r) for r in rows.values()) == 997
    per_conversation = {c: _cv.figures(r) for c, r in rows.items()}
    for conv, figures in per_conversation.items():
        assert figures is not None
        _, r5, r10, r25 = figures
        assert r5 > 58.8, conv
        assert r10 > 67.5, conv
        assert r25 > 79.9, conv
    mean_r10 = statistics.fmean(f[2] for f in per_conversation.values() if f is not None)
    assert mean_r10 >= 75.0


@pytest.mark.locomo
@needs_locomo
def test_evidence_reaches_the_request_and_no_request_is_over_budget(data: list[dict[str, Any]]) -> None:
    import evidence

    sample = data[0]
    texts = evidence.needles(sample)
    recall = RecallIndex()
    block = RecallBlock(recall)  # the defaults: k and share chosen by bench/evidence.py
    memory = evidence.convmem_memory(sample, 4000, "token_budget", recall, block)
    with_recall = evidence.ask_convmem(memory, sample, 4000, block, texts)
    window = evidence.ask_convmem(
        evidence.convmem_memory(sample, 4000, "token_budget", None, None), sample, 4000, None, texts
    )
    assert with_recall.over_budget == 0
    assert window.over_budget == 0
    assert max(with_recall.tokens) <= 4000
    assert with_recall.present >= window.present + 30  # recall brings far more of the evidence


def test_evidence_ids_are_parsed_leniently() -> None:
    assert _locomo.evidence_ids(["D8:6; D9:17", "D:11:26", "D30:05", "garbage", "D1:3"]) == {
        "D8:6",
        "D9:17",
        "D11:26",
        "D30:5",
        "D1:3",
    }


def test_the_temporal_subset_names_a_month_or_a_year() -> None:
    assert _locomo.names_month_or_year("What did Maria donate in December 2023?")
    assert _locomo.names_month_or_year("What did Nate do in 2022?")
    assert not _locomo.names_month_or_year("When did Melanie go camping?")
    assert not _locomo.names_month_or_year("What may Mayra do?")
