"""``OpenAICompatibleQueryRewriter``: an LLM turns a question into search terms for recall (optional).

Recall's default path has no LLM at query time. This one adds a chat model before the search: it
reads the question and answers with JSON ``{"queries": [...]}`` (strings: synonyms, the names and
things the answer would mention, dates as "Month YYYY"). :class:`~convmem.longterm.recall.index.RecallIndex`
adds their words to the lexical query (``RecallIndex(rewriter=...)``); the dense side keeps the
question as asked.

* One call per distinct question: answers are cached (``cache_size`` questions, least recently used
  dropped first), since a recall block searches the same input on every ``context()`` of a turn.
* A failed call, a malformed reply or an empty answer raises :class:`~convmem.errors.LLMError`;
  the index catches it, records a warning and searches with the question alone.
* At most ``max_queries`` strings of at most 200 characters each are kept.

Example::

    rewriter = OpenAICompatibleQueryRewriter("gpt-4o-mini")
    recall = RecallIndex(rewriter=rewriter)
    rewriter.rewrite("Where does my sibling live?")     # ['sister', 'brother', 'lives in', 'moved to']
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigurationError, LLMError
from ..usage import ModelUsage
from .client import ChatBackend, OpenAIChat, RetryPolicy

__all__ = ["REWRITE_PROMPT", "OpenAICompatibleQueryRewriter"]

REWRITE_PROMPT = """\
You help search the archive of a long conversation between two people. Given a question about it, reply with \
JSON {"queries": [...]}: up to 6 short search strings whose words the messages that answer it would contain: \
synonyms and related words, the names, places and things involved, and any date the question implies as \
"Month YYYY". Do not answer the question. Reply with the JSON only."""
_FENCE = re.compile(r"^```[a-z]*\n(.*)\n```$", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


class OpenAICompatibleQueryRewriter:
    """A query rewriter over any OpenAI-compatible chat model.

    Args:
        model: default ``$CONVMEM_LLM_MODEL``.
        base_url: default ``$CONVMEM_LLM_BASE_URL``, else the OpenAI API.
        api_key: default ``$CONVMEM_LLM_API_KEY`` (then ``$OPENAI_API_KEY``).
        max_queries: strings kept from a reply.
        cache_size: questions whose answers are remembered.
        max_output_tokens: the reply's token limit.
        timeout: seconds per attempt.
        retry: the :class:`~convmem.llm.client.RetryPolicy`.
        chat: a ready client instead of the options above.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_queries: int = 6,
        cache_size: int = 256,
        max_output_tokens: int = 200,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        chat: ChatBackend | None = None,
    ) -> None:
        if max_queries < 1 or cache_size < 0:
            raise ConfigurationError("max_queries must be >= 1 and cache_size >= 0")
        self.chat: Any = chat or OpenAIChat(model, base_url=base_url, api_key=api_key, timeout=timeout, retry=retry)
        self.model: str = self.chat.model
        self.max_queries, self.cache_size, self.max_output_tokens = max_queries, cache_size, max_output_tokens
        self._cache: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self.usage: list[ModelUsage] = []  # every call's usage, for cost accounting

    def __repr__(self) -> str:
        return f"OpenAICompatibleQueryRewriter(model={self.model!r}, endpoint={self.chat.endpoint!r})"

    def rewrite(self, query: str) -> Sequence[str]:
        """Search strings for ``query`` (cached); raises LLMError if the model gives none."""
        key = " ".join(query.split())
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        messages = [{"role": "system", "content": REWRITE_PROMPT}, {"role": "user", "content": key}]
        completion = self.chat.complete(
            messages, max_tokens=self.max_output_tokens, response_format={"type": "json_object"}
        )
        if completion.usage is not None:
            self.usage.append(completion.usage)
        queries = self._parse(completion.text)
        if self.cache_size:
            self._cache[key] = queries
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return queries

    def _parse(self, text: str) -> tuple[str, ...]:
        body = _THINK.sub("", text).strip()
        fenced = _FENCE.match(body)
        if fenced:
            body = fenced.group(1).strip()
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise LLMError(f"query rewriter {self.model!r}: the reply is not JSON: {exc}") from None
        raw = data.get("queries") if isinstance(data, dict) else data
        if not isinstance(raw, list):
            raise LLMError(f'query rewriter {self.model!r}: expected {{"queries": [...]}}, got {type(raw).__name__}')
        queries = tuple(dict.fromkeys(q.strip()[:200] for q in raw if isinstance(q, str) and q.strip()))
        if not queries:
            raise LLMError(f"query rewriter {self.model!r}: the reply has no search strings")
        return queries[: self.max_queries]

    def close(self) -> None:
        self.chat.close()
