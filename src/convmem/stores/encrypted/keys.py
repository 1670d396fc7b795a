"""The keys of encryption at rest: the application's key ring, each user's data key, and the AES-GCM envelope.

Envelope encryption. Every user has one **data key** (32 random bytes, with an id) that encrypts their rows.
It is stored wrapped (AES-GCM) by a **key-encryption key** (KEK) of the application's :class:`KeyRing`,
in the store's own block store under a reserved name (:data:`KEY_BLOCK`): it lives where the user's data
lives, is backed up with it, and goes with it, since ``forget`` of a user erases the user's blocks, after
which any copy of their ciphertext (a backup, a replica) is unreadable too. The wrapped key is bound (its
AAD) to its user and its id, so it cannot be moved to another user's block.

Rotation without downtime: give the ring a new KEK as its primary and keep the old one. A data key
wrapped by an older KEK is re-wrapped by the primary the next time it is written under (lazily) or by
:meth:`DataKeys.rotate`; the data key itself never changes, so no row is re-encrypted, readers never wait,
and a writer racing a rotation writes under the same data key either way. Once every user's key is
re-wrapped (``rotate`` says so per user), the old KEK can leave the ring.

Rows are sealed with a synthetic nonce (the HMAC of the AAD and the plaintext, as in SIV): the same row
sealed twice gives the same bytes, which the stores' idempotent retries need (a retry is recognised by
equal content), and a nonce never repeats for two different plaintexts under one key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConfigurationError, ConflictError, DecryptionError
from ...longterm.blocks.store import BlockRecord, BlockStore

__all__ = ["ENV_VAR", "KEY_BLOCK", "DataKey", "DataKeys", "KeyRing", "aad", "open_sealed", "seal"]

#: The environment variable that names a key file (:meth:`KeyRing.from_env`), read by the CLI and the service.
ENV_VAR = "CONVMEM_KEY_FILE"
#: The block name under which a user's wrapped data key is stored (hidden from the block API of the wrapper).
KEY_BLOCK = "convmem.data-key"
_PREFIX = "cm1."  # envelope format 1: cm1.<data key id>.<context>.<nonce + ciphertext + tag>
_KEY_SIZES = (16, 24, 32)


def _aesgcm(key: bytes) -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise ConfigurationError("encryption at rest needs the crypto extra: pip install 'convmem[crypto]'") from None
    return AESGCM(key)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def aad(kind: str, *parts: str | int | None) -> bytes:
    """The associated data binding a sealed value to where it belongs (its kind, user, session, row)."""
    return b"convmem/v1\x00" + json.dumps([kind, *parts], ensure_ascii=False, separators=(",", ":")).encode()


class KeyRing:
    """The key-encryption keys an application holds: ``{id: key}`` and the primary id new wrappings use.

    The keys are never shown: not by ``repr``, not in an error. Ids are short plain names (``"2026-12"``).

    Example::

        ring = KeyRing.from_file("/etc/convmem/keys.json")   # {"primary": "k2", "keys": {"k1": "<base64>", ...}}
        store = EncryptedStore(SQLiteStore("chat.db"), ring)
    """

    __slots__ = ("_keys", "_primary")

    def __init__(self, keys: Mapping[str, bytes], *, primary: str | None = None) -> None:
        if not keys:
            raise ConfigurationError("a key ring needs at least one key")
        for key_id, key in keys.items():
            if not isinstance(key_id, str) or not key_id or len(key_id) > 64 or not key_id.isprintable():
                raise ConfigurationError(f"a key id must be 1 to 64 printable characters, got {key_id!r:.80}")
            if "." in key_id:
                raise ConfigurationError(f"key id {key_id!r} holds a '.'; the envelope format uses it as a separator")
            if not isinstance(key, bytes) or len(key) not in _KEY_SIZES:
                size = len(key) if isinstance(key, bytes) else type(key).__name__
                raise ConfigurationError(f"key {key_id!r} must be 16, 24 or 32 bytes (AES), got {size}")
        chosen = primary if primary is not None else list(keys)[-1]
        if chosen not in keys:
            raise ConfigurationError(f"the primary key {chosen!r} is not in the ring (ids: {sorted(keys)})")
        self._keys = dict(keys)
        self._primary = chosen

    @classmethod
    def generate(cls, key_id: str = "k1") -> KeyRing:
        """A ring of one fresh random 256-bit key."""
        return cls({key_id: secrets.token_bytes(32)})

    @classmethod
    def from_json(cls, text: str | bytes) -> KeyRing:
        """A ring from ``{"primary": id, "keys": {id: base64 key}}`` (what :meth:`to_json` writes)."""
        try:
            value = json.loads(text)
            keys = {str(k): base64.b64decode(v, validate=True) for k, v in value["keys"].items()}
            primary = value.get("primary")
        except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as exc:
            # The reason names the JSON's shape, never its content: the content is keys.
            raise ConfigurationError(
                f'a key file must be JSON {{"primary": id, "keys": {{id: base64}}}} ({type(exc).__name__})'
            ) from None
        return cls(keys, primary=primary if isinstance(primary, str) else None)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> KeyRing:
        """A ring from a key file (see :meth:`from_json`)."""
        try:
            text = Path(path).read_bytes()
        except OSError as exc:
            raise ConfigurationError(f"cannot read the key file {str(path)!r}: {exc.strerror}") from None
        return cls.from_json(text)

    @classmethod
    def from_env(cls, name: str = ENV_VAR) -> KeyRing | None:
        """The ring of the key file the environment variable ``name`` names; None when it is unset or empty."""
        path = os.environ.get(name)
        return cls.from_file(path) if path else None

    def to_json(self) -> str:
        """The ring as a key file's JSON (it holds the keys: write it where only the application reads)."""
        keys = {k: base64.b64encode(v).decode() for k, v in self._keys.items()}
        return json.dumps({"primary": self._primary, "keys": keys}, indent=2)

    def with_key(self, key_id: str, key: bytes, *, primary: bool = True) -> KeyRing:
        """A ring with one more key (the new primary by default): the first step of a rotation."""
        return KeyRing({**self._keys, key_id: key}, primary=key_id if primary else self._primary)

    def without(self, key_id: str) -> KeyRing:
        """A ring without ``key_id`` (the last step of a rotation, once nothing is wrapped by it)."""
        return KeyRing({k: v for k, v in self._keys.items() if k != key_id}, primary=self._primary)

    @property
    def primary(self) -> str:
        """The id of the key new wrappings use."""
        return self._primary

    @property
    def ids(self) -> tuple[str, ...]:
        """The ids of the ring's keys."""
        return tuple(self._keys)

    def wrap(self, data_key: bytes, context: bytes) -> tuple[str, bytes]:
        """``data_key`` sealed by the primary key, bound to ``context``: (the primary's id, the wrapped key)."""
        nonce = secrets.token_bytes(12)
        return self._primary, nonce + _aesgcm(self._keys[self._primary]).encrypt(nonce, data_key, context)

    def unwrap(self, key_id: str, wrapped: bytes, context: bytes, what: str) -> bytes:
        """The data key ``wrapped`` by ``key_id``; DecryptionError naming ``what`` if the ring cannot open it."""
        key = self._keys.get(key_id)
        if key is None:
            raise DecryptionError(
                f"{what} is wrapped by key {key_id!r}, which the key ring does not hold (it holds {list(self._keys)})"
            )
        try:
            return bytes(_aesgcm(key).decrypt(wrapped[:12], wrapped[12:], context))
        except Exception as exc:  # cryptography's InvalidTag; a short blob is a ValueError
            if isinstance(exc, ConfigurationError):
                raise
            raise DecryptionError(
                f"{what}: key {key_id!r} of the ring does not open it (a wrong key, or altered)"
            ) from None

    def __repr__(self) -> str:
        return f"KeyRing(ids={self.ids!r}, primary={self._primary!r})"

    def __reduce__(self) -> Any:  # a ring is never pickled into a cache or a log by accident
        raise TypeError("a KeyRing cannot be pickled")


@dataclass(frozen=True, slots=True)
class DataKey:
    """One user's data key: its id, the AES-GCM key and the key of the synthetic nonce (derived)."""

    id: str
    secret: bytes = field(repr=False)
    nonce_key: bytes = field(repr=False)
    aead: Any = field(repr=False, compare=False)  # the AESGCM object, built once: building it per row is slow

    @classmethod
    def of(cls, key_id: str, secret: bytes) -> DataKey:
        nonce_key = hmac.new(secret, b"convmem/v1 nonce", hashlib.sha256).digest()
        return cls(key_id, secret, nonce_key, _aesgcm(secret))


def seal(key: DataKey, context: bytes, plaintext: bytes, *, origin: str = "") -> str:
    """``plaintext`` encrypted and authenticated with ``context`` (and ``origin``, stored in the clear beside it)."""
    bound = context + b"\x00" + origin.encode()
    nonce = hmac.new(key.nonce_key, bound + b"\x00" + plaintext, hashlib.sha256).digest()[:12]
    body = nonce + key.aead.encrypt(nonce, plaintext, bound)
    return f"{_PREFIX}{key.id}.{_b64(origin.encode())}.{_b64(body)}"


def parse_sealed(text: object, what: str) -> tuple[str, str, bytes]:
    """(data key id, origin, body) of a sealed value, or DecryptionError: it is not one (written unencrypted)."""
    if not isinstance(text, str) or not text.startswith(_PREFIX) or text.count(".") != 3:
        raise DecryptionError(f"{what} is not encrypted (written without the key ring, or altered)")
    _, key_id, origin, body = text.split(".")
    try:
        return key_id, _unb64(origin).decode(), _unb64(body)
    except (ValueError, binascii.Error):
        raise DecryptionError(f"{what}: its envelope is damaged") from None


def open_sealed(key: DataKey, context: bytes, text: object, what: str) -> tuple[bytes, str]:
    """(plaintext, origin) of a sealed value; DecryptionError naming ``what`` if it does not authenticate."""
    key_id, origin, body = parse_sealed(text, what)
    if key_id != key.id:
        raise DecryptionError(f"{what} was sealed by data key {key_id!r}, not the user's ({key.id!r}): it is lost")
    try:
        plain = key.aead.decrypt(body[:12], body[12:], context + b"\x00" + origin.encode())
    except Exception as exc:
        if isinstance(exc, ConfigurationError):
            raise
        raise DecryptionError(f"{what} does not authenticate: altered, or moved from another row") from None
    return bytes(plain), origin


class DataKeys:
    """Each user's data key, kept wrapped in a block store and cached unwrapped in this process.

    ``current`` gives the key a write uses: it is created on a user's first write (two processes
    racing to create it both end with the one the block store kept, since a block save is a
    compare-and-set) and re-wrapped by the primary KEK when an older one wraps it. ``for_read``
    gives the key a row names; a key this process does not hold is loaded again, once.
    """

    def __init__(self, ring: KeyRing, blocks: BlockStore) -> None:
        self._ring = ring
        self._blocks = blocks
        self._cache: dict[str | None, DataKey] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DataKeys(ring={self._ring!r}, users cached={len(self._cache)})"

    def current(self, user_id: str | None, *, checked: bool = True) -> DataKey:
        """The user's data key for a write; ``checked`` reads the stored record first (not just the cache)."""
        if not checked:
            with self._lock:
                cached = self._cache.get(user_id)
            if cached is not None:
                return cached
        for _ in range(8):  # each round loses only to another writer's create or rotation
            record = self._blocks.load_block(user_id, KEY_BLOCK)
            try:
                if record is None:
                    return self._remember(user_id, self._create(user_id))
                key = self._unwrapped(user_id, record)
                if self._kek_of(record) != self._ring.primary:
                    self._save(user_id, key, record.version)
                return self._remember(user_id, key)
            except ConflictError:
                continue
        raise ConflictError(f"the data key of user {user_id!r} kept changing under this writer; retry")

    def for_read(self, user_id: str | None, key_id: str) -> DataKey:
        """The user's data key named ``key_id`` (from the cache, else loaded from the block store)."""
        with self._lock:
            cached = self._cache.get(user_id)
        if cached is not None and cached.id == key_id:
            return cached
        record = self._blocks.load_block(user_id, KEY_BLOCK)
        if record is None:
            raise DecryptionError(f"the data key of user {user_id!r} is gone (the user was erased): the data is lost")
        return self._remember(user_id, self._unwrapped(user_id, record))

    def rotate(self, user_id: str | None) -> bool:
        """Re-wrap the user's data key by the primary KEK now; True if it was wrapped by another (or absent: False)."""
        for _ in range(8):
            record = self._blocks.load_block(user_id, KEY_BLOCK)
            if record is None or self._kek_of(record) == self._ring.primary:
                return False
            try:
                self._save(user_id, self._unwrapped(user_id, record), record.version)
                return True
            except ConflictError:
                continue
        raise ConflictError(f"the data key of user {user_id!r} kept changing during its rotation; retry")

    def forget(self, user_id: str | None) -> None:
        """Drop the user's cached key (their stored one was erased)."""
        with self._lock:
            self._cache.pop(user_id, None)

    # -- the stored record ----------------------------------------------------------------------------
    def _remember(self, user_id: str | None, key: DataKey) -> DataKey:
        with self._lock:
            self._cache[user_id] = key
        return key

    def _create(self, user_id: str | None) -> DataKey:
        key = DataKey.of(secrets.token_hex(6), secrets.token_bytes(32))
        self._save(user_id, key, 0)  # a ConflictError: another writer created it first; the caller reloads
        return key

    def _save(self, user_id: str | None, key: DataKey, version: int) -> None:
        kek, wrapped = self._ring.wrap(key.secret, aad("data-key", user_id, key.id))
        value = json.dumps({"id": key.id, "kek": kek, "wrapped": _b64(wrapped)})
        self._blocks.save_block(BlockRecord(user_id, KEY_BLOCK, value, version), expected_version=version)

    @staticmethod
    def _fields(user_id: str | None, record: BlockRecord) -> tuple[str, str, bytes]:
        try:
            value = json.loads(record.value)
            return str(value["id"]), str(value["kek"]), _unb64(value["wrapped"])
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise DecryptionError(f"the stored data key of user {user_id!r} is damaged: the data is lost") from None

    def _kek_of(self, record: BlockRecord) -> str:
        return self._fields(record.scope, record)[1]

    def _unwrapped(self, user_id: str | None, record: BlockRecord) -> DataKey:
        key_id, kek, wrapped = self._fields(user_id, record)
        secret = self._ring.unwrap(kek, wrapped, aad("data-key", user_id, key_id), f"the data key of user {user_id!r}")
        return DataKey.of(key_id, secret)
