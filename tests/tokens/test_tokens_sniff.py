"""Image sizes read from base64 headers, so data-URL images get the exact tile count."""

from __future__ import annotations

import base64
import struct
import zlib

import pytest

from convmem import Message
from convmem.messages import ImagePart
from convmem.tokens import counter_for
from convmem.tokens._sniff import image_size
from convmem.tokens.images import MAX_HIGH_DETAIL_TOKENS, image_tokens


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    raw = b"".join(b"\x00" + b"\x00\x00\x00" * width for _ in range(height))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00;"


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    exif = b"\xff\xe1" + struct.pack(">H", 2 + 3000) + b"\x00" * 3000  # metadata before the frame header
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + exif + sof + b"\xff\xd9"


def webp_vp8x(width: int, height: int) -> bytes:
    body = b"VP8X" + struct.pack("<I", 10) + b"\x00\x00\x00\x00" + (width - 1).to_bytes(3, "little")
    body += (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


@pytest.mark.parametrize("make", [png, gif, jpeg, webp_vp8x])
@pytest.mark.parametrize(("width", "height"), [(48, 32), (1024, 768), (3000, 2000)])
def test_sizes_are_read_from_headers(make: object, width: int, height: int) -> None:
    data = base64.b64encode(make(width, height)).decode()  # type: ignore[operator]
    assert image_size(data) == (width, height)


def test_garbage_and_truncated_data_give_none() -> None:
    assert image_size("not base64 at all!") is None
    assert image_size(base64.b64encode(b"\x89PNG\r\n").decode()) is None
    assert image_size("") is None


def test_a_data_image_is_counted_by_the_tile_formula() -> None:
    counter = counter_for("gpt-4o")
    small = ImagePart(data=base64.b64encode(png(48, 32)).decode(), media_type="image/png", detail="high")
    unknown = ImagePart(url="https://example.com/x.png", detail="high")
    with_image = counter.count_message(Message(role="user", content=(small,)))
    without = counter.count_message(Message(role="user", content=(unknown,)))
    assert with_image - without == image_tokens(48, 32, "high") - MAX_HIGH_DETAIL_TOKENS
