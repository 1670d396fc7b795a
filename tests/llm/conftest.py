"""Fixtures for the LLM adapter tests: a scripted chat server and clients with fast retries."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from convmem.llm import OpenAICompatibleSummarizer, RetryPolicy

from .server import ChatServer

API_KEY = "sk-test-SECRET0123456789"
# Retries that take milliseconds, so the failure scripts stay fast.
FAST = RetryPolicy(max_retries=2, initial=0.01, multiplier=2.0, maximum=0.05, jitter=0.5, max_retry_after=1.0)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as running:
        yield running


@pytest.fixture
def make_summarizer(server: ChatServer) -> Iterator[Callable[..., OpenAICompatibleSummarizer]]:
    made: list[OpenAICompatibleSummarizer] = []

    def make(**options: Any) -> OpenAICompatibleSummarizer:
        options = {"base_url": server.base_url, "api_key": API_KEY, "retry": FAST, "seed": 0, "timeout": 5.0} | options
        summarizer = OpenAICompatibleSummarizer(options.pop("model", "gpt-4o-mini"), **options)
        made.append(summarizer)
        return summarizer

    yield make
    for summarizer in made:
        summarizer.close()
