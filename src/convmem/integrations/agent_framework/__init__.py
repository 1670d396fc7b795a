"""Microsoft Agent Framework, kept by convmem: a session's history and a user's long-term memory.

* ``history.py``: ``ConvmemHistoryProvider``, the ``HistoryProvider`` (the framework's chat message store)
  whose history is a convmem memory's budgeted context, stored call by call.
* ``memory.py``: ``ConvmemContextProvider``, a ``ContextProvider`` that gives each run the user's facts,
  working blocks and recalled messages from a convmem store (within a token cap), and files each run's
  messages in the user's recall archive, for agents whose history lives elsewhere (a service-side thread).

Both need ``convmem[agent-framework]``.
"""

from __future__ import annotations

from .. import missing

try:  # here too, not only in the modules: a module imported before is not imported again
    import agent_framework  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test with a blocked import
    raise missing("agent-framework-core", "agent-framework") from exc

from .history import ConvmemHistoryProvider
from .memory import ConvmemContextProvider

__all__ = ["ConvmemContextProvider", "ConvmemHistoryProvider"]
