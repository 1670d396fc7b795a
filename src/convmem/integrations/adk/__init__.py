"""Google ADK sessions and memory kept by convmem: sessions, events and state in a convmem store, budgeted requests.

ADK's session services hand the model every event of a session, so a long session
outgrows the context window, and its database service reads every session row
to list them. These keep an ADK app's sessions in a convmem store (SQLite,
PostgreSQL, Redis, in memory) and let convmem's budget decide what each model
call sees::

    Runner(..., session_service=ConvmemSessionService(store), memory_service=ConvmemMemoryService(store),
           plugins=[ConvmemContextPlugin(sessions)])
      create_session(app, user, state)  ->  an empty convmem session "adk:<app>:<id>" of that user
      append_event(session, event)      ->  its messages -> memory.add_many(...) (the event id is the
                                            message id: a re-delivered event stores nothing)
                                            the whole event is kept in the first message's metadata
      get_session(...)                  ->  the events, read back from the stored messages, in order
      before each model call (plugin)   ->  memory.context(...) -> llm_request.contents, within the budget,
                                            the instruction and the tools counted, tool calls whole
      search_memory(app, user, query)   ->  the user's blocks, the facts valid now, the recall hits

An event becomes convmem messages as: a ``model`` content's text and function calls ->
one assistant message; a ``user`` content's function responses -> one tool message
each, then its text -> a user message. Thought parts are not sent back. An event with
nothing the model reads (only a state delta, an agent transfer, only non-text parts)
is kept whole in the session's metadata instead, so ``get_session`` still returns it.

State keeps ADK's prefixes: ``app:`` keys in the app's registry session (user None),
``user:`` keys in the user's registry session (``adk#<app>#app`` and ``adk#<app>#user``, never listed),
the rest in the session's metadata, ``temp:`` keys nowhere (ADK's rule). A state write
follows the event's messages (two writes, not one: a crash between them keeps the
event and loses its delta, and a retry of the event writes the delta again); two
processes that write the same session's state at once keep the later one.

Sessions are scoped by user (convmem's rule), so ``list_sessions`` needs a user id.
A session service with many sessions lists them from the store's own session index
(``bench/adk.py`` times it beside ADK's ``DatabaseSessionService``).
"""

from __future__ import annotations

from .. import missing

try:
    import google.adk  # noqa: F401  (first, so a missing framework is named before any submodule loads)
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test with a blocked import
    raise missing("google-adk", "adk") from exc

from ._events import event_messages, session_key
from .memory import ConvmemMemoryService
from .plugin import ConvmemContextPlugin
from .sessions import ConvmemSessionService

__all__ = ["ConvmemContextPlugin", "ConvmemMemoryService", "ConvmemSessionService", "event_messages", "session_key"]
