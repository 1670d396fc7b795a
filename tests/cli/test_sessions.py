"""``convmem sessions``: every subcommand against a real SQLite file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from convmem import Memory
from convmem.cli import app
from convmem.stores import SQLiteStore

runner = CliRunner()


def call(i: int) -> dict[str, object]:
    return {"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"q": i})}}


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A database with one session 'weather01' of 37 messages, 24 of them evicted (window: seqs 25..36)."""
    path = tmp_path / "chat.db"
    store = SQLiteStore(path)
    memory = Memory(
        store=store,
        session_id="weather01",
        max_tokens=2000,
        strategy="sliding_window",
        strategy_options={"max_messages": 12},
    )
    memory.add({"role": "system", "content": "Be brief."})
    for i in range(12):
        memory.add_many(
            [
                {"role": "user", "content": f"question {i}"},
                {"role": "assistant", "content": None, "tool_calls": [call(i)]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}"},
            ]
        )
    store.update_session("weather01", title="Weather questions")
    memory = Memory(store=store, session_id="bobs", user_id="bob", max_tokens=2000)
    memory.add({"role": "user", "content": "mine"})
    store.close()
    return str(path)


def invoke(*args: str, input: str | None = None) -> tuple[int, str]:
    result = runner.invoke(app, ["sessions", *args], input=input, env={"COLUMNS": "200"})
    return result.exit_code, result.output


def test_list_shows_titles_counts_and_json(db: str) -> None:
    code, out = invoke("list", "--db", db)
    assert code == 0
    assert re.search(r"weather01 .* 37 .*Weather questions", out)  # an id someone chose is shown whole
    code, out = invoke("list", "--db", db, "--json")
    assert [(s["id"], s["messages"]) for s in json.loads(out)] == [("weather01", 37)]
    assert "no sessions" in invoke("list", "--db", db, "--user", "carol")[1]


def test_show_marks_the_messages_in_the_context_window(db: str) -> None:
    code, out = invoke("show", "weath", "--db", db, "--last", "0")
    assert code == 0
    assert "window seqs 25..36" in out
    assert "Weather questions" in out
    rows = {int(m[1]): m[2] for m in re.finditer(r"│\s+(\d+) │\s+(●?)\s+│", out)}
    assert sorted(rows) == list(range(37))
    assert [seq for seq, mark in rows.items() if mark] == [0, *range(25, 37)]
    assert "→ lookup(" in out
    assert "← c11: result 11" in out
    assert "archived" in out
    assert "pinned" in out


def test_export_then_import_elsewhere_is_byte_for_byte(db: str, tmp_path: Path) -> None:
    exported = tmp_path / "weather.jsonl"
    assert invoke("export", "weather01", "--db", db, "-o", str(exported))[0] == 0
    other = str(tmp_path / "other.db")
    code, out = invoke("import", str(exported), "--db", other)
    assert code == 0
    assert "imported session weather01 (37 messages)" in out
    again = tmp_path / "again.jsonl"
    assert invoke("export", "weather01", "--db", other, "-o", str(again))[0] == 0
    assert again.read_bytes() == exported.read_bytes()
    code, out = invoke("import", "-", "--db", str(tmp_path / "third.db"), input=exported.read_text())
    assert code == 0


def test_a_malformed_import_names_the_line_and_imports_nothing(db: str, tmp_path: Path) -> None:
    exported = tmp_path / "weather.jsonl"
    invoke("export", "weather01", "--db", db, "-o", str(exported))
    lines = exported.read_text().splitlines(keepends=True)
    lines[4] = '{"seq": 3, oops\n'
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(lines))
    fresh = str(tmp_path / "fresh.db")
    code, out = invoke("import", str(broken), "--db", fresh)
    assert code == 2
    assert "broken.jsonl" in out
    assert "line 5" in out
    assert "nothing was imported" in out
    assert json.loads(invoke("list", "--db", fresh, "--json")[1]) == []


def test_fork_and_delete(db: str) -> None:
    code, out = invoke("fork", "weather01", "--db", db, "--at", "9")
    assert code == 0
    fork_id = re.search(r"forked (\w+) from weather01 at seq 9 \(10 shared messages\)", out)
    assert fork_id is not None
    code, out = invoke("fork", "weather01", "--db", db)
    assert "at seq 36" in out
    assert invoke("delete", "weather01", "--db", db, input="n\n")[0] == 1  # declined
    assert invoke("delete", "weather01", "--db", db, "--yes")[0] == 0
    listed = json.loads(invoke("list", "--db", db, "--json")[1])
    assert len(listed) == 2
    assert all(s["parent_id"] == "weather01" for s in listed)
    code, out = invoke("show", fork_id[1][:6], "--db", db)
    assert code == 0
    assert "forked from weather01 at seq 9" in out


def test_errors_are_reported_with_exit_code_2(db: str, tmp_path: Path) -> None:
    code, out = invoke("show", "nope", "--db", db)
    assert code == 2
    assert "session not found: 'nope'" in out
    assert invoke("show", "weather01", "--db", db, "--user", "bob")[0] == 2  # another user's namespace
    invoke("fork", "weather01", "--db", db)
    invoke("fork", "weather01", "--db", db)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database" * 100)
    code, out = invoke("list", "--db", str(garbage))
    assert code == 2
    assert "garbage.db" in out
    assert invoke("import", str(tmp_path / "missing.jsonl"), "--db", db)[0] == 2


def test_an_import_that_add_would_refuse_is_refused_whole(db: str, tmp_path: Path) -> None:
    exported = tmp_path / "weather.jsonl"
    invoke("export", "weather01", "--db", db, "-o", str(exported))
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    del lines[3]  # seq 2, the call that seq 3 answers: line 4 is now a result that answers no call
    lines[0]["messages"] -= 1
    broken = tmp_path / "orphan.jsonl"
    broken.write_text("".join(json.dumps(line) + "\n" for line in lines))
    fresh = str(tmp_path / "fresh.db")
    code, out = invoke("import", str(broken), "--db", fresh)
    assert code == 2
    assert "line 4" in out
    assert "does not follow an assistant message that called it" in out
    assert "nothing was imported" in out
    assert json.loads(invoke("list", "--db", fresh, "--json")[1]) == []
