"""Token counters: the :class:`TokenCounter` protocol and its OpenAI implementations.

A counter answers two questions: how many tokens is this text, and how many
tokens does this :class:`~convmem.Message` cost *inside a prompt*, per-message
overhead included. The memory engine counts each message once, when it is
added, and keeps the number; a prompt then costs
``sum(count_message(m)) + reply_priming`` (:func:`count_messages`).

Counts are never approximated silently: :class:`TiktokenCounter` reports
``exact=True`` and uses tiktoken's own vocabularies; the only inexact counter,
:class:`ApproximateCounter`, reports ``exact=False``, says "approximate" in its
``name``, and is used only when asked for.

OpenAI message formula
----------------------
This is the formula of OpenAI's cookbook "How to count tokens with tiktoken"
(``num_tokens_from_messages``, github.com/openai/openai-cookbook) for every chat
model since gpt-3.5-turbo-0613:

* 3 tokens per message (``<|start|>{role}<|message|>...<|end|>``);
* plus the tokens of each string value of the Chat Completions dict: ``role``,
  the content text (each text part of a multi-part content), ``name``, and
  ``tool_call_id``;
* plus 1 if ``name`` is set;
* plus 3 per request for reply priming (``<|start|>assistant<|message|>``).

Tool calls: OpenAI documents no formula, so convmem uses the best public
measurements and rounds them up. Each call costs
``tokens(name) + tokens(arguments) + tool_call_overhead`` (default 5), and a
message with two or more calls adds ``parallel_tool_calls_overhead`` (default 16)
once. Sources: hmarr/openai-chat-tokens (``src/token-counts.ts``) matched API
usage with ``name + arguments + 3`` for the older ``function_call`` field;
forestwanglin/openai-java (``TikTokenUtils.estimateTokensInMessage``, fitted to
gpt-4 / gpt-3.5-turbo usage in its issues #4 and #5) gives ``+5`` for one tool
call and ``2n + 21`` in total for ``n >= 2`` parallel calls, which
``5n + 16`` covers. Call ids inside ``tool_calls`` are not counted (those fits
match the API without them); a tool message's ``tool_call_id`` is, because the
cookbook formula counts every string value. On the two published requests this
overcounts, never under: hmarr's ``function_call`` case (26 prompt tokens) counts
28, and openai-java's issue #5 request (a call and its result, 35 prompt tokens
on gpt-4) counts 57, the surplus being the result's id and name. These are fits
to gpt-4-era models: treat tool-call counts as safe estimates, not exact values.

Images follow OpenAI's tile formula (:mod:`convmem.tokens.images`). Audio, files
and images of unknown size are *estimates*, set per counter.

Example::

    from convmem import Message
    from convmem.tokens import TiktokenCounter, count_messages

    counter = TiktokenCounter("o200k_base")
    counter.count_text("hello world")                                  # 2
    counter.count_message(Message(role="user", content="hello world"))  # 3 + 1 + 2 = 6
    count_messages(counter, [Message(role="user", content="hi")])      # 5 + 3 = 8
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from fractions import Fraction
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..errors import ConfigurationError
from ..messages import ImagePart, Message
from . import images
from ._base import (
    DEFAULT_AUDIO_ESTIMATE,
    DEFAULT_FILE_ESTIMATE,
    AudioEstimate,
    BaseCounter,
    FileEstimate,
    ImageEstimate,
    part_estimate,
)
from ._sniff import image_size
from ._vocab import load_encoding

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "DEFAULT_AUDIO_ESTIMATE",
    "DEFAULT_FILE_ESTIMATE",
    "ApproximateCounter",
    "TiktokenCounter",
    "TokenCounter",
    "count_messages",
    "shared_tiktoken",
]

_OPENAI_TOKENS_PER_MESSAGE = 3
_OPENAI_TOKENS_PER_NAME = 1
_OPENAI_REPLY_PRIMING = 3
_TOOL_CALL_OVERHEAD = 5
_PARALLEL_TOOL_CALLS_OVERHEAD = 16


@runtime_checkable
class TokenCounter(Protocol):
    """What the memory engine needs from a tokenizer.

    Attributes are read-only properties so that an implementation may use plain
    attributes or properties.
    """

    @property
    def name(self) -> str:
        """Identifies the tokenizer, e.g. ``tiktoken:o200k_base`` or ``approximate(cl100k_base x1.15)``."""
        ...

    @property
    def exact(self) -> bool:
        """False when counts are approximations (the counter must then say so in ``name``)."""
        ...

    @property
    def reply_priming(self) -> int:
        """Tokens added once per request for the start of the reply (3 for OpenAI chat)."""
        ...

    def count_text(self, text: str) -> int:
        """Return the tokens of ``text`` as plain text (special-token text counts as ordinary text)."""
        ...

    def count_message(self, message: Message) -> int:
        """Return the full cost of ``message`` in a prompt, per-message overhead included."""
        ...


def count_messages(counter: TokenCounter, messages: Iterable[Message]) -> int:
    """Return the prompt tokens of ``messages``: their costs plus the reply priming."""
    return sum(map(counter.count_message, messages)) + counter.reply_priming


class TiktokenCounter(BaseCounter):
    """Exact counts for OpenAI chat models, with vocabularies loaded offline.

    ``o200k_base`` serves gpt-4o, gpt-4.1, the o1/o3/o4 series and the gpt-5
    family; ``cl100k_base`` serves gpt-4, gpt-4-turbo, gpt-3.5-turbo and the
    text-embedding-3 models. Text is encoded with ``encode_ordinary``, so text
    such as ``"<|endoftext|>"`` is counted as the ordinary text the API sees.

    Text, names, roles and ``tool_call_id`` are exact. Tool calls follow the
    formula in the module docstring (OpenAI does not publish one). Images of
    known size follow the tile formula; images of unknown size, audio and files
    are estimates -- set them to what your inputs look like.

    Args:
        encoding: ``"o200k_base"``, ``"cl100k_base"``, or a ready ``tiktoken.Encoding``.
        image_estimate: tokens for a high/auto-detail image whose width/height are
            unknown, or a callable taking the ImagePart. Defaults to the tile
            formula's maximum (``image_base_tokens + 8 * image_tile_tokens`` = 1445),
            the smallest value that never undercounts. A low-detail image is always
            ``image_base_tokens``.
        image_base_tokens: per-image tokens of the tile formula (85).
        image_tile_tokens: per-tile tokens of the tile formula (170).
        audio_estimate: tokens per audio part, or a callable (default
            :data:`DEFAULT_AUDIO_ESTIMATE`).
        file_estimate: tokens per file part, or a callable (default
            :data:`DEFAULT_FILE_ESTIMATE`).
        tool_call_overhead: fixed tokens per tool call besides its name and arguments.
        parallel_tool_calls_overhead: extra tokens once per message with 2+ tool calls.

    Raises:
        ConfigurationError: the encoding is not one bundled for offline use, or its
            bundled file fails the sha256 check.
    """

    def __init__(
        self,
        encoding: str | tiktoken.Encoding = "o200k_base",
        *,
        image_estimate: ImageEstimate | None = None,
        image_base_tokens: int = images.BASE_TOKENS,
        image_tile_tokens: int = images.TILE_TOKENS,
        audio_estimate: AudioEstimate = DEFAULT_AUDIO_ESTIMATE,
        file_estimate: FileEstimate = DEFAULT_FILE_ESTIMATE,
        tool_call_overhead: int = _TOOL_CALL_OVERHEAD,
        parallel_tool_calls_overhead: int = _PARALLEL_TOOL_CALLS_OVERHEAD,
    ) -> None:
        enc = load_encoding(encoding) if isinstance(encoding, str) else encoding
        self._encoding = enc
        self._encode = enc.encode_ordinary
        self._name = f"tiktoken:{enc.name}"
        self._image_base = image_base_tokens
        self._image_tile = image_tile_tokens
        if image_estimate is None:
            image_estimate = image_base_tokens + images.MAX_TILES * image_tile_tokens
        super().__init__(
            tokens_per_message=_OPENAI_TOKENS_PER_MESSAGE,
            tokens_per_name=_OPENAI_TOKENS_PER_NAME,
            count_role=True,
            image_estimate=image_estimate,
            audio_estimate=audio_estimate,
            file_estimate=file_estimate,
            tool_call_overhead=tool_call_overhead,
            parallel_tool_calls_overhead=parallel_tool_calls_overhead,
        )

    @property
    def name(self) -> str:
        """``tiktoken:<encoding name>``."""
        return self._name

    @property
    def exact(self) -> bool:
        """Always True: the counts are tiktoken's own."""
        return True

    @property
    def reply_priming(self) -> int:
        """3: every reply is primed with ``<|start|>assistant<|message|>``."""
        return _OPENAI_REPLY_PRIMING

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The underlying ``tiktoken.Encoding``."""
        return self._encoding

    def count_text(self, text: str) -> int:
        """Return ``len(encoding.encode_ordinary(text))``."""
        return len(self._encode(text))

    def count_message(self, message: Message) -> int:
        """Return the cost of ``message`` by the OpenAI formula (see the module docstring)."""
        # Inlined fast path: this runs once per added message, so it avoids the
        # extra method call of the base class for plain string content.
        content = message.content
        if (
            content.__class__ is str
            and message.name is None
            and message.tool_call_id is None
            and not message.tool_calls
            and not message.extra
        ):
            return self._role_costs[message.role] + len(self._encode(content))
        return self._count_full(message)

    def _count_image(self, part: ImagePart) -> int:
        if part.detail == "low":
            return self._image_base
        size = (part.width, part.height) if part.width is not None and part.height is not None else None
        if size is None and part.data is not None:
            size = image_size(part.data)
        if size is not None:
            return images.image_tokens(size[0], size[1], part.detail, base=self._image_base, per_tile=self._image_tile)
        return part_estimate(self._image_estimate, part)

    def __repr__(self) -> str:
        return f"TiktokenCounter({self._encoding.name!r})"


class ApproximateCounter:
    """A labelled approximation for models with no exact offline tokenizer.

    Counts with a tiktoken vocabulary, then multiplies by ``factor`` and rounds
    up -- each message separately, so a sum of counts never rounds down. Used
    for Anthropic Claude 3+ and Google Gemini, whose tokenizers are not public,
    and only when the user asks for ``counter="approximate"``. Claude's
    tokenizers produce more tokens than cl100k_base for the same English text;
    1.15 is a common rule of thumb, not a bound (code, non-English text and newer
    Claude tokenizers can exceed it). For exact Claude counts use Anthropic's
    count-tokens API and pass your own :class:`TokenCounter`.

    Args:
        base: the tiktoken vocabulary to count with.
        factor: multiplier applied to every count (must be positive).
        image_estimate: as for :class:`TiktokenCounter`.
        audio_estimate: as for :class:`TiktokenCounter`.
        file_estimate: as for :class:`TiktokenCounter`.
    """

    def __init__(
        self,
        base: str = "cl100k_base",
        factor: float = 1.15,
        *,
        image_estimate: ImageEstimate | None = None,
        audio_estimate: AudioEstimate = DEFAULT_AUDIO_ESTIMATE,
        file_estimate: FileEstimate = DEFAULT_FILE_ESTIMATE,
    ) -> None:
        if not math.isfinite(factor) or factor <= 0:
            raise ConfigurationError(f"the approximation factor must be a positive number, got {factor!r}")
        self._inner = TiktokenCounter(
            base, image_estimate=image_estimate, audio_estimate=audio_estimate, file_estimate=file_estimate
        )
        # Integer arithmetic keeps ceil() exact: 20 * 1.15 as a float is 22.999...
        ratio = Fraction(factor).limit_denominator(10_000)
        self._num, self._den = ratio.numerator, ratio.denominator
        self._factor = factor
        self._name = f"approximate({base} x{factor:g})"
        self._reply_priming = self._scale(self._inner.reply_priming)

    def _scale(self, tokens: int) -> int:
        return -(-tokens * self._num // self._den)

    @property
    def factor(self) -> float:
        """The multiplier applied to every count."""
        return self._factor

    @property
    def name(self) -> str:
        """``approximate(<base> x<factor>)``."""
        return self._name

    @property
    def exact(self) -> bool:
        """Always False."""
        return False

    @property
    def reply_priming(self) -> int:
        """The OpenAI reply priming (3) scaled by ``factor``, rounded up."""
        return self._reply_priming

    def count_text(self, text: str) -> int:
        """Return the base vocabulary's count of ``text`` times ``factor``, rounded up."""
        return self._scale(self._inner.count_text(text))

    def count_message(self, message: Message) -> int:
        """Return the OpenAI-formula cost of ``message`` times ``factor``, rounded up."""
        return self._scale(self._inner.count_message(message))

    def __repr__(self) -> str:
        return f"ApproximateCounter({self._inner.encoding.name!r}, {self._factor!r})"


@functools.cache
def shared_tiktoken(encoding: str) -> TiktokenCounter:
    """The process-wide :class:`TiktokenCounter` of a bundled vocabulary (built once, then shared)."""
    return TiktokenCounter(encoding)
