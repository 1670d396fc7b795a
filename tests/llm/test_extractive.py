"""ExtractiveSummarizer: deterministic, exact cap, keeps what carries facts, incremental; and on LoCoMo."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from convmem import Message, ToolCall
from convmem.llm import ExtractiveSummarizer
from convmem.llm.extractive import HEADER
from convmem.tokens import counter_for

COUNT = counter_for("gpt-4o").count_text
ROOT = Path(__file__).resolve().parents[2]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
TRIP = [
    Message(role="user", content="Hi there! I want to book a flight to Lisbon on May 3. My budget is 400 euros."),
    Message(
        role="assistant",
        content="Sure, let me look.",
        tool_calls=(ToolCall("c1", "search_flights", '{"to": "LIS", "date": "2025-05-03"}'),),
    ),
    Message(role="tool", tool_call_id="c1", content='{"flights": [{"id": "TP123", "price": 380}]}'),
    Message(role="assistant", content="I found TP123 for 380 euros. That is within budget. Okay!"),
    Message(role="user", content="Great, we decided on TP123. Please remind me to pack my charger. Thanks so much!"),
]


def test_keeps_numbers_names_decisions_and_tool_values_within_an_exact_cap() -> None:
    summarizer = ExtractiveSummarizer(COUNT)
    text = summarizer.summarize(None, TRIP, 130)
    assert text.startswith(HEADER)
    assert COUNT(text) <= 130
    for kept in ("Lisbon on May 3", "400 euros", '"id": "TP123"', "decided on TP123", "remind me"):
        assert kept in text
    assert "Thanks so much" not in text  # filler loses to content
    assert "Okay!" not in text
    assert 'tool: search_flights({"to":"LIS","date":"2025-05-03"}) → {"flights"' in text  # one line: tool, args, head
    assert summarizer.summarize(None, TRIP, 130) == text  # deterministic


def test_incremental_fold_keeps_old_lines_and_prefers_newer_statements() -> None:
    summarizer = ExtractiveSummarizer(COUNT)
    first = summarizer.summarize(None, TRIP, 130)
    second = summarizer.summarize(first, [Message(role="user", content="Actually, my budget is now 500 euros.")], 130)
    assert COUNT(second) <= 130
    assert "my budget is now 500 euros" in second
    assert "Lisbon" in second  # carried over from the previous summary, not re-read from history
    assert second.count(HEADER) == 1


@pytest.mark.parametrize("cap", [1, 5, 20])
def test_tiny_caps_never_exceed_the_cap(cap: int) -> None:
    text = ExtractiveSummarizer(COUNT).summarize(None, TRIP, cap)
    assert text == "" or COUNT(text) <= cap


def test_works_with_no_arguments_and_on_messages_without_text() -> None:
    summarizer = ExtractiveSummarizer()
    calls_only = Message(role="assistant", tool_calls=(ToolCall("c9", "snap", "{}"),))
    assert "called snap({})" in summarizer.summarize("earlier line", [calls_only], 100)


@pytest.mark.locomo
@pytest.mark.skipif(not LOCOMO.exists(), reason=f"LoCoMo data not found at {LOCOMO}")
def test_on_locomo_it_keeps_more_evidence_than_lead_n_of_the_same_size() -> None:
    spec = importlib.util.spec_from_file_location("bench_extractive", ROOT / "bench" / "extractive.py")
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results, _ = bench.measure(json.loads(LOCOMO.read_text())[:2], (0.3,))
    tally = results[0.3]
    assert tally["evidence"] > 100
    # The same size: lead-N is cut at the summary's token count (a word boundary may leave it a token short).
    assert tally["summary_tokens"] * 0.99 <= tally["lead_tokens"] <= tally["summary_tokens"]
    assert tally["extractive_kept"] > tally["lead_kept"]


def test_whole_messages_keep_short_turns_verbatim() -> None:
    turns = [
        Message(role="user", content="Caroline: I went to the LGBTQ support group yesterday. It was so powerful."),
        Message(role="assistant", content="Melanie: Wow! What happened there? Tell me everything."),
        Message(role="user", content="Caroline: The transgender stories were inspiring.\nI felt accepted in 2023."),
        Message(role="assistant", content="x" * 500 + ". Short tail with Lisbon and 42 numbers in it."),
    ]
    split = ExtractiveSummarizer(COUNT).summarize(None, turns, 400)
    assert turns[0].text not in split  # sentences are picked one by one
    whole = ExtractiveSummarizer(COUNT, whole_messages=200).summarize(None, turns, 400)
    assert COUNT(whole) <= 400
    assert f"user: {turns[0].text}" in whole  # kept whole, as said
    assert "user: Caroline: The transgender stories were inspiring. I felt accepted in 2023." in whole  # one line
    assert "x" * 500 not in whole  # a long message is still split into sentences
    for line in whole.splitlines()[1:]:
        assert line.startswith(("user: ", "assistant: "))
