"""The chat client's configuration, retry policy and the LiteLLM adapter."""

from __future__ import annotations

import random
import sys
import types
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from convmem.errors import ConfigurationError, LLMError
from convmem.llm import LiteLLMChat, OpenAIChat, OpenAICompatibleSummarizer, RetryPolicy
from convmem.llm.client import ENV_API_KEY, ENV_BASE_URL, ENV_MODEL

from .conftest import API_KEY, FAST
from .server import ChatServer, Reply


def test_configuration_comes_from_arguments_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_MODEL, "llama3.1")
    monkeypatch.setenv(ENV_BASE_URL, "http://localhost:11434/v1/")
    monkeypatch.delenv(ENV_API_KEY, raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    chat = OpenAIChat()
    assert (chat.model, chat.base_url) == ("llama3.1", "http://localhost:11434/v1")  # local: no key needed
    assert chat.endpoint == "POST http://localhost:11434/v1/chat/completions"
    assert OpenAIChat("qwen2.5", base_url="http://other/v1").model == "qwen2.5"
    monkeypatch.setenv(ENV_API_KEY, API_KEY)
    assert "SECRET" not in repr(OpenAIChat())
    assert "SECRET" not in repr(OpenAICompatibleSummarizer())


def test_missing_model_or_key_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_MODEL, ENV_BASE_URL, ENV_API_KEY, "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError, match=ENV_MODEL):
        OpenAIChat()
    with pytest.raises(ConfigurationError, match=ENV_API_KEY):
        OpenAIChat("gpt-4o-mini")  # the OpenAI API itself needs a key
    with pytest.raises(ConfigurationError, match="timeout"):
        OpenAIChat("m", base_url="http://x/v1", timeout=0)
    with pytest.raises(ConfigurationError, match="jitter"):
        RetryPolicy(jitter=2)


def test_backoff_grows_exponentially_with_bounded_jitter() -> None:
    policy = RetryPolicy(initial=1.0, multiplier=2.0, maximum=5.0, jitter=0.5)
    rng = random.Random(7)
    for attempt, base in enumerate([1.0, 2.0, 4.0, 5.0, 5.0]):
        delays = {policy.backoff(attempt, rng) for _ in range(50)}
        assert all(base * 0.5 <= d <= base for d in delays)
        assert len(delays) > 1
    assert RetryPolicy(jitter=0.0).backoff(1, rng) == 1.0


def test_retries_are_bounded_and_retry_after_ms_is_read(server: ChatServer) -> None:
    server.script(*[Reply.error(429, "busy", headers={"retry-after-ms": "10"})] * 5)
    chat = OpenAIChat("m", base_url=server.base_url, api_key=API_KEY, retry=FAST)
    with pytest.raises(LLMError, match=r"HTTP 429: busy \(3 attempts\)") as caught:
        chat.complete([{"role": "user", "content": "hi"}], max_tokens=5)
    assert caught.value.status == 429
    assert len(server.requests) == 3
    chat.close()


async def test_async_client_retries_5xx_then_succeeds(server: ChatServer) -> None:
    server.script(Reply.error(502, "bad gateway"), Reply.text("fine", prompt_tokens=7, completion_tokens=2))
    chat = OpenAIChat("gpt-4o-mini", base_url=server.base_url, api_key=API_KEY, retry=FAST)
    completion = await chat.acomplete([{"role": "user", "content": "hi"}], max_tokens=5)
    assert completion.text == "fine"
    assert completion.usage is not None
    assert (completion.usage.model, completion.usage.usage.input_tokens) == ("gpt-4o-mini", 7)
    await chat.aclose()


@pytest.fixture
def fake_litellm(server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """A stand-in ``litellm`` module that forwards to the local server through the real OpenAI SDK."""
    calls: list[dict[str, Any]] = []
    sdk = openai.OpenAI(api_key="unused", base_url=server.base_url, max_retries=0)
    module = types.ModuleType("litellm")

    def completion(**request: Any) -> Any:
        calls.append(request)
        keep = {k: request[k] for k in ("model", "messages", "max_tokens", "temperature", "timeout")}
        return sdk.chat.completions.create(**keep)

    module.completion = completion  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "litellm", module)
    yield calls
    sdk.close()


def test_litellm_adapter_retries_and_converts_like_the_openai_client(
    server: ChatServer, fake_litellm: list[dict[str, Any]]
) -> None:
    server.script(Reply.error(500, "boom"), Reply.text("- Facts: x"), Reply.error(404, "no such model"))
    chat = LiteLLMChat("ollama/llama3.1", retry=FAST, api_base="http://ollama:11434", api_key=API_KEY)
    summarizer = OpenAICompatibleSummarizer(chat=chat, max_input_tokens=2000)
    from convmem import Message

    assert summarizer.summarize(None, [Message(role="user", content="hi")], 50) == "- Facts: x"
    assert fake_litellm[0]["num_retries"] == 0
    assert fake_litellm[0]["api_base"] == "http://ollama:11434"
    with pytest.raises(LLMError, match=r"litellm http://ollama:11434 .*HTTP 404") as caught:
        summarizer.summarize(None, [Message(role="user", content="hi")], 50)
    assert "SECRET" not in str(caught.value)


def test_litellm_missing_gives_the_exact_pip_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)  # import litellm now raises ImportError
    with pytest.raises(ConfigurationError, match=r"pip install 'convmem\[litellm\]'"):
        LiteLLMChat("ollama/llama3.1")


def test_every_exported_name_resolves_lazily() -> None:
    import convmem.llm

    assert convmem.llm.__all__ == sorted(convmem.llm.__all__)
    for name in convmem.llm.__all__:
        assert getattr(convmem.llm, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        convmem.llm.Nope  # noqa: B018
