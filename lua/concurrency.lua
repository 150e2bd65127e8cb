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

local function newest_of(key)
  local r = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if r[2] then return tonumber(r[2]) end
  return nil
end

local function decide(KEYS, ARGV)
  local key, seq = KEYS[1], KEYS[2]
  local permits, limit, w = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  local now, virtual = clock(ARGV[5])

  if ARGV[1] == 'release' then
    if permits > 0 and redis.call('EXISTS', key) == 1 then
      redis.call('ZREMRANGEBYSCORE', key, '-inf', now) -- leases expired at or before now
      redis.call('ZREMRANGEBYRANK', key, 0, permits - 1) -- oldest first
      local newest = newest_of(key)
      if newest then
        local ttl = px(newest - now, virtual)
        redis.call('PEXPIRE', key, ttl)
        redis.call('PEXPIRE', seq, ttl)
      else
        redis.call('DEL', key, seq)
      end
    end
    permits = 0 -- and answer as a peek
  end

  local capacity = limit
  local need, consume = sizing(permits, capacity)

  redis.call('ZREMRANGEBYSCORE', key, '-inf', now) -- leases expired at or before now
  local total = redis.call('ZCARD', key)
  local newest = nil
  if total > 0 then newest = newest_of(key) end
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
