"""Recall on demand: the archive offered to the model as a tool, searched only when the model asks.

A :class:`~convmem.longterm.recall.block.RecallBlock` spends its share of every request, relevant or not. A
:class:`RecallTool` costs its definition in every request instead (a few dozen tokens, counted in the budget
like any tool: ``Memory(tools=[tool.definition])``), and the hits only in the turn whose model calls it:
the definition is a function tool taking one ``query`` (Chat Completions' shape; convmem renders it in
every format's), and :meth:`RecallTool.handle` answers a call with the same lines a block would show, for
the memory's user only (invariant 6), leaving out what the window already holds.

Example::

    recall = RecallIndex()
    tool = RecallTool(recall)
    memory = Memory(model="gpt-4o", user_id="alice", sinks=[recall], tools=[tool.definition])
    ...  # the model calls "recall" with {"query": "where did I park?"}
    output = tool.handle(call.arguments, user_id="alice", session_id=memory.session_id)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...errors import ConfigurationError, InvalidMessageError
from .block import hit_line

if TYPE_CHECKING:
    from .hits import RecallHit
    from .index import Mode, RecallIndex

__all__ = ["DEFAULT_TOOL_K", "MAX_QUERY_CHARS", "NOTHING_FOUND", "RecallTool"]

DEFAULT_TOOL_K = 5
#: A longer query is refused: the model pasted the conversation into it, not a question.
MAX_QUERY_CHARS = 2000
NOTHING_FOUND = "No earlier message matches."
_DESCRIPTION = (
    "Search this user's earlier conversations (older than what you see) for messages about a question. "
    "Call it when the answer depends on something said before that is not in the conversation above."
)


class RecallTool:
    """The archive as a tool the model calls: its definition, and the handler of a call.

    Args:
        index: the recall index the memory archives into (as a sink).
        name: the tool's name (a function name: letters, digits, ``_`` and ``-``).
        k: hits returned per call at most.
        mode: ``lexical``, ``dense`` or ``hybrid`` (default: the index's).
        line: how one hit is written (the recall block's lines by default).
        description: what the model reads about the tool.
    """

    def __init__(
        self,
        index: RecallIndex,
        *,
        name: str = "recall",
        k: int = DEFAULT_TOOL_K,
        mode: Mode | None = None,
        line: Callable[[RecallHit], str] = hit_line,
        description: str = _DESCRIPTION,
    ) -> None:
        if not name or not name.replace("_", "").replace("-", "").isalnum() or len(name) > 64:
            raise ConfigurationError(f"tool name must be 1-64 letters, digits, '_' or '-', got {name!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigurationError(f"k must be a positive integer, got {k!r}")
        self.index, self.name, self.k, self.mode, self.line, self.description = index, name, k, mode, line, description
        self.last_hits: list[RecallHit] = []  # what the latest call returned, for inspection

    @property
    def definition(self) -> dict[str, Any]:
        """The tool as a Chat Completions function tool (``Memory(tools=[...])`` renders it for any format)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "What to look for, as a question or keywords."}
                    },
                    "required": ["query"],
                },
            },
        }

    def handle(
        self,
        arguments: str | Mapping[str, Any],
        *,
        user_id: str | None,
        session_id: str | None = None,
        window_start: int | None = None,
        now: datetime | None = None,
    ) -> str:
        """The tool's output for one call: the hits' lines in the order they were said, or :data:`NOTHING_FOUND`.

        ``arguments`` is the call's arguments as the provider sent them: a JSON string (OpenAI) or an object
        (Anthropic's ``input``). ``session_id`` and ``window_start`` leave out that session's messages from
        ``window_start`` on, which the model already sees. Malformed arguments raise
        :class:`~convmem.errors.InvalidMessageError` naming what is wrong; nothing is searched.
        """
        query = _query(arguments)
        window = (session_id, window_start) if session_id is not None and window_start is not None else None
        hits = self.index.search(query, user_id=user_id, k=self.k, mode=self.mode, exclude_window=window, now=now)
        hits.sort(key=lambda h: (h.doc.created_at, h.doc.session_id, h.doc.seq))
        self.last_hits = hits
        return "\n".join(self.line(h) for h in hits) if hits else NOTHING_FOUND


def _query(arguments: str | Mapping[str, Any]) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as error:
            raise InvalidMessageError(f"tool arguments are not JSON ({error.msg})", field="arguments") from None
    if not isinstance(arguments, Mapping):
        raise InvalidMessageError("tool arguments must be an object with a 'query'", field="arguments")
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise InvalidMessageError("'query' must be a non-empty string", field="arguments.query")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidMessageError(
            f"'query' has {len(query)} characters; at most {MAX_QUERY_CHARS}", field="arguments.query"
        )
    return query
