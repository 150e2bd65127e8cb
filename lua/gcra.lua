-- sluice gcra: the generic cell rate algorithm with redis-cell's CL.THROTTLE semantics, to the microsecond (mirrors src/algorithm.c).
--
-- EVALSHA sha 2 state_key seq_key op limit window_us burst interval_us permits reserve_us now_us
--   op: "acquire" | "release" (release does nothing here and answers as a peek)
--   permits: 0 = peek at one permit; now_us: "" = Redis TIME, else a test/replay override
-- Reply: {allowed, limit, remaining, retry_after_us, reset_after_us, wait_us, leased}, µs.
-- State (string, PX = ceil(reset/1000) + 1 ms): the theoretical arrival time.
-- Emission interval T = interval_us, delay variation tolerance = burst * T.
-- seq_key is unused.

-- idiv, px, now_us, sizing, zadd_range, pack_state and unpack_state come from
-- prelude.lua, prepended at build time

local key = KEYS[1]
local burst = tonumber(ARGV[4])
local t = tonumber(ARGV[5])
local permits = tonumber(ARGV[6])
if ARGV[1] == 'release' then permits = 0 end
local now = now_us()

local capacity = burst
local need, consume = sizing(permits, capacity)

local dvt = burst * t
local tat = now
local stored = redis.call('GET', key)
if stored then
  local s = tonumber(stored)
  if s > now then tat = s end
end
-- times relative to now: new_tat - now, allow_at - now
local ttl = tat - now
local new_ttl = ttl + need * t
local allow_in = new_ttl - dvt

local allowed = allow_in <= 0
if allowed and consume then
  ttl = new_ttl -- > 0
  redis.call('SET', key, string.format('%d', now + new_ttl), 'PX', px(ttl))
end
local next = dvt - ttl
local remaining = next > 0 and idiv(next, t) or 0
local retry = allowed and -1 or allow_in
if permits > capacity then allowed, retry = false, -1 end
return {allowed and 1 or 0, capacity, remaining, retry, ttl, 0, 0}
