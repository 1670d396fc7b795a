"""The Lua scripts of the Redis stores: every write is one script, so it is atomic and all or nothing.

Redis runs a script without interleaving any other command, and each script
below checks everything (the session's user, duplicate ids, versions, forks)
before its first write, so a refused call changes nothing. The sync and the
async store load the same text.

Keys (``P`` is the store's prefix, ``U`` a user key: ``-`` for no user, ``=`` + the user id; ``S`` a
session's key, its id scoped by its user with :func:`convmem.stores._record.scoped`, so two users'
sessions of one id are two sessions):

=================  ==========================================================================
``P s:S``          hash: the session (``user`` = U, counters, ``next_seq``, ``state``, ``version``,
                   ``parent`` = the parent's S...)
``P m:S``          sorted set: the session's own messages, score = seq (pinned ones excluded)
``P p:S``          sorted set: the session's own pinned (system/developer) messages
``P c:S``          hash: forks of this session (their S) -> the seq they branched at
``P ids:S``        hash: message id -> seq, of the session's own messages (retries, conflicts)
``P r:U``          sorted set: the user's live sessions (S) by last update (score = epoch microseconds)
``P l:U``          sorted set: the user's live sessions (S), all at score 0 (prefix lookup by lex range)
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

from ._lua_forget import FORGET_SCRIPTS
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
-- Where a message id is stored in a session's history (its own rows, then the rows it shares with its
-- ancestors): the seq and the member, or nil.
local function holder(sid, mid)
  local id, cap = sid, nil
  while id do
    local seq = tonumber(redis.call('HGET', k('ids', id), mid))
    if seq and (cap == nil or seq <= cap) then
      local found = redis.call('ZRANGEBYSCORE', k('m', id), seq, seq)
      if #found == 0 then found = redis.call('ZRANGEBYSCORE', k('p', id), seq, seq) end
      return seq, found[1]
    end
    local f = redis.call('HMGET', k('s', id), 'parent', 'fork_seq')
    if f[2] then cap = math.min(cap or tonumber(f[2]), tonumber(f[2])) end
    id = f[1]
  end
  return nil
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
      for _, kind in ipairs({'s', 'm', 'p', 'c', 'ids'}) do redis.call('PEXPIRE', k(kind, id), TTL) end
      id = redis.call('HGET', k('s', id), 'parent')
    end
    for _, kind in ipairs({'r', 'l'}) do redis.call('PEXPIRE', k(kind, ukey), TTL) end
  end
end
local function add_rows(sid, ukey, rows)
  for _, r in ipairs(rows) do
    redis.call('ZADD', k(r.pinned == '1' and 'p' or 'm', sid), r.seq, r.seq .. '|' .. r.member)
    redis.call('HSET', k('ids', sid), r.id, r.seq)
  end
end
-- Remove rows lo..hi (score bounds) of a session; returns how many and their tokens.
local function drop(sid, lo, hi)
  local n, t = 0, 0
  for _, kind in ipairs({'m', 'p'}) do
    local rows = redis.call('ZRANGEBYSCORE', k(kind, sid), lo, hi)
    for _, member in ipairs(rows) do
      local _, tokens, mid = parse(member)
      redis.call('HDEL', k('ids', sid), mid)
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
    local n, t = drop(sid, '(' .. keep, '+inf')
    redis.call('HINCRBY', k('s', sid), 'count', -n)
    redis.call('HINCRBY', k('s', sid), 'tokens', -t)
    redis.call('HSET', k('s', sid), 'deleted', '1')
  else
    drop(sid, '-inf', '+inf')
    local parent = redis.call('HGET', k('s', sid), 'parent')
    redis.call('DEL', k('s', sid), k('m', sid), k('p', sid), k('c', sid), k('ids', sid))
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

# ARGV: P, TTL, session key, user key, stamp, score, retried, model, empty state, n, expected seq, expected
# version, state ('' for none of the last three), then n x (id, pinned, tokens, member). The checks, in the
# order of convmem.stores.base: lost, hidden, a retry of its own committed attempt, stale, ids held.
_APPEND = """
local sid, ukey, n = ARGV[3], ARGV[4], tonumber(ARGV[10])
local eseq, ever, state = tonumber(ARGV[11]), tonumber(ARGV[12]), ARGV[13]
local key = k('s', sid)
local found = redis.call('HMGET', key, 'user', 'deleted', 'next_seq', 'version')
if not found[1] or found[2] == '1' then
  if (eseq or 0) > 0 or (ever or 0) > 0 then return {'lost'} end
  if found[1] then return {'notfound'} end
end
local rows, held = {}, {}
for i = 0, n - 1 do
  local b = 14 + 4 * i
  rows[i + 1] = {id = ARGV[b], pinned = ARGV[b + 1], tokens = ARGV[b + 2], member = ARGV[b + 3]}
  if found[1] then
    local seq, member = holder(sid, ARGV[b])
    if seq then
      table.insert(held, i); table.insert(held, member)
      rows[i + 1].held = seq
    end
  end
end
if found[1] then
  if ARGV[7] == '1' and #held == 2 * n then
    -- A retry after a lost reply: the whole batch is stored, in order, where this writer put it.
    local start, ours = eseq or rows[1].held, true
    for i, r in ipairs(rows) do if r.held ~= start + i - 1 then ours = false end end
    if ours then return {'again', start} end
  end
  local next_seq, version = tonumber(found[3]), tonumber(found[4])
  if (eseq and eseq ~= next_seq) or (ever and ever ~= version) then return {'stale', next_seq, version} end
  if #held > 0 then return {'held', unpack(held)} end
end
if not found[1] then
  redis.call('HSET', key, 'user', ukey, 'created', ARGV[5], 'metadata', '{}', 'state', ARGV[9], 'version', 0,
    'next_seq', 0, 'count', 0, 'tokens', 0, 'base_count', 0, 'base_tokens', 0, 'deleted', 0)
  opt('model', ARGV[8], key)
  redis.call('ZADD', k('l', ukey), 0, sid)
end
local start = redis.call('HINCRBY', key, 'next_seq', n) - n
local total = 0
for i, r in ipairs(rows) do
  r.seq = start + i - 1
  total = total + tonumber(r.tokens)
end
add_rows(sid, ukey, rows)
redis.call('HINCRBY', key, 'count', n)
redis.call('HINCRBY', key, 'tokens', total)
if state ~= '' then
  redis.call('HSET', key, 'state', state)
  redis.call('HINCRBY', key, 'version', 1)
end
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

# ARGV: P, TTL, session, user key, stamp, score, expected next seq ('' for none), then the seqs, ascending.
_DELETE_MESSAGES = """
local sid, ukey = ARGV[3], ARGV[4]
if not live(sid, ukey) then return {'notfound'} end
local f = redis.call('HMGET', k('s', sid), 'next_seq', 'version')
if ARGV[7] ~= '' and tonumber(ARGV[7]) ~= tonumber(f[1]) then return {'stale', f[1], f[2]} end
local low = tonumber(ARGV[8])
if low then
  local kids, fork_seq = children(sid), redis.call('HGET', k('s', sid), 'fork_seq')
  local shared = fork_seq and low <= tonumber(fork_seq)
  for i = 2, #kids, 2 do if low <= kids[i] then shared = true end end
  if shared then return {'refused', fork_seq or '', unpack(kids)} end
end
local n, t = 0, 0
for i = 8, #ARGV do
  local a, b = drop(sid, ARGV[i], ARGV[i])
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
        **FORGET_SCRIPTS,
    }.items()
}
