-- SPDX-License-Identifier: MIT
-- sluice sliding_log: admitted permits in (now - window_us, now] + permits <= limit, exact (mirrors src/algorithm.c).
--
-- EVALSHA sha 2 state_key seq_key op limit window_us burst anchor permits reserve_us now_us
--   [bands shadow_bands (limit window_us burst)...], with 2 keys per band: run_bands (prelude.lua)
--   op: "acquire" | "release" (release does nothing here and answers as a peek)
--   permits: 0 = peek at one permit; now_us: "" = Redis TIME, else a test/replay override
-- Reply: {allowed, limit, remaining, retry_after_us, reset_after_us, wait_us, leased,
-- shadow_denied}, µs.
-- State: a ZSET with one member per admitted permit, score = its time, member = a
-- number from the seq_key counter (unique even when permits share a microsecond);
-- both keys get PX = ceil(reset/1000) + 1 ms. Memory grows with limit.

-- idiv, px, now_us, sizing, zadd_range, pack_state and unpack_state come from
-- prelude.lua, prepended at build time

local function band(key, seq, limit, w, burst, permits, reserve, now, commit)
  local capacity = limit
  local need, consume = sizing(permits, capacity)
  if not commit then consume = false end

  local since = '(' .. string.format('%d', now - w) -- entries at or before now - w have left
  local total = redis.call('ZCOUNT', key, since, '+inf')

  -- the time of the k-th counted permit, oldest first (the newest when there are fewer)
  local function time_of(k)
    local r = redis.call('ZRANGEBYSCORE', key, since, '+inf', 'WITHSCORES', 'LIMIT',
                         string.format('%d', k - 1), 1)
    if r[2] then return tonumber(r[2]) end
    r = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    return r[2] and tonumber(r[2]) or 0
  end

  local allowed = total + need <= limit
  local retry = -1
  if not allowed then retry = (time_of(total + need - limit) - now) + w end
  local newest = nil
  if allowed and consume then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - w))
    -- a clock that stepped back logs at the newest time, as the C ring merges runs
    local t = now
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    if last[2] and tonumber(last[2]) > t then t = tonumber(last[2]) end
    local top = redis.call('INCRBY', seq, string.format('%d', need))
    local first = top - need + 1
    local score = string.format('%d', t)
    zadd_range(key, score, first, top)
    total = total + need
    newest = t
    local ttl = px((newest - now) + w)
    redis.call('PEXPIRE', key, ttl)
    redis.call('PEXPIRE', seq, ttl)
  end
  local remaining = limit - total
  local reset = 0
  if total > 0 then
    if not newest then
      newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    end
    reset = (newest - now) + w
  end
  if permits > capacity then allowed, retry = false, -1 end
  return {allowed and 1 or 0, capacity, remaining, retry, reset, 0, 0}
end

return run_bands(band)
