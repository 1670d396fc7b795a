"""numpy, or a ConfigurationError naming the extra: recall needs it, the engine does not."""

from __future__ import annotations

from ...errors import ConfigurationError

try:
    import numpy as np
except ImportError:  # pragma: no cover - exercised in a subprocess test
    raise ConfigurationError("recall needs numpy: pip install 'convmem[recall]'") from None

__all__ = ["np"]
