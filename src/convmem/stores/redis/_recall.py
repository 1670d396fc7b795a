"""Recall documents and vectors in Redis: the layout, its flows, and the upgrade from the first layout.

A document is (user, session, message id): message ids are unique only per
user in the Redis session store and only per session in the file store, so
no key of this layout is a bare message id. Layout (``P``: the store's
prefix, ``U``: a user key, as in :mod:`convmem.stores.redis._lua`):

=================  ==========================================================================
``P rd:<n>``       hash, one per document: ``u`` user tag, ``s`` session tag, ``r`` role tag,
                   ``t`` created (epoch seconds), ``q`` seq, ``k`` key text, ``c`` context text,
                   ``j`` the document as JSON, ``w`` the key's and the context's tokens
                   (``"<key>|<context>"``, absent on documents saved before it), and
                   ``v:<model tag>`` its float32 vector per model
``P rx:U``         hash: the user's refs -> n; a ref is ``<bytes of session>:<session><message id>``
``P rl:U``         list: the user's numbers, in the order they were saved
``P rn``           the last number given
=================  ==========================================================================

Tags are the hex of the UTF-8 text, so a RediSearch TAG query needs no
escaping whatever a user or session id holds. One hash per document is what
RediSearch indexes (``FT.CREATE ... ON HASH PREFIX 1 P rd:``), and the same
keys serve the client-side fallback, so an index created later (the module
loaded after the data was written) covers every document already there.

The first layout kept ``P d:U`` / ``P dl:U`` keyed by message id, and vectors
in ``P v:n:U:model`` found through ``P dk`` (message id -> user), where two
users' equal ids collided. :func:`upgrade` rewrites it into this one (when
``P dk`` exists): idempotent, so an interrupted upgrade is finished by the next.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...longterm.recall._np import np
from ...longterm.recall.lexical import tokenize
from ...longterm.recall.model import DocRef, RecallDoc
from .._longterm_codec import doc_from_json, doc_to_json
from ._ops import Cmd, Flow, Keys, Pipe, user_key

__all__ = ["load_docs", "load_vectors", "missing", "sample", "save_docs", "save_vectors", "stored_terms", "upgrade"]

CHUNK = 500  # documents or vectors per script call


def tag(text: str) -> str:
    """A TAG-safe token for any text: the hex of its UTF-8 bytes."""
    return text.encode().hex()


def user_tag(user_id: str | None) -> str:
    return tag(user_key(user_id))


def ref(doc_ref: DocRef) -> str:
    session, message = doc_ref
    return f"{len(session.encode())}:{session}{message}"


def vector_field(model: str) -> str:
    return "v:" + tag(model)


def missing(keys: Keys, user_id: str | None, model: str) -> Flow[list[RecallDoc]]:
    """The user's documents without a vector of ``model``."""
    numbers = yield from _numbers(keys, user_id)
    field = vector_field(model)
    has = yield Pipe([("HEXISTS", keys("rd", n.decode()), field) for n in numbers], atomic=False)
    lacking = [n for n, flag in zip(numbers, has, strict=True) if not flag]
    found = yield Pipe([("HGET", keys("rd", n.decode()), "j") for n in lacking], atomic=False)
    return [doc_from_json(raw) for raw in found if raw is not None]


def sample(keys: Keys, user_id: str | None, model: str, n: int) -> Flow[Any]:
    """The user's newest ``n`` vectors of ``model`` (those of the first one's size)."""
    numbers = yield Cmd(("LRANGE", keys("rl", user_key(user_id)), -n, -1))
    found = yield Pipe([("HGET", keys("rd", m.decode()), vector_field(model)) for m in numbers], atomic=False)
    blobs = [b for b in found if b is not None]
    blobs = [b for b in blobs if len(b) == len(blobs[0])]
    if not blobs:
        return np.zeros((0, 0), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)


def stored_terms(key: str, context: str | None) -> str:
    """The key's and the context's tokens, as the ``w`` field keeps them: ``"<key tokens>|<context tokens>"``."""
    return " ".join(tokenize(key)) + "|" + (" ".join(tokenize(context)) if context else "")


def save_docs(keys: Keys, docs: Sequence[RecallDoc]) -> Flow[list[bool]]:
    """Store documents (skipping those already stored); whether each one was new."""
    fresh: list[bool] = []
    for start in range(0, len(docs), CHUNK):
        args: list[Any] = []
        for d in docs[start : start + CHUNK]:
            args += [
                user_key(d.user_id),
                user_tag(d.user_id),
                ref(d.ref),
                tag(d.session_id),
                tag(d.role),
                repr(d.created_at.timestamp()),
                d.seq,
                d.key,
                d.context,
                doc_to_json(d),
                stored_terms(d.key, d.context),
            ]
        fresh += [bool(flag) for flag in (yield keys.script("save_recall_docs", *args))]
    return fresh


def _numbers(keys: Keys, user_id: str | None) -> Flow[list[bytes]]:
    numbers: list[bytes] = yield Cmd(("LRANGE", keys("rl", user_key(user_id)), 0, -1))
    return numbers


def load_docs(keys: Keys, user_id: str | None) -> Flow[list[RecallDoc]]:
    numbers = yield from _numbers(keys, user_id)
    found = yield Pipe([("HGET", keys("rd", n.decode()), "j") for n in numbers], atomic=False)
    return [doc_from_json(raw) for raw in found if raw is not None]


def save_vectors(keys: Keys, model: str, docs: Sequence[RecallDoc], matrix: Any) -> Flow[None]:
    for start in range(0, len(docs), CHUNK):
        args: list[Any] = []
        for i, d in enumerate(docs[start : start + CHUNK], start=start):
            args += [user_key(d.user_id), ref(d.ref), matrix[i].tobytes()]
        yield keys.script("save_recall_vectors", vector_field(model), *args)


def load_vectors(keys: Keys, user_id: str | None, model: str) -> Flow[tuple[list[DocRef], Any]]:
    numbers = yield from _numbers(keys, user_id)
    field = vector_field(model)
    found = yield Pipe([("HMGET", keys("rd", n.decode()), "j", field) for n in numbers], atomic=False)
    rows = [(doc_from_json(j).ref, v) for j, v in found if j is not None and v is not None]
    if not rows:
        return [], np.zeros((0, 0), dtype=np.float32)
    size = len(rows[0][1])  # a model's vectors share one dimension; others are stale
    kept = [(r, v) for r, v in rows if len(v) == size]
    matrix = np.frombuffer(b"".join(v for _, v in kept), dtype=np.float32).reshape(len(kept), size // 4)
    return [r for r, _ in kept], matrix


# -- upgrade from the first layout -----------------------------------------------------------------
def _glob(text: str) -> str:
    return "".join("\\" + c if c in "\\*?[]" else c for c in text)


def _scan(pattern: str) -> Flow[list[bytes]]:
    cursor, found = b"0", []
    while True:
        cursor, keys = yield Cmd(("SCAN", cursor, "MATCH", pattern, "COUNT", 1000))
        found += keys
        if cursor in (b"0", 0, "0"):
            return found


def upgrade(keys: Keys) -> Flow[bool]:
    """Rewrite documents and vectors of the first layout into this one; whether there were any."""
    if not (yield Cmd(("EXISTS", keys.prefix + "dk"))):
        return False
    lists = yield from _scan(_glob(keys.prefix) + "dl:*")
    old: dict[str, dict[str, RecallDoc]] = {}  # user key -> message id -> document
    for key in lists:
        ukey = key.decode()[len(keys.prefix) + 3 :]
        ids = yield Cmd(("LRANGE", key, 0, -1))
        if not ids:
            continue
        found = yield Cmd(("HMGET", keys("d", ukey), *ids))
        docs = [doc_from_json(raw) for raw in found if raw is not None]
        old[ukey] = {d.message_id: d for d in docs}
        yield from save_docs(keys, docs)
    stale = [keys("d", u) for u in old] + [keys("dl", u) for u in old]
    for key in (yield from _scan(_glob(keys.prefix) + "v:*")):
        # v:<length of U>:<U>:<model>
        rest = key.decode()[len(keys.prefix) + 2 :]
        size, _, rest = rest.partition(":")
        if not size.isdigit():
            continue
        ukey, model = rest[: int(size)], rest[int(size) + 1 :]
        vectors: dict[bytes, bytes] = yield Cmd(("HGETALL", key))
        mine = old.get(ukey, {})
        pairs = [(mine[m.decode()], v) for m, v in vectors.items() if m.decode() in mine]
        pairs = [(d, v) for d, v in pairs if len(v) == len(pairs[0][1])]  # one dimension per model
        if pairs:
            matrix = np.frombuffer(b"".join(v for _, v in pairs), dtype=np.uint8).reshape(len(pairs), -1)
            yield from save_vectors(keys, model, [d for d, _ in pairs], matrix)
        stale.append(key.decode())
    for start in range(0, len(stale), CHUNK):
        yield Cmd(("DEL", *stale[start : start + CHUNK]))
    yield Cmd(("DEL", keys.prefix + "dk"))
    return True
