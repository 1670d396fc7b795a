"""Small hand-made inputs for the assembly phases, counted by a counter whose sums can be done by hand.

``WORDS`` counts a text as its whitespace-separated words, a message as its words plus 2, and primes
a reply with 3 tokens. The default block template wraps a block in a ``<name>`` and a ``</name>``
word, so a block of n words costs n + 2 inside its message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from convmem.formats.openai import to_openai
from convmem.messages import Message, ToolCall
from convmem.policy.blockfit import BlockItem, BlockText
from convmem.policy.draft import Assembly
from convmem.policy.units import Entry, Window
from convmem.tokens._base import BaseCounter


class Words(BaseCounter):
    name, exact, reply_priming = "words", True, 3

    def __init__(self) -> None:
        super().__init__(
            tokens_per_message=2,
            tokens_per_name=1,
            count_role=False,
            image_estimate=100,
            audio_estimate=100,
            file_estimate=100,
            tool_call_overhead=1,
            parallel_tool_calls_overhead=0,
        )

    def count_text(self, text: str) -> int:
        return len(text.split())


WORDS = Words()


def words(n: int, word: str = "w") -> str:
    return " ".join([word] * n)


def user(n: int, word: str = "u") -> list[Message]:
    """A user unit of ``n`` words (``n + 2`` tokens)."""
    return [Message(role="user", content=words(n, word))]


def assistant(n: int, word: str = "a") -> list[Message]:
    """An assistant unit of ``n`` words (``n + 2`` tokens)."""
    return [Message(role="assistant", content=words(n, word))]


def tools(results: int, n: int, name: str = "c") -> list[Message]:
    """A tool-call unit: a call (``t`` ``{}``: 2 + 2 + 1 tokens per call) and ``results`` results of ``n`` words."""
    calls = tuple(ToolCall(f"{name}{i}", "t", "{}") for i in range(results))
    out = [Message(role="assistant", tool_calls=calls)]
    return out + [Message(role="tool", tool_call_id=c.id, content=words(n, "r")) for c in calls]


def window(*units: list[Message], pinned: Sequence[str] = (), pending: bool = False) -> Window:
    """A window of ``units`` (each a list of messages), after ``pinned`` system messages; with ``pending``,
    a last unit still awaiting one of its two results."""
    built = Window()
    messages = [Message(role="system", content=text) for text in pinned]
    for unit in units:
        messages += unit
    if pending:
        calls = (ToolCall("open0", "t", "{}"), ToolCall("open1", "t", "{}"))
        messages.append(Message(role="assistant", tool_calls=calls))
        messages.append(Message(role="tool", tool_call_id="open0", content="half"))
    for seq, message in enumerate(messages):
        entry = Entry(seq, message, WORDS.count_message(message))
        if message.role != "system":
            entry.rendered = to_openai(message)
        built.push(entry)
    return built


def block(name: str, n: int, *, priority: int = 1, position: str = "system", per_turn: bool = False) -> BlockText:
    """A block of ``n`` words (``n + 2`` tokens in its message)."""
    return BlockText(name, words(n, name), priority, position, per_turn=per_turn)


def items(name: str, ranks: Sequence[int], *, reserve: int = 0, position: str = "user") -> BlockText:
    """An itemized block: one two-word line per rank, in the order given."""
    lines = tuple(BlockItem(f"{name}{r} x", r) for r in ranks)
    return BlockText(name, "\n".join(i.text for i in lines), 2, position, lines, reserve, per_turn=True)


def inputs(*messages: Message) -> list[tuple[Message, int]]:
    return [(m, WORDS.count_message(m)) for m in messages]


def request(built: Window, **options: Any) -> Assembly:
    """An assembly of ``built`` with a budget of 1,000 and no reserve, unless ``options`` say otherwise."""
    return Assembly(**{"window": built, "counter": WORDS, "budget": 1000, "reserve": 0, **options})
