"""Reading an image's pixel size from the first bytes of its base64 data.

OpenAI Chat dicts cannot carry an image's width and height, so without this
every high-detail image of unknown size costs the formula's maximum (1445
tokens) even when it is a 48x32 icon. PNG, GIF, JPEG and WebP all state their
size in a header near the start of the file, so decoding a bounded prefix is
enough; the count is still computed once, when the message is added.

Example::

    image_size(base64_png)   # (1024, 768), or None if the format is not recognised
"""

from __future__ import annotations

import base64
import binascii
import struct

__all__ = ["image_size"]

# JPEG may put EXIF or ICC data (tens of KB) before its frame header.
_PREFIX_CHARS = 4 * 24 * 1024
_SOF_MARKERS = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


def image_size(data: str) -> tuple[int, int] | None:
    """The (width, height) stated in the header of base64 image ``data``, or None."""
    prefix = data[:_PREFIX_CHARS]
    prefix = prefix[: len(prefix) - len(prefix) % 4]
    try:
        head = base64.b64decode(prefix, validate=False)
    except (binascii.Error, ValueError):
        return None
    size = _png(head) or _gif(head) or _webp(head) or _jpeg(head)
    if size is None or size[0] <= 0 or size[1] <= 0:
        return None
    return size


def _png(head: bytes) -> tuple[int, int] | None:
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR" and len(head) >= 24:
        width, height = struct.unpack(">II", head[16:24])
        return int(width), int(height)
    return None


def _gif(head: bytes) -> tuple[int, int] | None:
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        width, height = struct.unpack("<HH", head[6:10])
        return int(width), int(height)
    return None


def _webp(head: bytes) -> tuple[int, int] | None:
    if head[:4] != b"RIFF" or head[8:12] != b"WEBP" or len(head) < 30:
        return None
    chunk = head[12:16]
    if chunk == b"VP8X":
        width = 1 + int.from_bytes(head[24:27], "little")
        height = 1 + int.from_bytes(head[27:30], "little")
        return width, height
    if chunk == b"VP8L" and head[20] == 0x2F:
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", head[26:30])
        return int(width) & 0x3FFF, int(height) & 0x3FFF
    return None


def _jpeg(head: bytes) -> tuple[int, int] | None:
    if head[:2] != b"\xff\xd8":
        return None
    position = 2
    while position + 9 < len(head):
        if head[position] != 0xFF:
            return None
        marker = head[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in _SOF_MARKERS:
            height, width = struct.unpack(">HH", head[position + 5 : position + 9])
            return int(width), int(height)
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            position += 2
            continue
        (length,) = struct.unpack(">H", head[position + 2 : position + 4])
        position += 2 + length
    return None
