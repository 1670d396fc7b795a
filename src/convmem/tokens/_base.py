"""Message accounting shared by the built-in counters (internal).

Every built-in counter prices a message the same way: a fixed number of tokens
per message, plus the role's own tokens (when the chat template spells the
role out), the content, the name and its fixed extra, the ``tool_call_id``, and
each tool call's name and arguments plus a fixed overhead. Non-text parts are
priced by estimates the user can set. Subclasses supply :meth:`count_text` and
may price images better (:class:`~convmem.tokens.TiktokenCounter` applies
OpenAI's tile formula).

This module is internal: the public contract is
:class:`~convmem.tokens.TokenCounter`, which third-party counters implement
without inheriting anything.

Example (a built-in counter for a whitespace "tokenizer")::

    class WordCounter(BaseCounter):
        name, exact, reply_priming = "words", False, 0

        def __init__(self) -> None:
            super().__init__(tokens_per_message=2, tokens_per_name=1, count_role=False,
                             image_estimate=1445, audio_estimate=1000, file_estimate=2000,
                             tool_call_overhead=5, parallel_tool_calls_overhead=16)

        def count_text(self, text: str) -> int:
            return len(text.split())
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias, TypeVar

from ..formats import sent_estimate, sent_extras
from ..messages import ROLES, AudioPart, FilePart, ImagePart, Message, Part, TextPart

__all__ = [
    "DEFAULT_AUDIO_ESTIMATE",
    "DEFAULT_FILE_ESTIMATE",
    "AudioEstimate",
    "BaseCounter",
    "FileEstimate",
    "ImageEstimate",
    "part_estimate",
]

_P = TypeVar("_P", ImagePart, AudioPart, FilePart)
ImageEstimate: TypeAlias = "int | Callable[[ImagePart], int]"
AudioEstimate: TypeAlias = "int | Callable[[AudioPart], int]"
FileEstimate: TypeAlias = "int | Callable[[FilePart], int]"

#: Tokens assumed for one audio part when no better estimate is given. OpenAI
#: publishes no tokens-per-second rate for audio input, so this is a placeholder
#: for a short clip; pass a callable that derives tokens from the clip's length
#: when you know your model's rate.
DEFAULT_AUDIO_ESTIMATE = 1_000
#: Tokens assumed for one file part (e.g. a PDF). OpenAI feeds the model each
#: page's extracted text *and* a page image, so cost scales with page count;
#: 2,000 tokens is roughly one page. Pass a callable for real documents.
DEFAULT_FILE_ESTIMATE = 2_000


def part_estimate(estimate: int | Callable[[_P], int], part: _P) -> int:
    """Return ``estimate`` for ``part``: the number itself, or the callable applied to the part."""
    return estimate if isinstance(estimate, int) else estimate(part)


class BaseCounter:
    """Shared message accounting: fixed overhead per message, name, tool calls, parts.

    Subclasses provide :meth:`count_text`; the per-role cost
    (``tokens_per_message`` + the role's own tokens) is computed once here, so
    counting a plain message costs one dict lookup plus one ``count_text``.
    """

    def __init__(
        self,
        *,
        tokens_per_message: int,
        tokens_per_name: int,
        count_role: bool,
        image_estimate: ImageEstimate,
        audio_estimate: AudioEstimate,
        file_estimate: FileEstimate,
        tool_call_overhead: int,
        parallel_tool_calls_overhead: int,
    ) -> None:
        self._tokens_per_name = tokens_per_name
        self._image_estimate = image_estimate
        self._audio_estimate = audio_estimate
        self._file_estimate = file_estimate
        self._tool_call_overhead = tool_call_overhead
        self._parallel_overhead = parallel_tool_calls_overhead
        self._role_costs = {
            role: tokens_per_message + (self.count_text(role) if count_role else 0) for role in sorted(ROLES)
        }

    def count_text(self, text: str) -> int:  # pragma: no cover - always overridden
        raise NotImplementedError

    def count_message(self, message: Message) -> int:
        """Return the cost of ``message`` in a prompt, per-message overhead included."""
        content = message.content
        if (
            content.__class__ is str
            and message.name is None
            and message.tool_call_id is None
            and not message.tool_calls
            and not message.extra
        ):
            return self._role_costs[message.role] + self.count_text(content)
        return self._count_full(message)

    def _count_full(self, message: Message) -> int:
        count = self.count_text
        total = self._role_costs[message.role]
        content = message.content
        if isinstance(content, str):
            total += count(content)
        elif content:
            total += sum(self._count_part(part) for part in content)
        if message.name is not None:
            total += count(message.name) + self._tokens_per_name
        if message.tool_call_id is not None:
            total += count(message.tool_call_id)
        calls = message.tool_calls
        if calls:
            total += sum(count(c.name) + count(c.arguments) + self._tool_call_overhead for c in calls)
            if len(calls) > 1:
                total += self._parallel_overhead
        if message.extra or (message.role == "tool" and isinstance(content, tuple)):
            texts, added = sent_extras(message)  # every field sent is counted: refusal, thinking, ...
            total += sum(map(count, texts)) + added * self._role_costs["user"] + sent_estimate(message)
        return total

    def _count_part(self, part: Part) -> int:
        if isinstance(part, TextPart):
            return self.count_text(part.text)
        if isinstance(part, ImagePart):
            return self._count_image(part)
        if isinstance(part, AudioPart):
            return part_estimate(self._audio_estimate, part)
        return part_estimate(self._file_estimate, part)

    def _count_image(self, part: ImagePart) -> int:
        return part_estimate(self._image_estimate, part)
