"""``Client`` and ``AsyncClient``: ``Memory`` and ``AsyncMemory`` served by a convmem service.

They have ``Memory``'s methods, so moving an app from in-process memory to the
service is one line::

    memory = Memory(model="gpt-4o", max_output_tokens=1024)
    memory = Client("http://127.0.0.1:8000", api_key=KEY, model="gpt-4o", max_output_tokens=1024)

Constructing a client creates its session on the service with these options
(they are saved with the session, and decide its every context);
``Client.open(session_id, ...)`` binds to a stored one. Both twins share
every request and every answer (:mod:`convmem.client._core`) and differ only in
how they send them (httpx, sync or async). Install with ``pip install httpx``
(part of the ``server`` extra).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import ConfigurationError, StoreError
from ..messages import Message
from ..policy.context import Context
from ..usage import Stats, Usage
from ._core import Call, ClientCore, error_from

__all__ = ["AsyncClient", "Client"]


def _httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise ConfigurationError("the convmem client needs httpx: pip install 'convmem[server]'") from None
    return httpx


def _answer(response: Any) -> Any:
    if response.status_code >= 400:
        try:
            problem = response.json()
        except ValueError:
            problem = None
        raise error_from(response.status_code, problem if isinstance(problem, dict) else None)
    if response.status_code == 204:
        return None
    if response.headers.get("content-type", "").startswith("application/x-ndjson"):
        return response.content
    return response.json()


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
        _bind: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(base_url, api_key, user_id=user_id)
        self._http = _httpx().Client(base_url=self.base_url, headers=self._headers, timeout=timeout)
        try:
            self.bind(_bind if _bind is not None else self._send(self.create_call(model, session_id, options)))
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
        probe._http = _httpx().Client(base_url=probe.base_url, headers=probe._headers, timeout=timeout)
        try:
            probe.bind(probe._send(probe.get_call()))
        except BaseException:
            probe._http.close()
            raise
        return probe

    def _send(self, call: Call) -> Any:
        httpx = _httpx()
        try:
            response = self._http.request(call.method, call.path, params=call.params, json=call.json)
        except httpx.HTTPError as exc:
            raise StoreError(f"convmem service at {self.base_url} unreachable: {type(exc).__name__}") from None
        return _answer(response)

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
        body = response.model_dump(exclude_none=True) if hasattr(response, "model_dump") else dict(response)
        return self.messages_of(
            self._send(self.simple_call("POST", "/responses", {"response": body, "format": format}))
        )

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
        body = usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)
        return self.usage_of(self._send(self.simple_call("POST", "/usage", {"usage": body})))

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


class AsyncClient(ClientCore):
    """The async twin of :class:`Client` (``await AsyncClient.create(...)`` or ``await AsyncClient.open(...)``)."""

    def __init__(self, base_url: str, *, api_key: str, user_id: str | None = None, timeout: float = 30.0) -> None:
        super().__init__(base_url, api_key, user_id=user_id)
        self._http = _httpx().AsyncClient(base_url=self.base_url, headers=self._headers, timeout=timeout)

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
        client = cls(base_url, api_key=api_key, user_id=user_id, timeout=timeout)
        client.session_id = session_id
        try:
            client.bind(await client._send(client.get_call()))
        except BaseException:
            await client.aclose()
            raise
        return client

    async def _send(self, call: Call) -> Any:
        httpx = _httpx()
        try:
            response = await self._http.request(call.method, call.path, params=call.params, json=call.json)
        except httpx.HTTPError as exc:
            raise StoreError(f"convmem service at {self.base_url} unreachable: {type(exc).__name__}") from None
        return _answer(response)

    async def add(self, message: Any) -> Message:
        return (await self.add_many([message]))[0]

    async def add_many(self, messages: Iterable[Any]) -> list[Message]:
        call, batch = self.add_call(messages)
        if not batch:
            return []
        await self._send(call)
        return batch

    async def add_response(self, response: Any, *, format: str | None = None) -> list[Message]:
        body = response.model_dump(exclude_none=True) if hasattr(response, "model_dump") else dict(response)
        return self.messages_of(
            await self._send(self.simple_call("POST", "/responses", {"response": body, "format": format}))
        )

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
        body = usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)
        return self.usage_of(await self._send(self.simple_call("POST", "/usage", {"usage": body})))

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
