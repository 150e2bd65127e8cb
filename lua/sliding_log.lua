-- SPDX-License-Identifier: MIT
-- sliding_log: admitted permits in (now - window_us, now] + permits <= limit, exact (mirrors src/algorithm.c).
--
-- decide (= exact): KEYS state; ARGV permits, limit, window_us, now_us (absent: Redis
-- TIME). An admission logged at now replies remaining alone (an integer: a table
-- reply costs Redis more than the rest of the decision), its reset being the window.
-- bands: run_bands (prelude.lua), a key a band.
-- State: a ZSET with one member per admitted permit, score = its time (µs), member =
-- 't', the time as 8 bytes big-endian and, past the first entry logged at that time,
-- its number there as 4 bytes more (member_at): unique, and in the order of the
-- time and the number, so the newest entry, which every path reads, says which
-- number the next at its time takes. Members of an older layout (decimal numbers of
-- a :seq key, never equal to these, and before these at the same time) are entries
-- like any other. The key gets PX = ceil(reset/1000) + 1 ms. Entries at or before
-- now - window are removed first (the decision is the same with or without them).
-- Memory grows with limit.
-- A denial keeps its remaining until its retry: a lower bound, as entries leave
-- the window meanwhile (docs/algorithms.md).

local MEMBER = 116 -- 't': the first byte of a member, after every decimal digit

-- The member of the k-th entry (0: the first) logged at t.
local function member_at(t, k)
  if k == 0 then return struct.pack('>BL', MEMBER, t) end
  return struct.pack('>BLI4', MEMBER, t, k)
end

-- Logs n entries at t in key, whose newest entry was {member, score} (nil: none): the
-- numbers at t go on from the newest's when it was logged at t.
local function log_at(key, t, n, newest)
  local k = 0
  if newest and newest[2] + 0 == t then
    local m = newest[1]
    if #m == 9 and m == member_at(t, 0) then
      k = 1
    elseif #m == 13 then
      local tag, at, j = struct.unpack('>BLI4', m)
      if tag == MEMBER and at == t then k = j + 1 end
    end
  end
  if n == 1 then return redis.call('ZADD', key, t, member_at(t, k)) end
  local last = k + n - 1
  while k <= last do -- batches of 1000, so that no call gets too many arguments
    local args, c = {}, 0
    while k <= last and c < 2000 do
      args[c + 1], args[c + 2] = t, member_at(t, k)
      c, k = c + 2, k + 1
    end
    redis.call('ZADD', key, unpack(args, 1, c))
  end
end

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
    log_at(key, t, need, newest)
    total = total + need
    last = t
    redis.call('PEXPIRE', key, px((t - now) + w, virtual))
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
-- The text of the window's exclusive lower bound's seconds, '(' and now's seconds less
-- the window's, for a window of whole seconds: it changes once a second. A bound
-- Redis formats from a number costs it a float's formatting (%.17g).
local since_sec, since_w, since_text = nil, 0, nil

local decide
decide = function(KEYS, ARGV)
  local key = KEYS[1]
  local permits, limit = known[ARGV[1]] or learn(ARGV[1]), known[ARGV[2]] or learn(ARGV[2])
  local w = known[ARGV[3]] or learn(ARGV[3])
  local now, virtual, sec, us = clock(ARGV[4])
  local need = permits > 0 and permits or 1
  if need > limit then need = limit + 1 end
  local since -- the window's exclusive lower bound, as text: (now - w
  if sec and w % 1000000 == 0 and w / 1000000 < sec + 0 then
    if sec ~= since_sec or w ~= since_w then
      since_sec, since_w, since_text = sec, w, '(' .. string.format('%d', sec - w / 1000000)
    end
    since = since_text .. ZEROS[#us] .. us
  else
    since = string.format('(%d', now - w)
  end
  local total = redis.call('ZCOUNT', key, since, '+inf')
  local last, newest = nil, nil -- the newest entry's time, and {member, score}
  if total > 0 then
    -- its time from its member (WITHSCORES would cost Redis a float's formatting),
    -- or for a member of another layout (an older one's, a block's) its score
    newest = redis.call('ZRANGE', key, '-1', '-1')
    local m, tag = newest[1], nil
    if #m >= 9 then tag, last = struct.unpack('>BL', m) end
    if tag == MEMBER then
      newest[2] = last
    else
      newest[2] = redis.call('ZSCORE', key, m)
      last = newest[2] + 0
      if last >= BLOCK_SCORE then -- a block
        local u = zblock_of(newest)
        if now < u then return {0, BLOCKED, u - now, u - now} end
        redis.call('ZREM', key, m) -- ended: as if it had never been
        return decide(KEYS, ARGV)
      end
    end
  end
  if total + need > limit then
    -- when the (total + need - limit)-th oldest in the window leaves it (the newest when
    -- there are fewer)
    local k, t = total + need - limit, last or 0
    if k <= total then
      t = tonumber(redis.call('ZRANGEBYSCORE', key, since, '+inf', 'WITHSCORES', 'LIMIT', k - 1,
                              1)[2])
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
  if need == 1 and (not last or last < t) then -- the first entry at t (= now)
    local score = t
    if sec then score = sec .. ZEROS[#us] .. us end
    redis.call('ZADD', key, score, struct.pack('>BL', MEMBER, t))
  else
    log_at(key, t, need, newest)
  end
  if not last or t - t % w ~= last - last % w then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now - w) -- they have left the window
    redis.call('PEXPIRE', key, px((t - t % w) + 2 * w - now, virtual))
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
    log_at(key, t, n, newest[2] and newest or nil)
    local ms = px((t - t % w) + 2 * w - now, virtual)
    if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
  end, KEYS, ARGV)
end

local block = block_zset
