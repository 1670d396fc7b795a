"""``Client``: ``Memory`` served by a convmem service (``AsyncClient``, its async twin, is in :mod:`.aio`).

It has ``Memory``'s methods, so moving an app from in-process memory to the
service is one line::

    memory = Memory(model="gpt-4o", max_output_tokens=1024)
    memory = Client("http://127.0.0.1:8000", api_key=KEY, model="gpt-4o", max_output_tokens=1024)

Constructing a client creates its session on the service with these options
(they are saved with the session, and decide its every context);
``Client.open(session_id, ...)`` binds to a stored one. The twins share every
request and every answer (:mod:`convmem.client._core`) and differ only in how
they send them (httpx, sync or async). Errors come back as the class the
service raised. Install with ``pip install httpx`` (part of the ``server`` extra).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..messages import Message
from ..policy.context import Context
from ..usage import Stats, Usage
from ._core import Call, ClientCore, answer_of, httpx_module
from .aio import AsyncClient

__all__ = ["AsyncClient", "Client"]


class Client(ClientCore):
    """A session on a convmem service, with ``Memory``'s synchronous API."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str,
        model: str | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
        timeout: float = 30.0,
        **options: Any,
    ) -> None:
        super().__init__(base_url, api_key, user_id=user_id)
        self._http = httpx_module().Client(base_url=self.base_url, headers=self._headers, timeout=timeout)
        try:
            self.bind(self._send(self.create_call(model, session_id, options)))
        except BaseException:
            self._http.close()
            raise

    @classmethod
    def open(
        cls, session_id: str, *, base_url: str, api_key: str, user_id: str | None = None, timeout: float = 30.0
    ) -> Client:
        """Bind to a stored session (a unique id prefix is enough)."""
        probe = cls.__new__(cls)
        ClientCore.__init__(probe, base_url, api_key, user_id=user_id)
        probe.session_id = session_id
        probe._http = httpx_module().Client(base_url=probe.base_url, headers=probe._headers, timeout=timeout)
        try:
            probe.bind(probe._send(probe.get_call()))
        except BaseException:
            probe._http.close()
            raise
        return probe

    def _send(self, call: Call) -> Any:
        try:
            response = self._http.request(call.method, call.path, params=call.params, json=call.json)
        except httpx_module().HTTPError as exc:
            raise self.unreachable(exc) from None
        return answer_of(response)

    def add(self, message: Any) -> Message:
        """Add one message; returns it as stored."""
        return self.add_many([message])[0]

    def add_many(self, messages: Iterable[Any]) -> list[Message]:
        """Add a batch in one write; nothing is stored if any message is invalid."""
        call, batch = self.add_call(messages)
        if not batch:
            return []
        self._send(call)
        return batch

    def add_response(self, response: Any, *, format: str | None = None) -> list[Message]:
        """Add a provider response's output and record its usage."""
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

    def clear(self, *, keep_system: bool = True) -> None:
        self._send(self.simple_call("POST", "/clear", {"keep_system": keep_system}))

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

    def fork(self, at_seq: int) -> Client:
        """A client on a new session sharing this one's history up to ``at_seq``."""
        body = self._send(self.simple_call("POST", "/fork", {"at_seq": at_seq}))
        return Client.open(
            body["id"], base_url=self.base_url, api_key=self._headers["Authorization"][7:], user_id=self.user_id
        )

    def export(self) -> bytes:
        return bytes(self._send(self.simple_call("GET", "/export")))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
