"""``convmem replay``: strategies, formats, the shipped example, and located errors for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from convmem import Message
from convmem.cli import app
from convmem.cli._summarizer import HEADER, FirstSentenceSummarizer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_session.jsonl"
STRATEGIES = ["token_budget", "sliding_window", "summary_buffer", "compaction"]
runner = CliRunner()


def call(i: int, name: str = "lookup") -> dict[str, Any]:
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps({"q": i})}}


def openai_session(rounds: int = 6) -> list[dict[str, Any]]:
    """System, then per round: a user question, two parallel tool calls, a long result each, an answer."""
    lines: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful research agent."}]
    for r in range(rounds):
        lines.append({"role": "user", "content": f"Question {r}: what changed in batch {r}? " + "Details. " * 20})
        lines.append({"role": "assistant", "content": None, "tool_calls": [call(2 * r), call(2 * r + 1)]})
        for i in (2 * r + 1, 2 * r):  # results may come back out of call order
            lines.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"row {i}, " * 150})
        lines.append({"role": "assistant", "content": f"Batch {r} changed. It is fine now. " * 10})
    return lines


def write_jsonl(path: Path, items: list[Any], raw: dict[int, str] | None = None) -> Path:
    """Write one JSON value per line; ``raw`` replaces the text of given 1-based lines verbatim."""
    texts = [json.dumps(item) for item in items]
    for number, text in (raw or {}).items():
        texts[number - 1] = text
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return path


def replay_json(path: Path, *args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["replay", str(path), "--json", *args])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def check_figures(data: dict[str, Any], messages: int) -> None:
    """Per-turn figures agree with each other and with the budget on every row."""
    turns = data["turns"]
    assert [t["turn"] for t in turns] == list(range(1, len(turns) + 1))
    stored = 0
    for before, turn in zip([None, *turns], turns, strict=False):
        stored += turn["added"]
        assert turn["stored"] == stored
        assert turn["tokens"] + turn["reserved_output"] <= turn["budget"]
        assert turn["evicted"] == turn["archived"] + turn["summarized"]
        if before is not None:
            assert turn["first_line"] > before["last_line"]
            assert turn["evicted"] >= before["evicted"]
            assert turn["summaries"] >= before["summaries"]
    assert stored == messages == data["summary"]["messages"]
    assert data["summary"]["peak_context_tokens"] == max(t["tokens"] for t in turns)


@pytest.fixture
def short(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "short.jsonl", openai_session())


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_short_transcript_under_each_strategy(short: Path, strategy: str) -> None:
    extra = ["--max-messages", "8"] if strategy == "sliding_window" else []
    data = replay_json(short, "--strategy", strategy, "--max-tokens", "1500", "--max-output-tokens", "200", *extra)
    check_figures(data, messages=31)
    summary = data["summary"]
    assert summary["archived"] + summary["summarized"] > 0
    assert (summary["summaries"] > 0) == (strategy in ("summary_buffer", "compaction"))
    assert (data["setup"]["summarizer"] is not None) == (strategy in ("summary_buffer", "compaction"))
    assert summary["warnings"] == []


def test_a_turn_ends_at_each_user_message_and_each_completed_tool_unit(short: Path) -> None:
    turns = replay_json(short, "--max-tokens", "100000")["turns"]
    # Line 2 is the first user message; lines 3-5 the call and its two results; 6-7 the answer and next question.
    assert [(t["first_line"], t["last_line"]) for t in turns[:4]] == [(1, 2), (3, 5), (6, 7), (8, 10)]
    assert (turns[-1]["first_line"], turns[-1]["last_line"]) == (31, 31)  # the trailing answer
    assert len(turns) == 13


def test_table_and_summary_panel(short: Path) -> None:
    result = runner.invoke(
        app, ["replay", str(short), "--strategy", "summary_buffer", "--max-tokens", "1500", "--every", "5"]
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    for text in ("Per turn", "tokens", "evicted", "Summary", "tokens saved", "time", "extractive"):
        assert text in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [row[0] for row in rows] == ["1", "5", "10", "13"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_shipped_example_replays(strategy: str) -> None:
    data = replay_json(EXAMPLE, "--model", "gpt-4o", "--strategy", strategy, "--max-tokens", "16000")
    check_figures(data, messages=307)
    summary = data["summary"]
    assert summary["turns"] == 129
    assert summary["peak_context_tokens"] > 15000  # the budget is actually used
    assert summary["history_tokens"] > 6 * 16000  # and the history really does not fit
    assert summary["warnings"] == []
    folded = strategy in ("summary_buffer", "compaction")
    assert (summary["summarized"] > 0, summary["archived"] > 0) == (folded, not folded)


def anthropic_session() -> list[dict[str, Any]]:
    tool_use = [
        {"type": "tool_use", "id": f"tu{i}", "name": "read_file", "input": {"path": f"f{i}.py"}} for i in (1, 2)
    ]
    results = [{"type": "tool_result", "tool_use_id": f"tu{i}", "content": f"print({i})\n" * 200} for i in (2, 1)]
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Read both files."},
        {"role": "assistant", "content": [{"type": "text", "text": "Reading them."}, *tool_use]},
        {"role": "user", "content": [*results, {"type": "text", "text": "Now summarize them."}]},
        {"role": "assistant", "content": "Both print a number."},
    ]


def test_anthropic_transcript(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "anthropic.jsonl", anthropic_session())
    data = replay_json(path, "--strategy", "token_budget", "--max-tokens", "1000")
    assert data["setup"]["format"] == "anthropic"
    # Line 4 expands to two tool results and a user message: 1 + 1 + 1 + 3 + 1 messages.
    check_figures(data, messages=7)
    assert [(t["first_line"], t["last_line"], t["added"]) for t in data["turns"]] == [(1, 2, 2), (3, 4, 4), (5, 5, 1)]
    assert data["summary"]["archived"] > 0


def responses_session() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a data agent."},
        {"role": "user", "content": "Compare the two tables."},
        {"type": "function_call", "call_id": "fc1", "name": "run_sql", "arguments": '{"q": "select 1"}'},
        {"type": "function_call", "call_id": "fc2", "name": "run_sql", "arguments": '{"q": "select 2"}'},
        {"type": "function_call_output", "call_id": "fc2", "output": "2\n" * 300},
        {"type": "function_call_output", "call_id": "fc1", "output": "1\n" * 300},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "They differ."}]},
        {"role": "user", "content": "Thanks."},
    ]


def test_responses_transcript_keeps_parallel_calls_in_one_unit(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "responses.jsonl", responses_session())
    data = replay_json(path, "--max-tokens", "1000")
    assert data["setup"]["format"] == "responses"
    check_figures(data, messages=7)  # the two function_call lines are one assistant message
    assert [(t["first_line"], t["last_line"]) for t in data["turns"]] == [(1, 2), (3, 6), (7, 8)]


@pytest.mark.parametrize(
    ("items", "raw", "line", "reason"),
    [
        pytest.param(openai_session(1), {3: '{"role": "assistant", "content": "x"'}, 3, "invalid JSON", id="bad-json"),
        pytest.param(
            [*openai_session(2)[:-2], {"role": "tool", "tool_call_id": "nope", "content": "?"}],
            None,
            10,
            "tool call id 'nope'",
            id="unknown-call-id",
        ),
        pytest.param(
            [{"role": "user", "content": "hi"}, {"role": "robot", "content": "beep"}],
            None,
            2,
            "unknown role 'robot'",
            id="unknown-role",
        ),
        pytest.param(
            [{"role": "user", "content": "hi"}, ["not", "a", "message"]],
            None,
            2,
            "expected a JSON object",
            id="not-an-object",
        ),
    ],
)
def test_bad_input_names_file_line_and_reason(
    tmp_path: Path, items: list[Any], raw: dict[int, str] | None, line: int, reason: str
) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", items, raw)
    result = runner.invoke(app, ["replay", str(path)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {path}, line {line}: ")
    assert reason in result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_blank_lines_count_and_mixed_formats_are_refused(tmp_path: Path) -> None:
    tool = {"role": "tool", "tool_call_id": "x", "content": "y"}  # only OpenAI has role "tool"
    path = write_jsonl(
        tmp_path / "mixed.jsonl",
        [None, {"role": "user", "content": "hi"}, None, tool, anthropic_session()[2]],
        raw={1: "", 3: ""},
    )
    result = runner.invoke(app, ["replay", str(path)])
    assert result.exit_code == 2
    assert f"{path}, line 5: this line is in anthropic format, but line 4 is in openai format" in result.stderr
    assert runner.invoke(app, ["replay", str(path), "--format", "openai"]).exit_code == 2  # then it fails to parse


def test_configuration_errors_exit_2_without_traceback(short: Path) -> None:
    cases = [
        (["--model", "gpt-4q"], "unknown model 'gpt-4q'"),
        (["--max-tokens", "100", "--max-output-tokens", "200"], "leaves no room"),
        (["--max-messages", "5"], "only applies to --strategy sliding_window"),
        (["--model", "gpt-4o", "--max-tokens", "10000000"], "exceeds the context window of gpt-4o (128,000 tokens)"),
    ]
    for args, text in cases:
        result = runner.invoke(app, ["replay", str(short), *args])
        assert result.exit_code == 2, (args, result.output)
        assert text in result.output
        assert "Traceback" not in result.output


def test_approximate_counter_is_labelled(short: Path) -> None:
    data = replay_json(short, "--model", "claude-sonnet-4-5", "--approximate", "--max-tokens", "2000")
    assert data["setup"]["exact"] is False
    assert data["setup"]["counter"].startswith("approximate")


def test_extractive_summarizer_is_running_and_capped() -> None:
    summarizer = FirstSentenceSummarizer(lambda text: len(text.split()))
    first = summarizer.summarize(None, [Message(role="user", content="Why did revenue drop? Please check.")], 50)
    assert first == f"{HEADER}\n- user: Why did revenue drop?"
    many = [Message(role="assistant", content=f"Answer {i}. More.") for i in range(40)]
    second = summarizer.summarize(first, many, 50)
    assert second.startswith(HEADER)
    assert len(second.split()) <= 50
    assert second.endswith("- assistant: Answer 39.")  # the newest lines survive the cap
    assert summarizer.summarize(None, many[:3], 50) == summarizer.summarize(None, many[:3], 50)


def test_version_and_help() -> None:
    assert runner.invoke(app, ["--version"]).stdout.strip().startswith("convmem ")
    result = runner.invoke(app, ["replay", "--help"])
    assert result.exit_code == 0
    assert "--strategy" in result.stdout


@pytest.mark.slow  # a fresh interpreter imports everything
def test_python_m_convmem_entry_point(short: Path) -> None:
    version = subprocess.run([sys.executable, "-m", "convmem", "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("convmem ")
    done = subprocess.run(
        [sys.executable, "-m", "convmem", "replay", str(short), "--json", "--max-tokens", "2000"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["messages"] == 31
    bad = subprocess.run(
        [sys.executable, "-m", "convmem", "replay", str(short), "--model", "nope"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr


def test_replay_keeps_the_session_in_the_given_store(tmp_path: Path) -> None:
    from convmem.stores import open_store

    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        "\n".join(
            json.dumps(m)
            for m in [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": "hi"},
            ]
        )
        + "\n"
    )
    db = tmp_path / "kept.db"
    result = CliRunner().invoke(app, ["replay", str(transcript), "--max-tokens", "500", "--store", f"sqlite://{db}"])
    assert result.exit_code == 0, result.output
    store = open_store(str(db))
    try:
        (session,) = store.list_sessions()
        assert session.message_count == 3
    finally:
        store.close()
