"""The quick test loop (``python3 scripts/dev.py test --quick``) runs property tests with few examples.

``--quick`` sets ``CONVMEM_QUICK=1`` and deselects tests marked ``slow`` (real crash loops, server
faults); property tests stay in, each capped at a handful of examples, so the loop still exercises
every code path. The full suite, which CI runs, uses the numbers written in the tests.
"""

from __future__ import annotations

import os

QUICK = os.environ.get("CONVMEM_QUICK") == "1"


def examples(n: int) -> int:
    """``n`` hypothesis examples, or at most 5 in the quick loop."""
    return min(n, 5) if QUICK else n
