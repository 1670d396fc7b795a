"""The offline summary of an agent session: requests, decisions, errors and findings; one line per tool call."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from convmem import Memory, Message, ToolCall
from convmem.formats import parse_messages
from convmem.llm import ExtractiveSummarizer
from convmem.llm.extractive import HEADER
from convmem.tokens import counter_for

COUNT = counter_for("gpt-4o").count_text
# A CSV row, a query-plan node or a log line: what the summary used to be made of.
_RAW = re.compile(r"^(?:[^ ]*,[^ ]*,[^ ]*|\s*->.*|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}.*)$")
SESSION = Path(__file__).resolve().parents[2] / "examples" / "agent_session.jsonl"


def _call(i: int, name: str, args: dict[str, object]) -> ToolCall:
    return ToolCall(f"c{i}", name, json.dumps(args))


def _exchange(i: int, name: str, args: dict[str, object], output: str) -> list[Message]:
    return [
        Message(role="assistant", tool_calls=(_call(i, name, args),)),
        Message(role="tool", tool_call_id=f"c{i}", content=output),
    ]


CSV = "store_id,day,orders,net\n" + "\n".join(f"us,2024-03-{d:02d},{5000 + d},{400000 + d * 7}" for d in range(1, 30))
PLAN = "Bitmap Heap Scan on orders  (cost=12.1..845.2 rows=21043)\n" + "\n".join(
    f"  ->  Index Scan {i} (cost=0.{i}..{i}.5 rows={i * 100})" for i in range(20)
)


def _session() -> list[Message]:
    return [
        Message(role="user", content="The revenue dashboard dropped since March 11. Can you find out why?"),
        *_exchange(1, "run_sql", {"query": "select * from daily_revenue"}, CSV),
        *_exchange(2, "run_sql", {"query": "explain select ..."}, PLAN),
        *_exchange(3, "run_sql", {"query": "select * from raw.orders"}, 'ERROR:  relation "raw.orders" does not exist'),
        *_exchange(4, "run_tests", {}, "collected 13 items\n...\n=== 1 failed, 12 passed in 2.31s ==="),
        *_exchange(5, "run_tests", {}, "collected 13 items\n...\n=== 13 passed, 0 failed in 2.0s ==="),
        Message(
            role="assistant",
            content="The root cause is the LOADABLE_STATUSES filter: it drops the new `authorized` orders.\n"
            "| day | missing |\n|---|---|\n| 03-11 | 1067 |\n| 03-12 | 998 |\n"
            "```sql\nselect count(*) from orders\nwhere status = 'authorized'\n```",
        ),
        Message(role="user", content="Go with option B and draft the PR."),
    ]


def test_each_tool_call_is_one_line_with_its_tool_arguments_and_head_or_error() -> None:
    text = ExtractiveSummarizer(COUNT).summarize(None, _session(), 2_000)
    lines = text.splitlines()[1:]
    tool_lines = [line for line in lines if line.startswith("tool")]
    assert len(tool_lines) == 5  # one per call, however long the output
    assert 'tool: run_sql({"query":"select * from daily_revenue"}) → store_id,day,orders,net (+29 lines)' in lines
    assert any(line.startswith('tool: run_sql({"query":"explain select ..."}) → Bitmap Heap Scan') for line in lines)
    assert (
        'tool error: run_sql({"query":"select * from raw.orders"}) → ERROR: relation "raw.orders" does not exist'
        in lines
    )
    assert "tool error: run_tests({}) → === 1 failed, 12 passed in 2.31s ===" in lines
    assert "tool: run_tests({}) → collected 13 items (+2 lines)" in lines  # "0 failed" is no error
    assert not any(re.search(r"\d+,\d+,\d+", line) and not line.startswith("tool") for line in lines)  # no CSV rows
    assert "Index Scan 7" not in text


def test_requests_findings_and_decisions_are_kept_but_not_code_or_table_rows() -> None:
    text = ExtractiveSummarizer(COUNT).summarize(None, _session(), 2_000)
    assert "user: The revenue dashboard dropped since March 11." in text
    assert "user: Go with option B and draft the PR." in text
    assert "assistant: The root cause is the LOADABLE_STATUSES filter" in text
    assert "| 03-11 |" not in text
    assert "where status" not in text


def test_under_a_tight_cap_errors_come_first_then_requests_and_findings_before_tool_heads() -> None:
    text = ExtractiveSummarizer(COUNT).summarize(None, _session(), 110)
    assert COUNT(text) <= 110
    assert "tool error:" in text
    assert "root cause" in text
    assert "(+29 lines)" not in text  # a plain output head is the first thing to go


def test_tool_error_lines_stay_first_when_a_summary_is_folded_again() -> None:
    summarizer = ExtractiveSummarizer(COUNT)
    first = summarizer.summarize(None, _session(), 300)
    chatter = [
        Message(role="assistant", content=f"Step {i}: the warehouse query for March {i} took {i} seconds.")
        for i in range(1, 25)
    ]
    second = summarizer.summarize(first, chatter, 160)
    assert COUNT(second) <= 160
    assert "tool error: " in first
    assert "tool error: " in second  # re-read from the previous summary, still ahead of the numbered chatter
    assert "root cause" in second
    assert sum(line.startswith("assistant: Step") for line in second.splitlines()) < len(chatter)


def test_named_speakers_are_peers_not_requests() -> None:
    chat = [
        Message(role="user", name="Caroline", content="Hey Mel! Good to see you."),
        Message(role="assistant", name="Melanie", content="I ran a charity race for mental health last Saturday."),
    ]
    text = ExtractiveSummarizer(COUNT).summarize(None, chat, 200)
    assert "user:" not in text  # each speaker by name, and none of them is "the user" asking
    assert "Caroline: Good to see you." in text
    text = ExtractiveSummarizer(COUNT).summarize(None, chat, 35)
    assert "Melanie: I ran a charity race" in text  # under a tight cap the greeting goes first


@pytest.mark.skipif(not SESSION.exists(), reason="the shipped agent session is missing")
def test_the_demo_summary_of_the_shipped_agent_session_says_what_was_asked_and_found() -> None:
    messages = parse_messages(json.loads(line) for line in SESSION.read_text().splitlines() if line.strip())
    memory = Memory("gpt-4o", max_tokens=16_000, strategy="summary_buffer")
    memory.add_many(messages[:2])
    for message in messages[2:]:
        memory.add(message)
    summary = memory.context().messages[1]["content"]
    lines = summary.splitlines()[3:-1]  # the note's tag and preamble, the extractive header, the closing tag
    assert lines[0].startswith(HEADER) is False
    raw = [line for line in lines if _RAW.match(line.partition(": ")[2])]
    assert len(raw) <= len(lines) // 10  # was 41 of 46 lines of CSV rows, query plans and log lines
    assert sum(line.startswith("user: ") for line in lines) >= 10  # the user's requests appear
    # The root cause the session found: Klarna's new `authorized` orders were not loaded.
    assert "`authorized` orders" in summary
    assert "missed 10,110 US Klarna orders" in summary
