"""The Lua scripts of the Redis stores: every write is one script, so it is atomic and all or nothing.

Redis runs a script without interleaving any other command, and each script
below checks everything (the session's user, duplicate ids, versions, forks)
before its first write, so a refused call changes nothing. The sync and the
async store load the same text.

Keys (``P`` is the store's prefix, ``U`` a user key: ``-`` for no user, ``=`` + the user id):

=================  ==========================================================================
``P s:<id>``       hash: the session (``user`` = U, counters, ``next_seq``, ``state``, ``version``...)
``P m:<id>``       sorted set: the session's own messages, score = seq (pinned ones excluded)
``P p:<id>``       sorted set: the session's own pinned (system/developer) messages
``P c:<id>``       hash: forks of this session -> the seq they branched at
``P r:U``          sorted set: the user's live sessions by last update (score = epoch microseconds)
``P l:U``          sorted set: the user's live session ids, all at score 0 (prefix lookup by lex range)
``P ids:U``        hash: message id -> ``seq:session`` (duplicate ids, idempotent retries)
``P f:U``          hash: fact id -> fact JSON; ``P fo:U``: set of the ids of open facts
``P b:S``          hash: block name -> block JSON (``S``: the scope, keyed like a user)
``P bv:S``         hash: block name -> version
``P rd:<n>``       hash: recall document number n (fields in :mod:`convmem.stores.redis._recall`)
``P rx:U``         hash: the user's document refs (session and message id) -> number
``P rl:U``         list: the user's document numbers, in the order they were saved
``P rn``           the last document number given
=================  ==========================================================================

A message is stored as the member ``seq|tokens|idlen|id`` followed by its
JSON, so ranges come back in seq order and a script can read a row's tokens
and id without parsing JSON. ``ARGV[1]`` is always the prefix and ``ARGV[2]``
the TTL in milliseconds (``0``: none); scripts compute their keys from them,
so the stores need one Redis (or one shard), not a cluster. Numbers stay far
below 2^53, where Lua's doubles are exact.
"""

from __future__ import annotations

from ._lua_recall import RECALL_SCRIPTS

__all__ = ["SCRIPTS"]

_PRELUDE = """
local P, TTL = ARGV[1], tonumber(ARGV[2])
local function k(kind, id) return P .. kind .. ':' .. id end
local function live(sid, ukey)
  local f = redis.call('HMGET', k('s', sid), 'user', 'deleted')
  return f[1] == ukey and f[2] ~= '1'
end
local function parse(member)
  local seq, tokens, n, at = string.match(member, '^(%d+)|(%d+)|(%d+)|()')
  return tonumber(seq), tonumber(tokens), string.sub(member, at, at + tonumber(n) - 1)
end
-- Where a message id is stored; an id whose session expired (TTL) is free again.
local function owner(ukey, mid)
  local v = redis.call('HGET', k('ids', ukey), mid)
  if not v then return nil end
  local seq, sid = string.match(v, '^(%d+):(.*)$')
  if redis.call('EXISTS', k('s', sid)) == 0 then return nil end
  return tonumber(seq), sid
end
-- Live forks as {id, fork_seq, ...}; forks that expired are forgotten here.
local function children(sid)
  local out, kids = {}, redis.call('HGETALL', k('c', sid))
  for i = 1, #kids, 2 do
    if redis.call('EXISTS', k('s', kids[i])) == 1 then
      table.insert(out, kids[i]); table.insert(out, tonumber(kids[i + 1]))
    else
      redis.call('HDEL', k('c', sid), kids[i])
    end
  end
  return out
end
-- Stamp the update, move the session up the recency index, and (with a TTL) keep it and its
-- ancestors, whose rows it reads, alive.
local function touch(sid, ukey, stamp, score)
  redis.call('HSET', k('s', sid), 'updated', stamp, 'uscore', score)
  redis.call('ZADD', k('r', ukey), score, sid)
  if TTL > 0 then
    local id = sid
    while id do
      for _, kind in ipairs({'s', 'm', 'p', 'c'}) do redis.call('PEXPIRE', k(kind, id), TTL) end
      id = redis.call('HGET', k('s', id), 'parent')
    end
    for _, kind in ipairs({'r', 'l', 'ids'}) do redis.call('PEXPIRE', k(kind, ukey), TTL) end
  end
end
local function add_rows(sid, ukey, rows)
  for _, r in ipairs(rows) do
    redis.call('ZADD', k(r.pinned == '1' and 'p' or 'm', sid), r.seq, r.seq .. '|' .. r.member)
    redis.call('HSET', k('ids', ukey), r.id, r.seq .. ':' .. sid)
  end
end
-- Remove rows lo..hi (score bounds) of a session; returns how many and their tokens.
local function drop(sid, ukey, lo, hi)
  local n, t = 0, 0
  for _, kind in ipairs({'m', 'p'}) do
    local rows = redis.call('ZRANGEBYSCORE', k(kind, sid), lo, hi)
    for _, member in ipairs(rows) do
      local _, tokens, mid = parse(member)
      redis.call('HDEL', k('ids', ukey), mid)
      n, t = n + 1, t + tokens
    end
    if #rows > 0 then redis.call('ZREMRANGEBYSCORE', k(kind, sid), lo, hi) end
  end
  return n, t
end
-- Delete a session; rows its forks still read stay, and it is hidden (deleted = 1) until they go.
local function remove(sid, ukey)
  local kids = children(sid)
  if #kids > 0 then
    local keep = -1
    for i = 2, #kids, 2 do if kids[i] > keep then keep = kids[i] end end
    local n, t = drop(sid, ukey, '(' .. keep, '+inf')
    redis.call('HINCRBY', k('s', sid), 'count', -n)
    redis.call('HINCRBY', k('s', sid), 'tokens', -t)
    redis.call('HSET', k('s', sid), 'deleted', '1')
  else
    drop(sid, ukey, '-inf', '+inf')
    local parent = redis.call('HGET', k('s', sid), 'parent')
    redis.call('DEL', k('s', sid), k('m', sid), k('p', sid), k('c', sid))
    if parent then
      redis.call('HDEL', k('c', parent), sid)
      if redis.call('HGET', k('s', parent), 'deleted') == '1' then remove(parent, ukey) end
    end
  end
  redis.call('ZREM', k('r', ukey), sid)
  redis.call('ZREM', k('l', ukey), sid)
end
local function opt(field, value, key)  -- '' is None, '=' .. text is text
  if value ~= '' then redis.call('HSET', key, field, string.sub(value, 2)) end
end
"""

# ARGV: P, TTL, session, user key, stamp, score, retried, model, empty state, n, then n x (id, pinned, tokens, member).
_APPEND = """
local sid, ukey, n = ARGV[3], ARGV[4], tonumber(ARGV[10])
local key = k('s', sid)
local found = redis.call('HMGET', key, 'user', 'deleted')
if found[1] and (found[1] ~= ukey or found[2] == '1') then return {'notfound'} end
local rows, first, ours, start = {}, nil, 0, nil
for i = 0, n - 1 do
  local b = 11 + 4 * i
  rows[i + 1] = {id = ARGV[b], pinned = ARGV[b + 1], tokens = ARGV[b + 2], member = ARGV[b + 3]}
  local seq, holder = owner(ukey, ARGV[b])
  if seq then
    first = first or i
    if holder == sid and (start == nil or seq == start + i) then ours, start = ours + 1, start or seq - i end
  end
end
if first then
  -- A retry after a lost reply: the whole batch is already ours, in order, so it was written.
  if ARGV[7] == '1' and ours == n and start then return {'again', start} end
  return {'dup', first}
end
if not found[1] then
  redis.call('HSET', key, 'user', ukey, 'created', ARGV[5], 'metadata', '{}', 'state', ARGV[9], 'version', 0,
    'next_seq', 0, 'count', 0, 'tokens', 0, 'base_count', 0, 'base_tokens', 0, 'deleted', 0)
  opt('model', ARGV[8], key)
  redis.call('ZADD', k('l', ukey), 0, sid)
end
start = redis.call('HINCRBY', key, 'next_seq', n) - n
local total = 0
for i, r in ipairs(rows) do
  r.seq = start + i - 1
  total = total + tonumber(r.tokens)
end
add_rows(sid, ukey, rows)
redis.call('HINCRBY', key, 'count', n)
redis.call('HINCRBY', key, 'tokens', total)
touch(sid, ukey, ARGV[5], ARGV[6])
return {'ok', start}
"""

# ARGV: P, TTL, session, user key, stamp, score, expected version, state, retried.
_SAVE_STATE = """
local sid, ukey = ARGV[3], ARGV[4]
if not live(sid, ukey) then return {'notfound'} end
local f = redis.call('HMGET', k('s', sid), 'version', 'state')
local version, expected = tonumber(f[1]), tonumber(ARGV[7])
if version ~= expected then
  if ARGV[9] == '1' and version == expected + 1 and f[2] == ARGV[8] then return {'ok'} end
  return {'conflict', version}
end
redis.call('HSET', k('s', sid), 'state', ARGV[8], 'version', version + 1)
touch(sid, ukey, ARGV[5], ARGV[6])
return {'ok'}
"""

# ARGV: P, TTL, session, user key, stamp, score, title, metadata (each '' or '=' .. value).
_UPDATE = """
local sid, ukey = ARGV[3], ARGV[4]
if not live(sid, ukey) then return false end
opt('title', ARGV[7], k('s', sid))
opt('metadata', ARGV[8], k('s', sid))
touch(sid, ukey, ARGV[5], ARGV[6])
return redis.call('HGETALL', k('s', sid))
"""

# ARGV: P, TTL, session, user key, stamp, score, then the seqs, ascending.
_DELETE_MESSAGES = """
local sid, ukey = ARGV[3], ARGV[4]
if not live(sid, ukey) then return {'notfound'} end
local low = tonumber(ARGV[7])
if low then
  local kids, fork_seq = children(sid), redis.call('HGET', k('s', sid), 'fork_seq')
  local shared = fork_seq and low <= tonumber(fork_seq)
  for i = 2, #kids, 2 do if low <= kids[i] then shared = true end end
  if shared then return {'refused', fork_seq or '', unpack(kids)} end
end
local n, t = 0, 0
for i = 7, #ARGV do
  local a, b = drop(sid, ukey, ARGV[i], ARGV[i])
  n, t = n + a, t + b
end
redis.call('HINCRBY', k('s', sid), 'count', -n)
redis.call('HINCRBY', k('s', sid), 'tokens', -t)
touch(sid, ukey, ARGV[5], ARGV[6])
return {'ok'}
"""

# ARGV: P, TTL, session, user key.
_DELETE = """
if not live(ARGV[3], ARGV[4]) then return 0 end
remove(ARGV[3], ARGV[4])
return 1
"""

# ARGV: P, TTL, user key, cutoff score. Returns the ids removed.
_EXPIRE = """
local ukey, out = ARGV[3], {}
for _, sid in ipairs(redis.call('ZRANGEBYSCORE', k('r', ukey), '-inf', '(' .. ARGV[4])) do
  if live(sid, ukey) then
    remove(sid, ukey)
    table.insert(out, sid)
  else
    redis.call('ZREM', k('r', ukey), sid)
  end
end
return out
"""

# ARGV: P, TTL, source, user key, at seq, fork id, stamp, score, home, state, count, tokens, then
# (session, lo, hi) per segment of the shared history. Without a state it only counts: {'count', n, tokens}.
_FORK = """
local src, ukey, at = ARGV[3], ARGV[4], tonumber(ARGV[5])
if not live(src, ukey) then return {'notfound'} end
local next_seq = tonumber(redis.call('HGET', k('s', src), 'next_seq'))
if at >= next_seq then return {'range', next_seq} end
local n, t = 0, 0
for i = 13, #ARGV, 3 do
  for _, kind in ipairs({'m', 'p'}) do
    for _, member in ipairs(redis.call('ZRANGEBYSCORE', k(kind, ARGV[i]), ARGV[i + 1], ARGV[i + 2])) do
      local _, tokens = parse(member)
      n, t = n + 1, t + tokens
    end
  end
end
if ARGV[10] == '' then return {'count', n, t} end
if n ~= tonumber(ARGV[11]) or t ~= tonumber(ARGV[12]) then return {'changed'} end
local fid, home = ARGV[6], ARGV[9]
local key = k('s', fid)
redis.call('HSET', key, 'user', ukey, 'created', ARGV[7], 'parent', home, 'fork_seq', at, 'base_count', n,
  'base_tokens', t, 'count', 0, 'tokens', 0, 'next_seq', at + 1, 'state', ARGV[10], 'version', 0, 'deleted', 0)
local source = redis.call('HMGET', k('s', src), 'title', 'model', 'metadata')
if source[1] then redis.call('HSET', key, 'title', source[1]) end
if source[2] then redis.call('HSET', key, 'model', source[2]) end
redis.call('HSET', key, 'metadata', source[3])
redis.call('HSET', k('c', home), fid, at)
redis.call('ZADD', k('l', ukey), 0, fid)
touch(fid, ukey, ARGV[7], ARGV[8])
return {'ok'}
"""

# ARGV: P, TTL, session, user key, created, updated, score, title, model, metadata, next seq, state, version, n,
# then n x (id, pinned, seq, member).
_IMPORT = """
local sid, ukey, n = ARGV[3], ARGV[4], tonumber(ARGV[14])
if redis.call('EXISTS', k('s', sid)) == 1 then return {'taken'} end
local rows, count, total = {}, 0, 0
for i = 0, n - 1 do
  local b = 15 + 4 * i
  if owner(ukey, ARGV[b]) then return {'dup', i} end
  rows[i + 1] = {id = ARGV[b], pinned = ARGV[b + 1], seq = ARGV[b + 2], member = ARGV[b + 3]}
  local _, tokens = parse('0|' .. ARGV[b + 3])
  count, total = count + 1, total + tokens
end
local key = k('s', sid)
redis.call('HSET', key, 'user', ukey, 'created', ARGV[5], 'metadata', ARGV[10], 'next_seq', ARGV[11],
  'state', ARGV[12], 'version', ARGV[13], 'count', count, 'tokens', total, 'base_count', 0, 'base_tokens', 0,
  'deleted', 0)
opt('title', ARGV[8], key)
opt('model', ARGV[9], key)
add_rows(sid, ukey, rows)
redis.call('ZADD', k('l', ukey), 0, sid)
touch(sid, ukey, ARGV[6], ARGV[7])
return {'ok'}
"""

# ARGV: P, TTL, then per fact (user key, id, JSON, open 1/0, changed 1/0). Changed facts must be stored and
# open, added ones absent; then all are written.
_WRITE_FACTS = """
for i = 3, #ARGV, 5 do
  local ukey, id, changed = ARGV[i], ARGV[i + 1], ARGV[i + 4] == '1'
  local stored = redis.call('HEXISTS', k('f', ukey), id) == 1
  if changed and not stored then return {'missing', id} end
  if changed and redis.call('SISMEMBER', k('fo', ukey), id) == 0 then return {'ended', id} end
  if not changed and stored then return {'exists', id} end
end
for i = 3, #ARGV, 5 do
  local ukey, id = ARGV[i], ARGV[i + 1]
  redis.call('HSET', k('f', ukey), id, ARGV[i + 2])
  if ARGV[i + 3] == '1' then redis.call('SADD', k('fo', ukey), id) else redis.call('SREM', k('fo', ukey), id) end
end
return {'ok'}
"""

# ARGV: P, TTL, scope key, name, JSON, expected version. Returns {'ok'} or {'conflict', found version}.
_SAVE_BLOCK = """
local skey, name, expected = ARGV[3], ARGV[4], tonumber(ARGV[6])
local found = tonumber(redis.call('HGET', k('bv', skey), name) or '0')
if found ~= expected then return {'conflict', found} end
redis.call('HSET', k('b', skey), name, ARGV[5])
redis.call('HSET', k('bv', skey), name, expected + 1)
return {'ok'}
"""

SCRIPTS: dict[str, str] = {
    name: _PRELUDE + body
    for name, body in {
        "append": _APPEND,
        "save_state": _SAVE_STATE,
        "update": _UPDATE,
        "delete_messages": _DELETE_MESSAGES,
        "delete": _DELETE,
        "expire": _EXPIRE,
        "fork": _FORK,
        "import": _IMPORT,
        "write_facts": _WRITE_FACTS,
        "save_block": _SAVE_BLOCK,
        **RECALL_SCRIPTS,
    }.items()
}
