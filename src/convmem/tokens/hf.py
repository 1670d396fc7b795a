"""Exact counts for open-weight models from the user's own ``tokenizer.json``.

Llama, Qwen, Mistral and DeepSeek publish their tokenizers as a Hugging Face
``tokenizer.json``. Given that file, the ``tokenizers`` package (the optional
extra ``convmem[hf]``) counts text exactly, with no network access: convmem
never downloads a tokenizer itself.

Text is encoded without special tokens, so ``count_text`` is the size of the
content alone. What a message costs on top of its text depends on the model's
chat template, which ``tokenizer.json`` does not contain. The ``template``
argument picks the overhead of a known family; the explicit arguments override
it:

============  ===========================================================  =========  ====  =======
template      one message renders as                                       per msg.   role  priming
============  ===========================================================  =========  ====  =======
``chatml``    ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` (Qwen 2.5/3)  4          yes   3
``llama3``    ``<|start_header_id|>{role}<|end_header_id|>\\n\\n{content}``  4          yes   5
              ``<|eot_id|>`` (Llama 3.x)
``mistral``   ``[INST]{content}[/INST]`` / ``{content}</s>`` (Mistral)       2          no    1
============  ===========================================================  =========  ====  =======

"priming" is what a request adds once: the assistant header (plus
``<|begin_of_text|>`` for Llama 3, ``<s>`` for Mistral). Templates can inject
text of their own -- Llama 3.1 adds a "Cutting Knowledge Date" system block,
Qwen 2.5 a default system prompt when none is given, Qwen 3 an empty
``<think>`` block -- count that as a pinned system message if you rely on it.
For images, audio and files the estimates of :class:`~convmem.tokens.TiktokenCounter`
apply (vision models price images very differently; set ``image_estimate``).

Example::

    from convmem.tokens import HFTokenizerCounter

    counter = HFTokenizerCounter("models/qwen2.5-7b/tokenizer.json", template="chatml")
    counter.count_text("hello world")
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal

from ..errors import ConfigurationError
from . import images
from ._base import (
    DEFAULT_AUDIO_ESTIMATE,
    DEFAULT_FILE_ESTIMATE,
    AudioEstimate,
    BaseCounter,
    FileEstimate,
    ImageEstimate,
)

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["TEMPLATES", "HFTokenizerCounter", "Template"]

Template = Literal["chatml", "llama3", "mistral"]

#: (tokens per message, count the role's tokens, reply priming) per chat template family.
TEMPLATES: dict[str, tuple[int, bool, int]] = {
    "chatml": (4, True, 3),
    "llama3": (4, True, 5),
    "mistral": (2, False, 1),
}


def _load_tokenizer(path: str) -> Tokenizer:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ConfigurationError(
            "HFTokenizerCounter needs the 'tokenizers' package: pip install 'convmem[hf]'"
        ) from None
    if not os.path.isfile(path):
        raise ConfigurationError(f"tokenizer file not found: {path}")
    try:
        return Tokenizer.from_file(path)
    except Exception as exc:  # tokenizers raises a bare Exception for malformed files
        raise ConfigurationError(f"cannot load the tokenizer {path}: {exc}") from None


class HFTokenizerCounter(BaseCounter):
    """Count with a Hugging Face ``tokenizer.json`` the user supplies.

    Exact for the text of Llama, Qwen, Mistral and other open-weight models;
    the per-message overhead comes from ``template`` (see the module table) and
    can be set explicitly for other templates.

    Args:
        path: path to ``tokenizer.json``.
        template: chat template family (``chatml``, ``llama3`` or ``mistral``).
        tokens_per_message: override of the template's fixed tokens per message.
        count_role: override: whether the role name is rendered as text.
        reply_priming: override of the template's tokens added once per request.
        tokens_per_name: tokens added when a message has a ``name`` (besides the name).
        image_estimate: tokens per image part, or a callable taking the ImagePart.
        audio_estimate: tokens per audio part, or a callable.
        file_estimate: tokens per file part, or a callable.
        tool_call_overhead: fixed tokens per tool call besides its name and arguments.
        parallel_tool_calls_overhead: extra tokens once per message with 2+ tool calls.

    Raises:
        ConfigurationError: ``tokenizers`` is not installed, the file is missing or
            unreadable, or ``template`` is unknown.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        template: Template = "chatml",
        tokens_per_message: int | None = None,
        count_role: bool | None = None,
        reply_priming: int | None = None,
        tokens_per_name: int = 1,
        image_estimate: ImageEstimate = images.MAX_HIGH_DETAIL_TOKENS,
        audio_estimate: AudioEstimate = DEFAULT_AUDIO_ESTIMATE,
        file_estimate: FileEstimate = DEFAULT_FILE_ESTIMATE,
        tool_call_overhead: int = 5,
        parallel_tool_calls_overhead: int = 16,
    ) -> None:
        if template not in TEMPLATES:
            raise ConfigurationError(f"unknown chat template {template!r}; expected one of {sorted(TEMPLATES)}")
        per_message, role, priming = TEMPLATES[template]
        self._path = os.fspath(path)
        self._tokenizer = _load_tokenizer(self._path)
        self._encode = self._tokenizer.encode
        self._reply_priming = priming if reply_priming is None else reply_priming
        super().__init__(
            tokens_per_message=per_message if tokens_per_message is None else tokens_per_message,
            tokens_per_name=tokens_per_name,
            count_role=role if count_role is None else count_role,
            image_estimate=image_estimate,
            audio_estimate=audio_estimate,
            file_estimate=file_estimate,
            tool_call_overhead=tool_call_overhead,
            parallel_tool_calls_overhead=parallel_tool_calls_overhead,
        )

    @property
    def name(self) -> str:
        """``hf:<path to tokenizer.json>``."""
        return f"hf:{self._path}"

    @property
    def exact(self) -> bool:
        """True: text counts are the tokenizer's own."""
        return True

    @property
    def reply_priming(self) -> int:
        """Tokens the chat template adds once per request."""
        return self._reply_priming

    def count_text(self, text: str) -> int:
        """Return the number of tokens of ``text``, without special tokens."""
        return len(self._encode(text, add_special_tokens=False))

    def __repr__(self) -> str:
        return f"HFTokenizerCounter({self._path!r})"
