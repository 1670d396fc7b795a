"""Imports obey the rules of ``add``, and the counts they carry are never believed: every backend runs these.

Two properties, over random data:

* A random export (any order of user, assistant, tool-calling and tool messages, a window starting anywhere)
  is either refused whole (a ``StoreError``, no session left behind) or imported, and then it is what a memory
  could have stored: the same messages, added one by one, pass ``Memory.add``'s checks, the window starts at a
  unit, and the reopened session renders in every format and exports again byte for byte.
* An export whose every token count (and its summary's) is forged never lets a request exceed its budget as the
  counter of the memory that opens it counts the request: opened as another model, with another counter, or as
  the model it was written with.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..errors import DamagedSessionError, InvalidMessageError, SessionNotFoundError, StoreError
from ..formats import parse_messages
from ..memory import Memory
from ..messages import PINNED_ROLES, Message, StoredMessage, ToolCall
from ..session import SessionInfo, SessionState, SummaryRecord
from ..stores._export import export_header, export_line

__all__ = ["ImportTests"]

_NOW = datetime(2025, 1, 1, tzinfo=timezone.utc)
_SETTINGS = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.differing_executors],
)


@st.composite
def _messages(draw: st.DrawFn) -> list[Message]:
    """Messages in any order: results may answer no call, calls may stay open, roles follow no rule."""
    out: list[Message] = []
    for n in range(draw(st.integers(0, 9))):
        kind = draw(st.sampled_from(["user", "assistant", "call", "tool", "system"]))
        id_ = f"m{n}"
        if kind == "call":
            calls = tuple(
                ToolCall(f"c{draw(st.integers(0, 3))}_{n}", "f", "{}") for _ in range(draw(st.integers(1, 2)))
            )
            calls = tuple({c.id: c for c in calls}.values())
            out.append(Message(role="assistant", content=None, tool_calls=calls, id=id_, created_at=_NOW))
        elif kind == "tool":
            previous = [c.id for m in out for c in m.tool_calls]
            answers = bool(previous) and draw(st.booleans())
            call: str = draw(st.sampled_from(previous)) if answers else f"x{n}"
            out.append(Message(role="tool", content=f"result {n}", tool_call_id=call, id=id_, created_at=_NOW))
        else:
            out.append(Message(role=kind, content=f"{kind} {n}", id=id_, created_at=_NOW))  # type: ignore[arg-type]
    return out


def _export(session_id: str, rows: list[StoredMessage], state: SessionState, model: str | None = None) -> bytes:
    info = SessionInfo(session_id, None, None, model, {}, _NOW, _NOW, len(rows), sum(r.tokens for r in rows))
    next_seq = rows[-1].seq + 1 if rows else 0
    return export_header(info, state, next_seq) + b"".join(map(export_line, rows))


def _add_accepts(messages: list[Message], window_start: int) -> bool:
    """The oracle: ``Memory.add`` takes these messages one by one, and the window starts at a unit."""
    memory = Memory(max_tokens=100_000)
    try:
        for message in messages:
            memory.add(message)
    except InvalidMessageError:
        return False
    first = next((m for m in messages[window_start:] if m.role not in PINNED_ROLES), None)
    return first is None or first.role != "tool"


class ImportTests:
    """The import properties (the suite class supplies the ``store`` fixture and ``sessions``)."""

    @staticmethod
    def sessions(store: Any) -> Any:
        raise NotImplementedError

    @_SETTINGS
    @given(messages=_messages(), start=st.integers(0, 9))
    def test_a_random_import_is_a_valid_conversation_or_refused_whole(
        self, store: Any, messages: list[Message], start: int
    ) -> None:
        store = self.sessions(store)
        user, start = uuid.uuid4().hex, min(start, len(messages))
        rows = [StoredMessage(seq, m, 3) for seq, m in enumerate(messages)]
        data = _export("s", rows, SessionState(window_start=start))
        valid = _add_accepts(messages, start)
        if not valid:
            with pytest.raises(StoreError, match=r"^import: line \d+: .*nothing was imported"):
                store.import_jsonl(data, user_id=user)
            with pytest.raises(SessionNotFoundError):  # refused whole
                store.get_session("s", user_id=user)
            return
        store.import_jsonl(data, user_id=user)  # a conversation add takes is never refused
        assert store.export_jsonl("s", user_id=user) == data
        memory = Memory.open("s", store=store, user_id=user, max_tokens=100_000)
        for format in ("openai", "anthropic", "responses"):
            memory.context(format=format)  # renders: a provider would take it
        store.delete_session("s", user_id=user)

    @_SETTINGS
    @given(
        sizes=st.lists(st.integers(1, 120), min_size=4, max_size=24),
        forged=st.integers(0, 2),
        target=st.sampled_from(
            [{"model": "gpt-4"}, {"model": "gpt-4o"}, {"counter": "approximate", "model": "gpt-4o"}]
        ),
    )
    def test_forged_counts_never_let_a_request_exceed_its_budget(
        self, store: Any, sizes: list[int], forged: int, target: dict[str, Any]
    ) -> None:
        store = self.sessions(store)
        user = uuid.uuid4().hex
        words = ["tokens", "count", "what", "is", "sent", "42", "Zürich", "☀"]
        messages = [
            Message(
                role="user" if n % 2 == 0 else "assistant",
                content=" ".join(words[(n + k) % len(words)] for k in range(size)),
                id=f"m{n}",
                created_at=_NOW,
            )
            for n, size in enumerate(sizes)
        ]
        rows = [StoredMessage(seq, m, forged) for seq, m in enumerate(messages)]  # every count a lie
        summary = SummaryRecord("user: " + "an earlier question " * 40, 0, 0, forged, _NOW)
        state = SessionState(window_start=1, folded_to=0, summary=summary, stats={"counted_by": "tiktoken:o200k_base"})
        store.import_jsonl(_export("s", rows, state, "gpt-4o"), user_id=user)
        budget = 700
        memory = Memory.open("s", store=store, user_id=user, max_tokens=budget, max_output_tokens=100, **target)
        counter = memory.counter
        for turn in range(3):
            context = memory.context(format="openai")
            sent = sum(counter.count_message(m) for m in parse_messages(context.messages)) + counter.reply_priming
            assert sent <= budget - memory.reserved_output, f"turn {turn}: {sent} tokens sent for {budget} - 100"
            assert context.account.total == sent
            memory.add(Message(role="user", content="and another question " * 10))
        store.delete_session("s", user_id=user)

    def test_a_stored_window_that_starts_at_a_tool_result_is_a_store_error_naming_the_session(self, store: Any) -> None:
        store = self.sessions(store)
        memory = Memory(max_tokens=10_000, store=store, session_id="loop", user_id="u")
        call = ToolCall("c1", "f", "{}")
        memory.add_many(
            [
                Message(role="user", content="look it up"),
                Message(role="assistant", content=None, tool_calls=(call,)),
                Message(role="tool", tool_call_id="c1", content="found"),
            ]
        )
        loaded = store.load("loop", user_id="u")
        broken = SessionState(2, -1, 0, None, dict(loaded.state.stats), loaded.state.version)
        store.save_state("loop", broken, expected_version=loaded.state.version, user_id="u")  # what no add made
        with pytest.raises(DamagedSessionError, match=r"session 'loop'.*seq 2.*does not follow") as info:
            Memory.open("loop", store=store, user_id="u")
        assert info.value.session_id == "loop"
