"""The Lua script of ``forget`` in Redis: one script erases a user, or a session with its forks, atomically.

It starts with the prelude of :mod:`convmem.stores.redis._lua` (``k``, ``live``, ``remove``), so sessions
go by the same rule as ``delete_session`` (history a surviving fork reads is kept for it), forks first.
Then the facts learnt in the erased sessions (or all the user's), the user's blocks (every version is one
hash field, replaced in place), and the recall documents: their hashes (RediSearch drops a document from
its indexes when its hash is deleted), the user's ref index and number list. Redis runs the script
without interleaving any other command, so an append to an erased session either ran before it (and is
erased) or runs after it and finds the session gone (SessionLostError).
"""

from __future__ import annotations

__all__ = ["FORGET_SCRIPTS"]

# ARGV: P, TTL, user key, the user's prefix of a scoped session id, the target session key ('' for the whole
# user). Returns {sessions, messages, facts, blocks, documents, vectors, erased session key...}.
_FORGET = """
local ukey, upre, target = ARGV[3], ARGV[4], ARGV[5]
local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end
local all, seen = {}, {}
local function reach(sid)  -- a session and the hidden ancestors whose rows it reads
  while sid and not seen[sid] and redis.call('EXISTS', k('s', sid)) == 1 do
    seen[sid] = true
    table.insert(all, sid)
    sid = redis.call('HGET', k('s', sid), 'parent')
  end
end
for _, sid in ipairs(redis.call('ZRANGE', k('l', ukey), 0, -1)) do reach(sid) end
local function census()
  local n, m = 0, 0
  for _, sid in ipairs(all) do
    n = n + redis.call('EXISTS', k('s', sid))
    m = m + redis.call('ZCARD', k('m', sid)) + redis.call('ZCARD', k('p', sid))
  end
  return n, m
end
local s0, m0 = census()
local order = {}
if target == '' then
  order = all
else
  if not live(target, ukey) then return {0, 0, 0, 0, 0, 0} end
  order = {target}
  local i = 1
  while i <= #order do  -- breadth first: every fork comes after the session it reads
    for _, kid in ipairs(redis.call('HKEYS', k('c', order[i]))) do
      if redis.call('EXISTS', k('s', kid)) == 1 then table.insert(order, kid) end
    end
    i = i + 1
  end
end
for j = #order, 1, -1 do
  if redis.call('EXISTS', k('s', order[j])) == 1 then remove(order[j], ukey) end
end
local s1, m1 = census()
local erased, tags = {}, {}
for _, sid in ipairs(order) do
  local id = string.sub(sid, #upre + 1)
  erased[id] = true
  tags[hex(id)] = true
end
local facts, blocks, docs, vectors = 0, 0, 0, 0
if target == '' then
  facts = redis.call('HLEN', k('f', ukey))
  blocks = redis.call('HLEN', k('b', ukey))
  redis.call('DEL', k('f', ukey), k('fo', ukey), k('b', ukey), k('bv', ukey), k('r', ukey), k('l', ukey))
else
  local rows = redis.call('HGETALL', k('f', ukey))
  for i = 1, #rows, 2 do
    local sid = cjson.decode(rows[i + 1])['session_id']
    if type(sid) == 'string' and erased[sid] then
      redis.call('HDEL', k('f', ukey), rows[i])
      redis.call('SREM', k('fo', ukey), rows[i])
      facts = facts + 1
    end
  end
end
local gone = {}
for _, n in ipairs(redis.call('LRANGE', k('rl', ukey), 0, -1)) do
  if target == '' or tags[redis.call('HGET', k('rd', n), 's') or ''] then
    for _, field in ipairs(redis.call('HKEYS', k('rd', n))) do
      if string.sub(field, 1, 2) == 'v:' then vectors = vectors + 1 end
    end
    docs = docs + redis.call('DEL', k('rd', n))
    gone[n] = true
  end
end
if target == '' then
  redis.call('DEL', k('rx', ukey), k('rl', ukey))
elseif docs > 0 then
  local refs = redis.call('HGETALL', k('rx', ukey))
  for i = 1, #refs, 2 do
    if gone[refs[i + 1]] then redis.call('HDEL', k('rx', ukey), refs[i]) end
  end
  for n in pairs(gone) do redis.call('LREM', k('rl', ukey), 0, n) end
end
local out = {s0 - s1, m0 - m1, facts, blocks, docs, vectors}
for _, sid in ipairs(order) do table.insert(out, sid) end
return out
"""

FORGET_SCRIPTS: dict[str, str] = {"forget": _FORGET}
