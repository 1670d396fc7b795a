"""Encryption at rest (extra ``crypto``): :class:`EncryptedStore` over any store, keyed by a :class:`KeyRing`.

``keys`` holds the key ring, each user's data key and the AES-GCM envelope; ``_rows`` what of each row is
sealed and what stays clear; ``store`` the session store wrapper; ``longterm`` its fact and block stores.

Example::

    from convmem.stores import SQLiteStore
    from convmem.stores.encrypted import EncryptedStore, KeyRing

    store = EncryptedStore(SQLiteStore("chat.db"), KeyRing.from_file("/etc/convmem/keys.json"))
"""

from __future__ import annotations

from .keys import ENV_VAR, KEY_BLOCK, KeyRing
from .longterm import EncryptedBlockStore, EncryptedFactStore
from .store import EncryptedStore

__all__ = ["ENV_VAR", "KEY_BLOCK", "EncryptedBlockStore", "EncryptedFactStore", "EncryptedStore", "KeyRing"]
