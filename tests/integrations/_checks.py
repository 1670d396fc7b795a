"""The checks every framework test makes on every model call of its real agent loop.

A request is given as convmem Messages (each test converts its framework's request
with convmem's own parsers or a small explicit mapping); the checks read only those.
"""

from __future__ import annotations

from collections.abc import Sequence

from convmem import Message
from convmem.formats import render
from convmem.tokens import TokenCounter
from tests.validators import validate_openai


def request_tokens(counter: TokenCounter, messages: Sequence[Message]) -> int:
    """Tokens of a request's messages as the model's counter counts them (reply priming included)."""
    return sum(counter.count_message(m) for m in messages) + counter.reply_priming


def check_request(counter: TokenCounter, messages: Sequence[Message], *, limit: int, system: str) -> int:
    """Within ``limit`` tokens, no tool call without all its results (nor a result without its call),
    and the system prompt first and whole. Returns the request's tokens."""
    validate_openai(render(list(messages), "openai"))  # type: ignore[arg-type]
    assert messages[0].role in ("system", "developer"), f"the system prompt is gone: {messages[0]}"
    assert messages[0].text == system, f"the system prompt changed: {messages[0].text!r}"
    tokens = request_tokens(counter, messages)
    assert tokens <= limit, f"the request has {tokens} tokens, over the limit of {limit}"
    return tokens


def tool_output(city: str) -> str:
    """A tool result of about 120 tokens, different per city, so a long tool loop outgrows a small budget."""
    return f"Forecast for {city}: " + " ".join(f"day {d}: {10 + d} degrees, wind {d * 3} km/h;" for d in range(12))
