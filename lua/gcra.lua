-- sluice gcra: the generic cell rate algorithm with redis-cell's CL.THROTTLE semantics, to the microsecond (mirrors src/algorithm.c).
--
-- EVALSHA sha 2 state_key seq_key op limit window_us burst interval_us permits reserve_us now_us
--   op: "acquire" | "release" (release does nothing here and answers as a peek)
--   permits: 0 = peek at one permit; now_us: "" = Redis TIME, else a test/replay override
-- Reply: {allowed, limit, remaining, retry_after_us, reset_after_us, wait_us, leased}, µs.
-- State (string, PX = ceil(reset/1000) + 1 ms): the theoretical arrival time.
-- Emission interval T = interval_us, delay variation tolerance = burst * T.
-- seq_key is unused.

-- C's a / b for b > 0 (truncates toward zero), exact in doubles for |a| < 2^53
local function idiv(a, b)
  local neg = a < 0
  if neg then a = -a end
  local q = math.floor(a / b)
  local r = a - q * b
  if r < 0 then q = q - 1 elseif r >= b then q = q + 1 end
  if neg then return -q end
  return q
end

-- the PX of a key whose state is back to full capacity after `us` (> 0) µs
local function px(us)
  return string.format('%d', idiv(us + 999, 1000) + 1)
end

local function now_us()
  if ARGV[8] == nil or ARGV[8] == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return tonumber(ARGV[8])
end

local key = KEYS[1]
local burst = tonumber(ARGV[4])
local t = tonumber(ARGV[5])
local permits = tonumber(ARGV[6])
if ARGV[1] == 'release' then permits = 0 end
local now = now_us()

local capacity = burst
local need = permits > 0 and permits or 1
local consume = permits > 0 and permits <= capacity
if need > capacity then need = capacity + 1 end

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
