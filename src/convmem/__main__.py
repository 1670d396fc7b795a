"""``python -m convmem``: the same command line as the ``convmem`` script."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    main()
