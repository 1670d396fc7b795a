"""``Client``: ``Memory`` served by a convmem service (``AsyncClient``, its async twin, is in :mod:`.aio`).

It has ``Memory``'s methods (both keep :class:`~convmem.memory.protocol.MemoryLike`),
so moving an app from in-process memory to the service is one line::

    memory = Memory(model="gpt-4o", max_output_tokens=1024)
    memory = Client("http://127.0.0.1:8000", api_key=KEY, model="gpt-4o", max_output_tokens=1024)

Constructing a client creates its session on the service with these options
(they are saved with the session, and decide its every context);
``Client.open(session_id, ...)`` binds to a stored one. Beyond the session the
client reaches the rest of the user's memory: the user's sessions (list, search,
fork, export, import, delete), ``client.facts``, ``client.blocks`` and
``client.recall(query)``.

Retries: a call that is safe to repeat is sent again on a timeout, a dropped
connection or a 503/502/504/429, up to ``Retry.attempts`` times with backoff
(:mod:`convmem.client._retry`). Adds are safe: the client stamps every message's
id before the first attempt and resends the same ids, so a message whose first
attempt was stored after all is stored once; an error names the ids it sent
(``error.message_ids``), for a retry of the app's own. The twins share every
request and every answer (:mod:`convmem.client._core`, :mod:`convmem.client._longterm`)
and differ only in how they send them (httpx, sync or async). Errors come back as
the class the service raised. Install with ``pip install httpx`` (part of the
``server`` extra).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from ..longterm.recall.hits import RecallHit
from ..messages import Message
from ..policy.context import Context
from ..session import SessionInfo
from ..usage import Stats, Usage
from ._core import Call, ClientCore, answer_of, httpx_module, never_sent
from ._longterm import delete_call, hits_of, import_call, recall_call, session_of, sessions_call
from ._retry import Retry
from .aio import AsyncClient
from .longterm import ClientBlocks, ClientFacts

__all__ = ["AsyncClient", "Client", "Retry"]


class Client(ClientCore):
    """A session on a convmem service, with ``Memory``'s synchronous API.

    Args:
        base_url: the service's address.
        api_key: a key made by ``convmem keys create`` (sent only in the ``Authorization`` header).
        model, session_id, **options: the session's, as ``Memory`` takes them.
        user_id: the user the session belongs to (None: the key's tenant's anonymous user).
        timeout: seconds per attempt.
        retry: how calls are retried (``Retry(attempts=1)``: never).
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str,
        model: str | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
        timeout: float = 30.0,
        retry: Retry | None = None,
        **options: Any,
    ) -> None:
        self._connect(base_url, api_key, user_id, timeout, retry)
        try:
            self.bind(self._send(self.create_call(model, session_id, options)))
        except BaseException:
            self._http.close()
            raise

    def _connect(self, base_url: str, api_key: str, user_id: str | None, timeout: float, retry: Retry | None) -> None:
        ClientCore.__init__(self, base_url, api_key, user_id=user_id, retry=retry)
        self._http = httpx_module().Client(base_url=self.base_url, headers=self._headers, timeout=timeout)
        self._timeout = timeout
        self.facts = ClientFacts(self._send, self._params)
        self.blocks = ClientBlocks(self._send, self._params, user_id)

    @classmethod
    def open(
        cls,
        session_id: str,
        *,
        base_url: str,
        api_key: str,
        user_id: str | None = None,
        timeout: float = 30.0,
        retry: Retry | None = None,
    ) -> Client:
        """Bind to a stored session (a unique id prefix is enough)."""
        probe = cls.__new__(cls)
        probe._connect(base_url, api_key, user_id, timeout, retry)
        probe.session_id = session_id
        try:
            probe.bind(probe._send(probe.get_call(prefix=True)))
        except BaseException:
            probe._http.close()
            raise
        return probe

    def _send(self, call: Call) -> Any:
        """Send ``call``, again while that is safe and attempts are left; its answer, or its error."""
        attempt = 0
        while True:
            attempt += 1
            try:
                request = self._http.request
                response = request(call.method, call.path, params=call.params, json=call.json, headers=call.headers)
            except httpx_module().HTTPError as exc:
                wait = self.wait_after(call, attempt, status=None, sent=not never_sent(exc))
                if wait is None:
                    raise self.unreachable(exc, call) from None
                time.sleep(wait)
                continue
            if attempt > 1 and call.landed is not None and response.status_code == call.landed:
                return self._send(call.landed_call) if call.landed_call is not None else None
            if response.status_code >= 400:
                wait = self.wait_after(
                    call, attempt, status=response.status_code, retry_after=response.headers.get("retry-after")
                )
                if wait is not None:
                    time.sleep(wait)
                    continue
            return answer_of(response, call)

    # -- the session (Memory's API) ----------------------------------------------------------
    def add(self, message: Any) -> Message:
        """Add one message; returns it as stored. Its id is its idempotency key (see ``Memory.add``)."""
        return self.add_many([message])[0]

    def add_many(self, messages: Iterable[Any]) -> list[Message]:
        """Add a batch in one write; nothing is stored if any message is invalid."""
        call, batch = self.add_call(messages)
        if not batch:
            return []
        self._send(call)
        return batch

    def add_response(self, response: Any, *, format: str | None = None) -> list[Message]:
        """Add a provider response's output and record its usage (once, however often it is sent)."""
        return self.messages_of(self._send(self.response_call(response, format)))

    def context(self, input: Any = None, *, format: str | None = None) -> Context:
        """The messages for the next request, within the budget, with an account of them."""
        return self.context_of(self._send(self.context_call(input, format)))

    def messages(self, status: Any = None) -> list[Message]:
        """Every stored message, oldest first, optionally only those of the given status(es)."""
        out: list[Message] = []
        cursor: int | None = 0
        while cursor is not None:
            page, cursor = self.page_of(self._send(self.messages_call(status, cursor)))
            out.extend(page)
        return out

    def refresh(self) -> None:
        """Nothing to catch up with: the service reads the session anew for every call."""

    def clear(self, *, keep_system: bool = True) -> None:
        self._send(self.simple_call("POST", "/clear", {"keep_system": keep_system}, retry=True))

    def rollback_incomplete(self) -> list[Message]:
        return self.messages_of(self._send(self.simple_call("POST", "/rollback")))

    def repair(self) -> list[Message]:
        return self.messages_of(self._send(self.simple_call("POST", "/repair")))

    def record_usage(self, usage: Any) -> Usage:
        return self.usage_of(self._send(self.usage_call(usage)))

    def stats(self) -> Stats:
        return self.stats_of(self._send(self.get_call()))

    @property
    def budget(self) -> int:
        return int(self._send(self.get_call())["budget"])

    @property
    def reserved_output(self) -> int:
        return int(self._send(self.get_call())["reserved_output"])

    @property
    def pending_tool_calls(self) -> list[str]:
        return list(self._send(self.get_call())["pending_tool_calls"])

    # -- the user's sessions -----------------------------------------------------------------
    def list_sessions(self, *, limit: int = 50) -> list[SessionInfo]:
        """The user's sessions, most recently updated first."""
        return [session_of(s) for s in self._send(sessions_call(self._params(), limit, None))["items"]]

    def search_sessions(self, query: str, *, limit: int = 50) -> list[SessionInfo]:
        """The user's sessions whose id, title or metadata holds ``query`` (case-insensitive)."""
        return [session_of(s) for s in self._send(sessions_call(self._params(), limit, query))["items"]]

    def fork(self, at_seq: int) -> Client:
        """A client on a new session sharing this one's history up to ``at_seq``."""
        body = self._send(self.simple_call("POST", "/fork", {"at_seq": at_seq}))
        return self._other(body["id"])

    def export(self) -> bytes:
        """The session as versioned JSONL (lossless)."""
        return bytes(self._send(self.simple_call("GET", "/export", retry=True)))

    def import_session(self, data: bytes | str, *, session_id: str | None = None) -> Client:
        """Import an export (all or nothing) as a new session of this user; a client on it."""
        body = self._send(import_call(self._params(), data, session_id))
        return self._other(body["id"])

    def delete(self) -> None:
        """Delete this session and its messages (history its forks share stays for them)."""
        self._send(delete_call(self._params(), self.session_id))

    def _other(self, session_id: str) -> Client:
        key = self._headers["Authorization"][7:]
        return Client.open(
            session_id,
            base_url=self.base_url,
            api_key=key,
            user_id=self.user_id,
            timeout=self._timeout,
            retry=self.retry,
        )

    # -- the user's recall -------------------------------------------------------------------
    def recall(
        self, query: str, *, k: int = 10, mode: str | None = None, session_id: str | None = None
    ) -> list[RecallHit]:
        """Search the user's archived messages (every session, or ``session_id``'s); best first."""
        return hits_of(self._send(recall_call(self._params(), query, k, mode, session_id)), self.user_id)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
