"""OpenAI's image tile formula."""

from __future__ import annotations

import pytest

from convmem.tokens.images import MAX_HIGH_DETAIL_TOKENS, image_tiles, image_tokens


@pytest.mark.parametrize(
    ("width", "height", "detail", "expected"),
    [
        (1024, 1024, "high", 765),  # 768x768 -> 2x2 tiles
        (2048, 4096, "high", 1105),  # fit 1024x2048 -> 768x1536 -> 2x3 tiles
        (2048, 4096, "low", 85),
        (4000, 3000, "low", 85),
        (512, 512, "high", 255),  # no upscaling: one tile
        (100, 100, "high", 255),
        (768, 768, "high", 765),
        (1536, 768, "auto", 85 + 170 * 6),  # auto counts as high: 3x2 tiles
        (1536, 768, None, 85 + 170 * 6),
        (2048, 768, "high", 85 + 170 * 8),  # the largest possible: 4x2 tiles
        (100, 4000, "high", 85 + 170 * 4),  # 51x2048 after fitting, too thin to rescale
    ],
)
def test_tile_formula(width: int, height: int, detail: str | None, expected: int) -> None:
    assert image_tokens(width, height, detail) == expected


def test_no_image_exceeds_the_documented_maximum() -> None:
    sizes = [(w, h) for w in range(64, 6000, 97) for h in range(64, 6000, 89)]
    assert max(image_tiles(w, h) for w, h in sizes) == 8
    assert MAX_HIGH_DETAIL_TOKENS == 1445


def test_exact_arithmetic_at_tile_boundaries() -> None:
    # 3000x1500 scales to 1536x768 exactly; floats would round 1536 up into a 4th column.
    assert image_tiles(3000, 1500) == 3 * 2
    assert image_tiles(4096, 2048) == 3 * 2


def test_custom_constants() -> None:
    assert image_tokens(1024, 1024, "high", base=2833, per_tile=5667) == 2833 + 4 * 5667
    assert image_tokens(1024, 1024, "low", base=2833, per_tile=5667) == 2833


def test_rejects_non_positive_sizes() -> None:
    with pytest.raises(ValueError, match="positive"):
        image_tiles(0, 10)
