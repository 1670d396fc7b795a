"""``AsyncClient``: ``AsyncMemory`` served by a convmem service, the async twin of ``convmem.client.Client``.

``await AsyncClient.create(base_url, api_key=..., model=..., **options)``
creates a session with ``Memory``'s options; ``await AsyncClient.open(session_id,
...)`` binds to a stored one. Every request and every answer is the sync
client's (:mod:`convmem.client._core`); only the sending is awaited.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..messages import Message
from ..policy.context import Context
from ..usage import Stats, Usage
from ._core import Call, ClientCore, answer_of, httpx_module

__all__ = ["AsyncClient"]


class AsyncClient(ClientCore):
    """The async twin of :class:`~convmem.client.Client` (``await AsyncClient.create(...)`` or ``.open(...)``)."""

    def __init__(self, base_url: str, *, api_key: str, user_id: str | None = None, timeout: float = 30.0) -> None:
        super().__init__(base_url, api_key, user_id=user_id)
        self._http = httpx_module().AsyncClient(base_url=self.base_url, headers=self._headers, timeout=timeout)

    @classmethod
    async def create(
        cls,
        base_url: str,
        *,
        api_key: str,
        model: str | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
        timeout: float = 30.0,
        **options: Any,
    ) -> AsyncClient:
        """A client on a new session made with ``Memory``'s options."""
        client = cls(base_url, api_key=api_key, user_id=user_id, timeout=timeout)
        try:
            client.bind(await client._send(client.create_call(model, session_id, options)))
        except BaseException:
            await client.aclose()
            raise
        return client

    @classmethod
    async def open(
        cls, session_id: str, *, base_url: str, api_key: str, user_id: str | None = None, timeout: float = 30.0
    ) -> AsyncClient:
        """Bind to a stored session (a unique id prefix is enough)."""
        client = cls(base_url, api_key=api_key, user_id=user_id, timeout=timeout)
        client.session_id = session_id
        try:
            client.bind(await client._send(client.get_call()))
        except BaseException:
            await client.aclose()
            raise
        return client

    async def _send(self, call: Call) -> Any:
        try:
            response = await self._http.request(call.method, call.path, params=call.params, json=call.json)
        except httpx_module().HTTPError as exc:
            raise self.unreachable(exc) from None
        return answer_of(response)

    async def add(self, message: Any) -> Message:
        return (await self.add_many([message]))[0]

    async def add_many(self, messages: Iterable[Any]) -> list[Message]:
        call, batch = self.add_call(messages)
        if not batch:
            return []
        await self._send(call)
        return batch

    async def add_response(self, response: Any, *, format: str | None = None) -> list[Message]:
        return self.messages_of(await self._send(self.response_call(response, format)))

    async def context(self, input: Any = None, *, format: str | None = None) -> Context:
        return self.context_of(await self._send(self.context_call(input, format)))

    async def messages(self, status: Any = None) -> list[Message]:
        out: list[Message] = []
        cursor: int | None = 0
        while cursor is not None:
            page, cursor = self.page_of(await self._send(self.messages_call(status, cursor)))
            out.extend(page)
        return out

    async def clear(self, *, keep_system: bool = True) -> None:
        await self._send(self.simple_call("POST", "/clear", {"keep_system": keep_system}))

    async def rollback_incomplete(self) -> list[Message]:
        return self.messages_of(await self._send(self.simple_call("POST", "/rollback")))

    async def repair(self) -> list[Message]:
        return self.messages_of(await self._send(self.simple_call("POST", "/repair")))

    async def record_usage(self, usage: Any) -> Usage:
        return self.usage_of(await self._send(self.usage_call(usage)))

    async def stats(self) -> Stats:
        return self.stats_of(await self._send(self.get_call()))

    async def export(self) -> bytes:
        return bytes(await self._send(self.simple_call("GET", "/export")))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
