"""The one redaction function: every error message, repr and log line that may hold a URL, a DSN or a
provider's reply passes through it (store settings, LLM clients, embedders). Re-exported by
:mod:`convmem.errors`, where the errors that carry such text live.
"""

from __future__ import annotations

import re

__all__ = ["REDACTED", "redact"]

_USERINFO = re.compile(r"(?<=://)[^/@\s'\"]*@")
_QUERY_SECRET = re.compile(
    r"(?i)([?&;](?:api[-_]?key|key|token|access[-_]?token|password|passwd|secret|sig|signature|code)=)[^&\s#'\"]+"
)
_DSN_PASSWORD = re.compile(r"(?i)\b(password\s*=\s*)('[^']*'|\S+)")
_KEYISH = re.compile(r"\b(?:sk|pk|rk|key|api)[-_][A-Za-z0-9_*.\-]{4,}|(?i:\bbearer\s+)[A-Za-z0-9._~+/\-]+=*")
REDACTED = "[redacted]"


def redact(text: str, *secrets: str | None) -> str:
    """``text`` without credentials: the given ``secrets``, URL user info (``user:pw@``), secret query
    parameters (``?api-key=``), DSN ``password=`` settings, bearer tokens and key-like words (``sk-...``).
    """
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    text = _USERINFO.sub(REDACTED + "@", text)
    text = _QUERY_SECRET.sub(r"\1" + REDACTED, text)
    text = _DSN_PASSWORD.sub(r"\1" + REDACTED, text)
    return _KEYISH.sub(REDACTED, text)
