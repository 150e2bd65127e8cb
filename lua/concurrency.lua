-- SPDX-License-Identifier: MIT
-- concurrency: fewer than limit calls in flight, each a lease that expires after window_us if never given back (mirrors src/algorithm.c).
--
-- decide (= exact): KEYS state, seq; ARGV op, permits, limit, window_us, now_us
--   (absent: Redis TIME)
--   op "acquire" takes `permits` leases (0 = peek at one); "release" drops the
--   expired leases, gives back `permits` leases oldest first, and answers as a peek.
--   Admitted replies carry leased = the permits taken (to be released).
-- State: a ZSET with one member per lease in flight, score = its expiry, member = a
-- number from the seq key's counter; both keys get PX = ceil(reset/1000) + 1 ms and
-- are deleted when no lease is left after a release. Denials are not cached (a release frees leases
-- early): nothing to age.

-- The newest lease's expiry and whether key holds a block that has not ended (its
-- end), with what the log holds counted: total members, of which the block is one.
-- A block that has ended is removed. ZRANGE of the top members: the block, if any,
-- is the top one (BLOCK_SCORE), the newest lease below it.
local function top_of(key, total, now)
  if total == 0 then return nil, nil, 0 end
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local u = zblock_of(top)
  if not u then return tonumber(top[2]), nil, total end
  if now >= u then
    redis.call('ZREM', key, top[1]) -- ended: as if it had never been
    u = nil
  end
  local leases = total - 1
  if leases == 0 then return nil, u, 0 end
  return tonumber(redis.call('ZRANGE', key, -2, -2, 'WITHSCORES')[2]), u, leases
end

local function decide(KEYS, ARGV)
  local key, seq = KEYS[1], KEYS[2]
  local permits, limit, w = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  local now, virtual = clock(ARGV[5])

  redis.call('ZREMRANGEBYSCORE', key, '-inf', now) -- leases expired at or before now
  local newest, u, total = top_of(key, redis.call('ZCARD', key), now)
  if ARGV[1] == 'release' then
    -- gives back `permits` leases, oldest first, and answers as a peek
    local n = permits
    if n > total then n = total end
    if n > 0 then
      redis.call('ZREMRANGEBYRANK', key, 0, n - 1)
      total = total - n
      if total == 0 then newest = nil
      else newest = tonumber(redis.call('ZRANGEBYSCORE', key, '-inf', BELOW_BLOCK,
                                        'WITHSCORES', 'LIMIT', total - 1, 1)[2]) end
      local ms = nil
      if newest then ms = px(newest - now, virtual) end
      if u then
        local b = px(u - now, virtual)
        if not ms or b > ms then ms = b end
      end
      if ms then
        redis.call('PEXPIRE', key, ms)
        redis.call('PEXPIRE', seq, ms)
      else
        redis.call('DEL', key, seq)
      end
    end
    permits = 0
  end
  if u then return {0, BLOCKED, u - now, u - now} end

  local capacity = limit
  local need, consume = sizing(permits, capacity)
  local allowed = total + need <= limit
  local retry = -1
  if not allowed then
    -- when the (total + need - limit)-th oldest lease expires (the newest when fewer)
    local k = total + need - limit
    local t = newest or 0
    if k <= total then
      t = tonumber(redis.call('ZRANGE', key, k - 1, k - 1, 'WITHSCORES')[2])
    end
    retry = t - now
  end
  local leased = 0
  if allowed and consume then
    -- a clock that stepped back: the lease joins the newest one, as the C ring merges runs
    local expiry = now + w
    if newest and newest > expiry then expiry = newest end
    local top = redis.call('INCRBY', seq, need)
    zadd_range(key, expiry, top - need + 1, top)
    total = total + need
    leased = need
    newest = expiry
    local ttl = px(newest - now, virtual)
    redis.call('PEXPIRE', key, ttl)
    redis.call('PEXPIRE', seq, ttl)
  end
  local remaining = limit - total
  local reset = 0
  if total > 0 then reset = newest - now end
  if permits > capacity then allowed, retry = false, -1 end
  return compact({allowed and 1 or 0, capacity, remaining, retry, reset, 0, leased}, 8)
end

local exact = decide

-- concurrency has no bands (the keyfile refuses them)
local bands = decide

-- the client refuses a penalty: it counts calls in flight, and a penalty holds none
local function penalize()
  error({err = 'ERR sluice: concurrency takes no penalty'})
end

local block = block_zset
