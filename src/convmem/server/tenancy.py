"""Tenant scoping: how a tenant's user and session ids map onto the store's, and back.

The stores scope every call by ``user_id`` but keep session ids global. The
service therefore rewrites both, and nothing else, on the way in and out:

* a user id ``u`` of tenant ``t`` is stored as ``t:u`` (the tenant's anonymous
  user as ``t:``), so every store call of a key is confined to its tenant's users;
* a session id ``s`` chosen by a client is stored as ``t.s``, so two tenants can
  both own ``s`` and neither can see, nor block, the other's;
* a message id ``m`` is stored as ``t.m`` too: the stores keep message ids
  unique across sessions, so an unscoped id chosen by one tenant would block
  (and reveal) the same id of another;
* ids the store makes up itself (a fork's) carry no prefix; they stay reachable
  only through the tenant's own users, because every store call names one.

Tenant names use ``[a-z0-9_-]`` only, so the ``.`` and ``:`` separators make
each mapping one-to-one. This module is pure: no I/O, no framework.

Example::

    scope = Scope("acme", "alice")
    scope.store_user            # 'acme:alice'
    scope.store_session("s1")   # 'acme.s1'
    scope.client_session("acme.s1")  # 's1'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ConfigurationError

__all__ = ["SESSION_ID", "TENANT_NAME", "USER_ID", "Scope", "check_tenant"]

TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
SESSION_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
# A store keeps ``<tenant>:<user>`` in 200 bytes of UTF-8 without a control character (limits.check_id), and a
# tenant name takes up to 41 of them. JSON Schema counts characters, not bytes, so the rule it can state
# exactly is: up to 159 printable ASCII characters, or up to 39 of any others (4 bytes each at most). The
# pattern is both the OpenAPI document's and the service's check (FastAPI validates the query by it).
USER_ID = r"^(?:[\x20-\x7e]{1,159}|[^\x00-\x1f\x7f-\x9f]{1,39})$"


def check_tenant(name: str) -> str:
    """The tenant name, or a ConfigurationError naming the rule it breaks."""
    if not isinstance(name, str) or not TENANT_NAME.fullmatch(name):
        raise ConfigurationError(
            "a tenant name is 1 to 40 characters of a-z, 0-9, '_' and '-', starting with a letter or digit"
        )
    return name


@dataclass(frozen=True, slots=True)
class Scope:
    """One request's view of the store: a tenant and (optionally) one of its users."""

    tenant: str
    user_id: str | None = None

    @property
    def store_user(self) -> str:
        return f"{self.tenant}:{self.user_id}" if self.user_id is not None else f"{self.tenant}:"

    @property
    def session_prefix(self) -> str:
        return f"{self.tenant}."

    def store_session(self, session_id: str) -> str:
        """The store id of a client-chosen session id (or of a prefix of one)."""
        return self.session_prefix + session_id

    def client_session(self, store_id: str) -> str:
        """The id a client sees for a store session id: the tenant prefix removed if present."""
        prefix = self.session_prefix
        return store_id[len(prefix) :] if store_id.startswith(prefix) else store_id

    def store_message(self, message_id: str) -> str:
        return self.session_prefix + message_id

    def client_message(self, store_id: str | None) -> str | None:
        prefix = self.session_prefix
        return store_id[len(prefix) :] if store_id is not None and store_id.startswith(prefix) else store_id

    def scrub(self, text: str) -> str:
        """``text`` (an error message) with the store-side ids turned back into the client's."""
        text = text.replace(repr(self.store_user), repr(self.user_id))
        return re.sub(rf"(?<![A-Za-z0-9_.:-]){re.escape(self.session_prefix)}", "", text)
