"""The Lua scripts of the Redis recall store (layout in :mod:`convmem.stores.redis._recall`).

Each is one atomic write, like the session scripts of :mod:`convmem.stores.redis._lua`,
and starts with the same prelude (``P`` is the prefix, ``k(kind, id)`` a key).
"""

from __future__ import annotations

__all__ = ["RECALL_SCRIPTS"]

# ARGV: P, TTL, then per document 11 values: user key, user tag, ref, session tag, role, created ts, seq,
# key, context, JSON, and the key's and the context's tokens (what convmem's BM25 ranks RediSearch's lexical
# candidates with). A document whose (user, ref) is stored already is skipped. Returns 1 (stored now) or 0
# (already there) per document, in order.
_SAVE_RECALL_DOCS = """
local out = {}
for i = 3, #ARGV, 11 do
  local ukey, ref = ARGV[i], ARGV[i + 2]
  if redis.call('HEXISTS', k('rx', ukey), ref) == 1 then
    table.insert(out, 0)
  else
    local n = redis.call('INCR', P .. 'rn')
    redis.call('HSET', k('rx', ukey), ref, n)
    redis.call('RPUSH', k('rl', ukey), n)
    redis.call('HSET', k('rd', n), 'u', ARGV[i + 1], 's', ARGV[i + 3], 'r', ARGV[i + 4], 't', ARGV[i + 5],
      'q', ARGV[i + 6], 'k', ARGV[i + 7], 'c', ARGV[i + 8], 'j', ARGV[i + 9], 'w', ARGV[i + 10])
    table.insert(out, 1)
  end
end
return out
"""

# ARGV: P, TTL, the vector's field, then per vector (user key, ref, float32 bytes). A vector whose document
# is not stored for that user is dropped.
_SAVE_RECALL_VECTORS = """
for i = 4, #ARGV, 3 do
  local n = redis.call('HGET', k('rx', ARGV[i]), ARGV[i + 1])
  if n then redis.call('HSET', k('rd', n), ARGV[3], ARGV[i + 2]) end
end
return 1
"""

RECALL_SCRIPTS: dict[str, str] = {
    "save_recall_docs": _SAVE_RECALL_DOCS,
    "save_recall_vectors": _SAVE_RECALL_VECTORS,
}
