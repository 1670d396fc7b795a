"""``OpenAICompatibleSummarizer``: running summaries from any OpenAI-compatible chat model.

Design:

* **Incremental.** Each fold sends only the previous summary and the newly
  evicted messages (the :class:`~convmem.policy.strategies.Summarizer`
  contract), with a prompt that keeps the user's goals, decisions, stated
  facts, open tasks and the key values of tool results, and drops small talk.
  A summary covering N evictions costs N small calls, not one growing one.
* **Chunked, never cut.** When the evicted messages do not fit the summarizer
  model's input budget (``max_input_tokens``, counted exactly when the model
  is known), they are folded in chunks: each chunk's request holds the
  summary so far plus as many whole messages as fit, and its reply becomes
  the summary the next chunk is merged into. A single message larger than a
  chunk is split across requests. Every evicted token reaches the model;
  LangChain's middleware, by contrast, feeds only the last 4,000 tokens.
* **Its own cap.** The reply is requested with ``max_tokens`` = the smaller
  of the memory's ``summary_max_tokens`` and ``max_summary_tokens``.
* **Failures keep data.** A failed call, a timeout, or an empty reply raises
  :class:`~convmem.errors.LLMError`; the memory then archives the messages,
  records the failure in its stats and retries at the next eviction. Error
  text is never returned as a summary.
* **Usage.** The returned :class:`Summary` is a ``str`` carrying ``usage``
  (one :class:`~convmem.usage.ModelUsage` per call); a raised LLMError carries
  the usage of the calls that completed before it. The memory adds both to
  ``stats()`` and the cost.

Example::

    from convmem import Memory
    from convmem.llm import OpenAICompatibleSummarizer

    summarizer = OpenAICompatibleSummarizer("gpt-4o-mini")          # or base_url="http://localhost:11434/v1"
    memory = Memory("gpt-4o", strategy="summary_buffer", summarizer=summarizer)
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigurationError, LLMError
from ..messages import Message
from ..tokens import ApproximateCounter, TokenCounter, count_messages, counter_for, lookup_model
from ..usage import ModelUsage
from ._render import CONTINUED, render, split_to_fit
from .client import AsyncChatBackend, ChatBackend, Completion, OpenAIChat, RetryPolicy

__all__ = ["DEFAULT_INPUT_BUDGET", "SUMMARY_PROMPT", "OpenAICompatibleSummarizer", "Summary"]

#: Input tokens per request when the model's window is unknown (local servers often run 8k contexts).
DEFAULT_INPUT_BUDGET = 8_192
#: The most input one request gets even for long-context models: long prompts summarize worse and cost more.
MAX_DEFAULT_INPUT_BUDGET = 32_000
# Below this many tokens of room for new messages a request would be all overhead.
_MIN_ROOM = 32

SUMMARY_PROMPT = """\
You maintain the running summary of a conversation between a user and an AI assistant that can call tools. \
You receive the current summary and the messages that have just left the assistant's context window. \
Rewrite the summary so that it also covers the new messages.

Keep, with exact names, numbers, dates, identifiers and units:
- the user's goals and requests;
- decisions taken, and why;
- facts stated by the user or established in the conversation (preferences, constraints, personal details);
- open tasks, unanswered questions and promises still to keep;
- the key values returned by tools (ids, figures, paths, errors), saying which tool returned them.
Drop greetings, filler and anything superseded; when a new message contradicts the summary, keep the newer \
statement. Never invent anything. Write terse bullet points under the headings Goals, Decisions, Facts, \
Open tasks and Tool results, leaving out empty headings. Reply with the summary only, in at most {cap} tokens."""

_USER_TEMPLATE = "<current_summary>\n{previous}\n</current_summary>\n\n<new_messages>\n{lines}\n</new_messages>"
_NO_SUMMARY = "(none yet)"
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"^```[a-z]*\n(.*)\n```$", re.DOTALL)
_WRAPPER = re.compile(r"^<(current_summary|summary)>\s*(.*?)\s*</\1>$", re.DOTALL)


class Summary(str):
    """A summary text that also carries the usage of the calls that produced it."""

    usage: tuple[ModelUsage, ...]

    def __new__(cls, text: str, usage: Sequence[ModelUsage] = ()) -> Summary:
        self = super().__new__(cls, text)
        self.usage = tuple(usage)
        return self


class _Fold:
    """One summarize call as a sequence of requests (I/O-free; the sync and async methods drive it)."""

    def __init__(
        self, owner: OpenAICompatibleSummarizer, previous: str | None, messages: Sequence[Message], cap: int
    ) -> None:
        self.owner, self.cap = owner, cap
        self.summary = previous.strip() if previous and previous.strip() else None
        self.pending: deque[str] = deque(render(m) for m in messages)
        self.budget = owner.input_budget(cap)
        self.system = SUMMARY_PROMPT.format(cap=cap)
        self.usage: list[ModelUsage] = []
        self.requests = 0

    def next_request(self) -> list[dict[str, Any]] | None:
        """The next request's messages, or None when every line has been folded in."""
        if not self.pending:
            return None
        count = self.owner.counter.count_text
        room = self.budget - self._tokens([])
        if room < _MIN_ROOM:
            raise LLMError(
                f"the summarizer's input budget ({self.budget} tokens) leaves no room for messages next to "
                f"the prompt and a summary of up to {self.cap} tokens; raise max_input_tokens",
                endpoint=self.owner.chat.endpoint,
            )
        take: list[str] = []
        used = 0
        while self.pending:
            cost = count(self.pending[0]) + 1
            if used + cost <= room:
                take.append(self.pending.popleft())
                used += cost
                continue
            if not take:  # one message larger than a whole request: split it across requests
                head, rest = split_to_fit(count, self.pending.popleft(), room - 1)
                self.pending.appendleft(CONTINUED + rest)
                take.append(head)
            break
        # Summed line counts can differ from the joined text's by a token per line; settle it exactly.
        while (over := self._tokens(take) - self.budget) > 0:
            if len(take) > 1:
                self.pending.appendleft(take.pop())
                continue
            head, rest = split_to_fit(count, take[0], max(1, count(take[0]) - over - 8))
            self.pending.appendleft(CONTINUED + rest)
            take = [head]
        self.requests += 1
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self._user(take)}]

    def accept(self, completion: Completion) -> None:
        if completion.usage is not None:
            self.usage.append(completion.usage)
        text = clean(completion.text)
        if not text:
            reason = f" (finish_reason {completion.finish_reason})" if completion.finish_reason else ""
            raise LLMError(f"{self.owner.chat.endpoint}: the model returned an empty summary{reason}")
        self.summary = text

    def failed(self, exc: LLMError) -> LLMError:
        exc.usage = (*self.usage, *exc.usage)
        return exc

    def result(self) -> Summary:
        if self.summary is None:  # no messages and no previous summary: nothing was asked
            raise LLMError("nothing to summarize: no previous summary and no messages")
        return Summary(self.summary, self.usage)

    def _user(self, lines: list[str]) -> str:
        return _USER_TEMPLATE.format(previous=self.summary or _NO_SUMMARY, lines="\n".join(lines))

    def _tokens(self, lines: list[str]) -> int:
        return count_messages(
            self.owner.counter,
            [Message(role="system", content=self.system), Message(role="user", content=self._user(lines))],
        )


class OpenAICompatibleSummarizer:
    """Running summaries by an OpenAI-compatible chat model (sync ``summarize`` and async ``asummarize``).

    Args:
        model: the summarizer model; default ``$CONVMEM_LLM_MODEL``.
        base_url: the endpoint; default ``$CONVMEM_LLM_BASE_URL``, else the OpenAI API.
        api_key: default ``$CONVMEM_LLM_API_KEY`` (then ``$OPENAI_API_KEY``).
        max_input_tokens: the input budget of one request. Default: the model's context window
            less the summary cap, at most 32,000; 8,192 for a model the registry does not know.
        max_summary_tokens: this summarizer's own cap on a summary (the memory's cap also applies).
        counter: counts the input budget; default the model's exact counter, else a labelled
            approximate one (which over-counts, so requests stay within the budget).
        timeout: seconds per attempt.
        retry: the :class:`~convmem.llm.client.RetryPolicy`.
        chat: a ready client (e.g. :class:`~convmem.llm.litellm.LiteLLMChat`) instead of the options above.
        **client_options: more :class:`~convmem.llm.client.OpenAIChat` options (``seed``, ``extra_body``).
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_input_tokens: int | None = None,
        max_summary_tokens: int | None = None,
        counter: TokenCounter | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        chat: ChatBackend | AsyncChatBackend | None = None,
        **client_options: Any,
    ) -> None:
        for name, value in (("max_input_tokens", max_input_tokens), ("max_summary_tokens", max_summary_tokens)):
            if value is not None and value <= 0:
                raise ConfigurationError(f"{name} must be positive, got {value!r}")
        if chat is None:
            chat = OpenAIChat(model, base_url=base_url, api_key=api_key, timeout=timeout, retry=retry, **client_options)
        self.chat: Any = chat
        self.model: str = chat.model
        self.max_input_tokens = max_input_tokens
        self.max_summary_tokens = max_summary_tokens
        self.counter = counter if counter is not None else _counter(self.model)
        try:
            self._window: int | None = lookup_model(self.model).context_window
        except KeyError:
            self._window = None

    def __repr__(self) -> str:
        return f"OpenAICompatibleSummarizer(model={self.model!r}, endpoint={self.chat.endpoint!r})"

    def input_budget(self, cap: int) -> int:
        """Tokens one request may hold, given a summary cap of ``cap`` tokens."""
        if self.max_input_tokens is not None:
            return self.max_input_tokens
        if self._window is None:
            return DEFAULT_INPUT_BUDGET
        return max(1, min(MAX_DEFAULT_INPUT_BUDGET, self._window - cap))

    def _cap(self, max_tokens: int) -> int:
        return min(max_tokens, self.max_summary_tokens) if self.max_summary_tokens else max_tokens

    def summarize(self, previous: str | None, messages: Sequence[Message], max_tokens: int) -> Summary:
        """Fold ``messages`` into ``previous``; raises LLMError (carrying the usage so far) on failure."""
        fold = _Fold(self, previous, messages, self._cap(max_tokens))
        while (request := fold.next_request()) is not None:
            try:
                fold.accept(self.chat.complete(request, max_tokens=fold.cap))
            except LLMError as exc:
                raise fold.failed(exc) from None
        return fold.result()

    async def asummarize(self, previous: str | None, messages: Sequence[Message], max_tokens: int) -> Summary:
        """The async twin of :meth:`summarize`."""
        fold = _Fold(self, previous, messages, self._cap(max_tokens))
        while (request := fold.next_request()) is not None:
            try:
                fold.accept(await self.chat.acomplete(request, max_tokens=fold.cap))
            except LLMError as exc:
                raise fold.failed(exc) from None
        return fold.result()

    def close(self) -> None:
        """Close the client's sync connections."""
        close = getattr(self.chat, "close", None)
        if callable(close):
            close()

    async def aclose(self) -> None:
        """Close the client's connections (async and sync)."""
        aclose = getattr(self.chat, "aclose", None)
        if callable(aclose):
            await aclose()
        else:
            self.close()

    def __enter__(self) -> OpenAICompatibleSummarizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> OpenAICompatibleSummarizer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def clean(text: str) -> str:
    """The summary in a reply: reasoning (``<think>``), code fences and wrapper tags removed."""
    text = _THINK.sub("", text).strip()
    if fenced := _FENCE.match(text):
        text = fenced.group(1).strip()
    if wrapped := _WRAPPER.match(text):
        text = wrapped.group(2).strip()
    return text


def _counter(model: str) -> TokenCounter:
    try:
        return counter_for(model)
    except (KeyError, ConfigurationError):  # unknown or without an exact offline tokenizer
        return ApproximateCounter()
