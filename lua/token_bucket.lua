-- sluice token_bucket: a bucket of burst tokens refilled one per interval_us, with reservations for waiting callers (mirrors src/algorithm.c).
--
-- EVALSHA sha 2 state_key seq_key op limit window_us burst interval_us permits reserve_us now_us
--   op: "acquire" | "release" (release does nothing here and answers as a peek)
--   permits: 0 = peek at one permit; reserve_us > 0: a caller that would be denied
--   takes its tokens now when they are due within reserve_us (wait_us = when due);
--   now_us: "" = Redis TIME, else a test/replay override
-- Reply: {allowed, limit, remaining, retry_after_us, reset_after_us, wait_us, leased}, µs.
-- State (string, PX = ceil(reset/1000) + 1 ms): tokens and last_refill, packed
-- (pack_state 'B<d<d'); tokens may be below 0 while reservations are pending.
-- seq_key is unused.

-- idiv, px, now_us, sizing, zadd_range, pack_state and unpack_state come from
-- prelude.lua, prepended at build time

local key = KEYS[1]
local burst = tonumber(ARGV[4])
local t = tonumber(ARGV[5])
local permits = tonumber(ARGV[6])
local reserve = tonumber(ARGV[7])
if ARGV[1] == 'release' then permits, reserve = 0, 0 end
local now = now_us()

local capacity = burst
local need, consume = sizing(permits, capacity)
if permits > capacity then reserve = 0 end

local tokens, last = burst, now
local stored = redis.call('GET', key)
if stored then
  tokens, last = unpack_state('B<d<d', stored)
  if tokens < burst and now > last then
    local gained = idiv(now - last, t)
    tokens = tokens + gained
    last = last + gained * t
  end
  if tokens >= burst then
    tokens, last = burst, now
  end
end

-- times relative to now (differences first): every intermediate stays exact
local due_in = (last - now) + (need - tokens) * t
local allowed = tokens >= need
local wait = 0
if not allowed and consume and reserve > 0 and due_in <= reserve then
  allowed = true -- a reservation: the tokens are the caller's, due later
  wait = due_in
end
if allowed and consume then
  tokens = tokens - need
  -- reset after an admission is (last - now) + (burst - tokens) * t > 0
  redis.call('SET', key, pack_state('B<d<d', tokens, last), 'PX',
             px((last - now) + (burst - tokens) * t))
end
local remaining = tokens > 0 and tokens or 0
local reset = 0
if tokens < burst then reset = (last - now) + (burst - tokens) * t end
local retry = allowed and -1 or due_in
if permits > capacity then allowed, retry = false, -1 end
return {allowed and 1 or 0, capacity, remaining, retry, reset, wait, 0}
