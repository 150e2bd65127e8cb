-- SPDX-License-Identifier: MIT
-- sliding_log: admitted permits in (now - window_us, now] + permits <= limit, exact (mirrors src/algorithm.c).
--
-- decide (= exact): KEYS state, seq; ARGV permits, limit, window_us, now_us (absent:
-- Redis TIME). An admission logged at now replies remaining alone (an integer: a table
-- reply costs Redis more than the rest of the decision), its reset being the window.
-- bands: run_bands (prelude.lua), two keys a band.
-- State: a ZSET with one member per admitted permit, score = its time, member = a
-- number from the seq key's counter (unique even when permits share a microsecond);
-- both keys get PX = ceil(reset/1000) + 1 ms. Entries at or before now - window are
-- removed first (the decision is the same with or without them). Memory grows with
-- limit.
-- A denial keeps its remaining until its retry: a lower bound, as entries leave
-- the window meanwhile (docs/algorithms.md).

local band
band = function(key, seq, limit, w, burst, permits, reserve, now, virtual, commit)
  local capacity = limit
  local need, consume = sizing(permits, capacity)
  if not commit then consume = false end

  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - w) -- they have left the window
  local total = redis.call('ZCARD', key)
  local newest = nil -- the newest entry's {member, score}
  if total > 0 then
    newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    local u = zblock_of(newest)
    if u and now < u then return blocked_band(capacity, u, now) end
    if u then -- a block that has ended: as if it had never been
      redis.call('ZREM', key, newest[1])
      return band(key, seq, limit, w, burst, permits, reserve, now, virtual, commit)
    end
  end
  local allowed = total + need <= limit
  local retry = -1
  if not allowed then
    -- when the (total + need - limit)-th oldest leaves (the newest when there are fewer)
    local k = total + need - limit
    local t = newest and tonumber(newest[2]) or 0
    if k <= total then
      t = tonumber(redis.call('ZRANGE', key, k - 1, k - 1, 'WITHSCORES')[2])
    end
    retry = (t - now) + w
  end
  local last = newest and tonumber(newest[2]) or nil
  if allowed and consume then
    -- a clock that stepped back logs at the newest time, as the C ring merges runs
    local t = now
    if last and last > now then t = last end
    local top = redis.call('INCRBY', seq, need)
    zadd_range(key, t, top - need + 1, top)
    total = total + need
    last = t
    local ttl = px((t - now) + w, virtual)
    redis.call('PEXPIRE', key, ttl)
    redis.call('PEXPIRE', seq, ttl)
  end
  local remaining = limit - total
  local reset = 0
  if total > 0 then reset = (last - now) + w end
  if permits > capacity then allowed, retry = false, -1 end
  return {allowed and 1 or 0, capacity, remaining, retry, reset, 0, 0}
end

-- The common path inline (a Lua function call costs Redis as much as the arithmetic),
-- and lighter on the ZSET: entries that left the window are counted out (ZCOUNT of the
-- window) rather than removed at every call, and both keys' expiry moves only when
-- an admission falls in a later window-long bucket (floor(t / window)) than the
-- newest entry: then the entries that left go, and the keys expire at the end of the
-- admission's bucket + window (a window or less after it: the log holds at most
-- two windows of entries, and outlives its newest entry by one window or more).
local decide
decide = function(KEYS, ARGV)
  local key, seq = KEYS[1], KEYS[2]
  local permits, limit, w = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
  local now, virtual = clock(ARGV[4])
  local need = permits > 0 and permits or 1
  if need > limit then need = limit + 1 end
  local total = redis.call('ZCOUNT', key, now - w + 1, '+inf') -- scores are whole µs
  local last = nil -- the newest entry's time
  if total > 0 then
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    last = tonumber(newest[2])
    if last >= BLOCK_SCORE then -- a block
      local u = zblock_of(newest)
      if now < u then return {0, BLOCKED, u - now, u - now} end
      redis.call('ZREM', key, newest[1]) -- ended: as if it had never been
      return decide(KEYS, ARGV)
    end
  end
  if total + need > limit then
    -- when the (total + need - limit)-th oldest in the window leaves it (the newest when
    -- there are fewer)
    local k, t = total + need - limit, last or 0
    if k <= total then
      t = tonumber(redis.call('ZRANGEBYSCORE', key, now - w + 1, '+inf', 'WITHSCORES', 'LIMIT',
                              k - 1, 1)[2])
    end
    local reset = 0
    if total > 0 then reset = (last - now) + w end
    return {0, limit - total, reset, (t - now) + w}
  end
  if permits == 0 or permits > limit then
    if total > 0 then return {1, limit - total, (last - now) + w} end
    return {1, limit, 0}
  end
  -- a clock that stepped back logs at the newest time, as the C ring merges runs
  local t = now
  if last and last > now then t = last end
  local top = redis.call('INCRBY', seq, need)
  if need == 1 then
    redis.call('ZADD', key, t, top)
  else
    zadd_range(key, t, top - need + 1, top)
  end
  if not last or math.floor(t / w) ~= math.floor(last / w) then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now - w) -- they have left the window
    local ms = px((t - t % w) + 2 * w - now, virtual)
    redis.call('PEXPIRE', key, ms)
    redis.call('PEXPIRE', seq, ms)
  end
  if t == now then return limit - total - need end -- reset: the window
  return {1, limit - total - need, (t - now) + w}
end

local exact = decide

local function bands(KEYS, ARGV)
  return run_bands(band, KEYS, ARGV)
end

-- permits entries logged at now, up to 2 * limit in the window; the keys expire as an
-- admission's do.
local function penalize(KEYS, ARGV)
  return run_penalize(function(key, seq, limit, w, b, permits, now, virtual)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now - w) -- they have left the window
    local total = redis.call('ZCOUNT', key, '-inf', BELOW_BLOCK)
    local n = 2 * limit - total
    if permits < n then n = permits end
    if n <= 0 then return end
    local t = now -- a clock that stepped back logs at the newest time
    local newest = redis.call('ZREVRANGEBYSCORE', key, BELOW_BLOCK, '-inf', 'WITHSCORES',
                              'LIMIT', 0, 1)
    if newest[2] and tonumber(newest[2]) > now then t = tonumber(newest[2]) end
    local top = redis.call('INCRBY', seq, n)
    zadd_range(key, t, top - n + 1, top)
    local ms = px((t - t % w) + 2 * w - now, virtual)
    for _, k in ipairs({key, seq}) do
      if redis.call('PTTL', k) < ms then redis.call('PEXPIRE', k, ms) end
    end
  end, KEYS, ARGV)
end

local block = block_zset
