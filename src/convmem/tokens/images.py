"""Image token cost by OpenAI's published tile formula.

OpenAI's vision guide ("Calculating costs", images-vision) prices an image
input as follows:

* ``detail="low"``: a flat 85 tokens, whatever the size.
* ``detail="high"``: scale the image to fit within 2048 x 2048, then scale it so
  its shortest side is 768 px (both steps only ever shrink it), count the
  512 px tiles that cover it, and charge ``85 + 170 * tiles``.
* ``detail="auto"`` lets the server choose; convmem treats it as ``high`` so
  that a budget is never exceeded.

The scaling is done with exact fractions and the tile count rounds *up*: an
image that scales to 1536.4 px is counted as covering a fourth tile. That can
overcount by one tile on a borderline size, never undercount, and it avoids the
float error that would turn an exact 1536 into 1536.0000001.

Because the shortest side ends at most 768 px and the longest at most 2048 px,
a high-detail image never covers more than 2 x 4 = 8 tiles, so
``85 + 8 * 170 = 1445`` tokens (:data:`MAX_HIGH_DETAIL_TOKENS`) is a true upper
bound -- the default estimate when the size is unknown.

Models billed with other constants (``gpt-4o-mini`` bills 2833 + 5667/tile,
which OpenAI documents as billing-only and not counted against the context
window) can pass their own ``base`` and ``per_tile``.

Example::

    from convmem.tokens.images import image_tokens

    image_tokens(1024, 1024, "high")   # 765  (768x768 -> 4 tiles)
    image_tokens(2048, 4096, "high")   # 1105 (768x1536 -> 6 tiles)
    image_tokens(4000, 3000, "low")    # 85
"""

from __future__ import annotations

import math
from fractions import Fraction

from ..errors import InvalidMessageError

__all__ = ["LOW_DETAIL_TOKENS", "MAX_HIGH_DETAIL_TOKENS", "image_tiles", "image_tokens"]

BASE_TOKENS = 85
TILE_TOKENS = 170
LOW_DETAIL_TOKENS = BASE_TOKENS
MAX_TILES = 8
MAX_HIGH_DETAIL_TOKENS = BASE_TOKENS + MAX_TILES * TILE_TOKENS

_FIT_BOX = 2048
_SHORT_SIDE = 768
_TILE = 512


def image_tiles(width: int, height: int) -> int:
    """Return the number of 512 px tiles a high-detail image covers after OpenAI's rescaling.

    Args:
        width: image width in pixels (positive).
        height: image height in pixels (positive).
    """
    if width <= 0 or height <= 0:
        raise InvalidMessageError(f"image size must be positive, got {width}x{height}", field="image")
    scale = Fraction(1)
    longest = max(width, height)
    if longest > _FIT_BOX:
        scale = Fraction(_FIT_BOX, longest)
    shortest = min(width, height) * scale
    if shortest > _SHORT_SIDE:
        scale *= _SHORT_SIDE / shortest
    return math.ceil(width * scale / _TILE) * math.ceil(height * scale / _TILE)


def image_tokens(
    width: int,
    height: int,
    detail: str | None = "high",
    *,
    base: int = BASE_TOKENS,
    per_tile: int = TILE_TOKENS,
) -> int:
    """Return the input tokens of one image by OpenAI's tile formula.

    Args:
        width: image width in pixels.
        height: image height in pixels.
        detail: ``"low"``, ``"high"``, ``"auto"`` or None; anything but ``"low"`` is
            counted as ``"high"`` (the larger of the two).
        base: tokens charged per image (85 for gpt-4o / gpt-4.1 / gpt-4-turbo).
        per_tile: tokens charged per 512 px tile (170 for the same models).
    """
    if detail == "low":
        return base
    return base + per_tile * image_tiles(width, height)
