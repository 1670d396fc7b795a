"""The CLI as a newcomer meets it (issue 19): tables that fit 80 columns, hints that work as printed,
and no empty database left behind by a mistyped path."""

from __future__ import annotations

import io
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from convmem import Memory
from convmem.cli import app
from convmem.cli._hints import redact, store_flags
from convmem.cli._sessions_view import sessions_table, unique_prefixes
from convmem.stores import SQLiteStore

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_session.jsonl"
TITLE = "Why the nightly export job slowed down after the index change"


@pytest.fixture(autouse=True)
def _run_as_the_convmem_script(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hints name the program as it was run; here that is the ``convmem`` script, whatever started pytest."""
    script = Path(sys.executable).parent / "convmem"
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setattr("sys.argv", [str(script)])


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Three sessions with long titles and models, one of them a fork, and one session of user 'bob'."""
    path = tmp_path / "chat.db"
    store = SQLiteStore(path)
    for i, model in enumerate(["claude-sonnet-4-5", "gpt-4o", "gemini-2.5-pro"]):
        memory = Memory(model, store=store, max_tokens=4_000, max_output_tokens=100)
        memory.add_many([{"role": "user", "content": f"question {i} " * 20}, {"role": "assistant", "content": "ok"}])
        store.update_session(memory.session_id, title=f"{TITLE} ({i})")
    store.fork(memory.session_id, 0)
    bob = Memory("gpt-4o", store=store, user_id="bob", session_id="bobsession")
    bob.add({"role": "user", "content": "mine"})
    store.close()
    return path


def run(*args: str, columns: int = 80) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env={"COLUMNS": str(columns)})
    return result.exit_code, result.stdout, result.stderr


def test_sessions_list_is_readable_at_80_columns(db: Path) -> None:
    code, out, _ = run("sessions", "list", "--db", str(db))
    assert code == 0
    lines = out.splitlines()
    table, hint = lines[:-1], lines[-1]
    assert max(map(len, table)) <= 80
    assert hint.startswith("show one: convmem sessions show ID --db ")  # a long --db path may run past 80
    sessions = SQLiteStore(db).list_sessions()
    rows = [line for line in lines if re.match(r"^ [0-9a-f]{8}", line)]
    assert len(rows) == len(sessions) == 4
    for row in rows:
        cells = row.split()
        assert re.fullmatch(r"[0-9a-f]{8,}", cells[0])  # a usable id prefix, not "…"
        assert re.search(r"\d{2}:\d{2}", row)  # the time of the update
        assert re.search(r"↳[0-9a-f]{8}@0|Why the nightly", row)  # a fork shows its parent, others their title
    assert "claude-sonnet-4-5" in out
    assert "gemini-2.5-pro" in out


def test_the_table_at_80_columns_from_a_rich_console() -> None:
    store = SQLiteStore(":memory:")
    for model in ("claude-sonnet-4-5", "gpt-4o"):
        memory = Memory(model, store=store, max_tokens=4_000, max_output_tokens=100)
        memory.add({"role": "user", "content": "hello"})
        store.update_session(memory.session_id, title=TITLE)
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(sessions_table(store.list_sessions(), width=80))
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert text.count("Why the nightly") == 2
    assert "…   …" not in text


def test_an_id_someone_chose_is_shown_whole_at_80_columns_and_a_made_up_one_as_its_prefix() -> None:
    store = SQLiteStore(":memory:")
    for session_id in ("alice-chat-1", "trip-planning", None):
        memory = Memory("gpt-4o", store=store, session_id=session_id, max_tokens=4_000, max_output_tokens=100)
        memory.add({"role": "user", "content": "hello"})
        store.update_session(memory.session_id, title=TITLE)
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(sessions_table(store.list_sessions(), width=80))
    text = console.export_text()
    ids = [line.split()[0] for line in text.splitlines() if re.match(r"^ ?(alice|trip|[0-9a-f]{8})", line)]
    assert sorted(ids[1:]) == ["alice-chat-1", "trip-planning"]  # whole: the names to copy
    made = ids[0]
    assert re.fullmatch(r"[0-9a-f]{8}", made)  # a random hex id: its unique prefix, which every command takes
    assert all(len(line) <= 80 for line in text.splitlines())


def test_id_prefixes_are_unique_and_at_least_eight_characters() -> None:
    ids = ["abcdef0123", "abcdef0199", "ffff0000aaaa", "ab"]
    assert unique_prefixes(ids) == ["abcdef012", "abcdef019", "ffff0000", "ab"]


def test_every_id_the_table_prints_opens_the_session(db: Path) -> None:
    _, out, _ = run("sessions", "list", "--db", str(db))
    for prefix in re.findall(r"^ ([0-9a-f]{8,}) ", out, flags=re.M):
        assert run("sessions", "show", prefix, "--db", str(db), columns=200)[0] == 0


def _follow(printed: str) -> tuple[int, str]:
    """Run a printed ``convmem ...`` command exactly as printed (the program name replaced by the app)."""
    argv = shlex.split(printed)
    assert argv[0].endswith("convmem")
    result = runner.invoke(app, argv[1:], env={"COLUMNS": "200"})
    return result.exit_code, result.output


@pytest.mark.parametrize("spec", ["sqlite:///{tmp}/my chats.db", "{tmp}/chats.db", "files:///{tmp}/chat files"])
def test_the_replay_hint_works_as_printed(tmp_path: Path, spec: str) -> None:
    store = spec.format(tmp=tmp_path)
    code, _, err = run("replay", str(EXAMPLE), "--max-tokens", "8000", "--store", store, "--json")
    assert code == 0, err
    command = err.strip().splitlines()[-1].strip()
    assert command.startswith("convmem sessions show ")
    assert len(command) <= 80 or " --db " in command  # only a long path may make it longer
    code, out = _follow(command)
    assert code == 0, out
    assert "context:" in out


def test_the_replay_hint_on_the_default_database_fits_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVMEM_DB", str(tmp_path / "default.db"))
    code, _, err = run("replay", str(EXAMPLE), "--max-tokens", "8000", "--store", "sqlite", "--json")
    assert code == 0
    last = err.rstrip("\n").splitlines()[-2:]
    assert all(len(line) <= 80 for line in last)  # neither the sentence nor the command wraps
    assert last[1].strip() == f"convmem sessions show {last[0].split()[1]}"
    assert _follow(last[1])[0] == 0


def test_the_list_hint_carries_db_and_user(db: Path) -> None:
    code, out, _ = run("sessions", "list", "--db", str(db), "-u", "bob")
    assert code == 0
    hint = next(line for line in out.splitlines() if "sessions show" in line)
    assert f"--db {shlex.quote(str(db))} -u bob" in hint
    command = hint.split(":", 1)[1].replace(" ID", " bobsessi")
    assert _follow(command)[0] == 0


def test_a_session_of_a_user_not_found_without_u_says_so(db: Path) -> None:
    code, _, err = run("sessions", "show", "bobsession", "--db", str(db), columns=200)
    assert code == 2
    assert "needs -u USER" in err
    listed = re.search(r"`(convmem sessions list[^`]*)`", err)
    assert listed is not None
    assert _follow(listed[1])[0] == 0


@pytest.mark.parametrize(
    "args",
    [
        ["sessions", "list"],
        ["sessions", "show", "abc"],
        ["sessions", "export", "abc"],
        ["sessions", "fork", "abc"],
        ["sessions", "delete", "abc", "--yes"],
    ],
)
@pytest.mark.parametrize("kind", ["path", "sqlite_url", "files_url"])
def test_a_missing_database_is_an_error_naming_it_and_nothing_is_created(
    tmp_path: Path, args: list[str], kind: str
) -> None:
    missing = tmp_path / ("typo" if kind == "files_url" else "typo.db")
    spec = {"path": str(missing), "sqlite_url": f"sqlite://{missing}", "files_url": f"files://{missing}"}[kind]
    code, _, err = run(*args, "--db", spec, columns=200)
    assert code == 2
    assert f"no database at {missing}" in err
    assert not missing.exists()
    assert list(tmp_path.iterdir()) == []


def test_the_default_database_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = tmp_path / "never.db"
    monkeypatch.setenv("CONVMEM_DB", str(default))
    code, out, _ = run("sessions", "list", columns=200)
    assert code == 0
    assert "no sessions yet" in out
    code, _, err = run("sessions", "show", "abc", columns=200)
    assert code == 2
    assert f"the default database {default} does not exist yet" in err
    assert not default.exists()


def test_import_creates_the_database_it_is_pointed_at(db: Path, tmp_path: Path) -> None:
    exported = tmp_path / "bob.jsonl"
    assert run("sessions", "export", "bobsession", "--db", str(db), "-u", "bob", "-o", str(exported))[0] == 0
    fresh = tmp_path / "fresh.db"
    assert run("sessions", "import", str(exported), "--db", str(fresh))[0] == 0
    assert fresh.exists()


def test_a_password_never_appears_in_a_hint() -> None:
    url = "postgresql://app:s3cret-pw@db.internal:5433/chat"
    assert redact(url) == "postgresql://app:***@db.internal:5433/chat"
    assert "s3cret" not in store_flags(url, "u 1")
    assert store_flags(url, "u 1").endswith("-u 'u 1'")
    assert store_flags(None, None) == store_flags("sqlite", None) == ""
