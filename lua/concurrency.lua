-- SPDX-License-Identifier: MIT
-- sluice concurrency: fewer than limit calls in flight, each a lease that expires after window_us if never given back (mirrors src/algorithm.c).
--
-- EVALSHA sha 2 state_key seq_key op limit window_us burst anchor permits reserve_us now_us
--   op: "acquire" takes `permits` leases (0 = peek at one); "release" drops the
--   expired leases, gives back `permits` leases oldest first, and answers as a peek
--   now_us: "" = Redis TIME, else a test/replay override
-- Reply: {allowed, limit, remaining, retry_after_us, reset_after_us, wait_us, leased, 0}, µs;
-- leased = the permits taken (to be released).
-- State: a ZSET with one member per lease in flight, score = its expiry, member = a
-- number from the seq_key counter; both keys get PX = ceil(reset/1000) + 1 ms and
-- are deleted when no lease is left after a release.

-- idiv, px, now_us, sizing, zadd_range, pack_state and unpack_state come from
-- prelude.lua, prepended at build time

local key, seq = KEYS[1], KEYS[2]
local limit = tonumber(ARGV[2])
local w = tonumber(ARGV[3])
local permits = tonumber(ARGV[6])
local now = now_us()
local now_s = string.format('%d', now)

local function newest_score()
  local r = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  return r[2] and tonumber(r[2]) or nil
end

if ARGV[1] == 'release' then
  if permits > 0 and redis.call('EXISTS', key) == 1 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now_s) -- leases expired at or before now
    redis.call('ZREMRANGEBYRANK', key, 0, string.format('%d', permits - 1)) -- oldest first
    local newest = newest_score()
    if newest then
      local ttl = px(newest - now)
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

local live = '(' .. now_s -- leases expiring after now
local total = redis.call('ZCOUNT', key, live, '+inf')

-- the expiry of the k-th live lease, oldest first (the newest when there are fewer)
local function time_of(k)
  local r = redis.call('ZRANGEBYSCORE', key, live, '+inf', 'WITHSCORES', 'LIMIT',
                       string.format('%d', k - 1), 1)
  if r[2] then return tonumber(r[2]) end
  return newest_score() or 0
end

local allowed = total + need <= limit
local retry = -1
if not allowed then retry = time_of(total + need - limit) - now end
local leased = 0
local newest = nil
if allowed and consume then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now_s)
  -- a clock that stepped back: the lease joins the newest one, as the C ring merges runs
  local expiry = now + w
  local last = newest_score()
  if last and last > expiry then expiry = last end
  local top = redis.call('INCRBY', seq, string.format('%d', need))
  local score = string.format('%d', expiry)
  zadd_range(key, score, top - need + 1, top)
  total = total + need
  leased = need
  newest = expiry
  local ttl = px(newest - now)
  redis.call('PEXPIRE', key, ttl)
  redis.call('PEXPIRE', seq, ttl)
end
local remaining = limit - total
local reset = 0
if total > 0 then
  newest = newest or newest_score()
  reset = newest - now
end
if permits > capacity then allowed, retry = false, -1 end
return {allowed and 1 or 0, capacity, remaining, retry, reset, 0, leased, 0}
