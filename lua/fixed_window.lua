-- SPDX-License-Identifier: MIT
-- sluice fixed_window: count + permits <= limit in a window of window_us that starts at its first admitted hit, or at a multiple of window_us since the epoch (mirrors src/algorithm.c).
--
-- EVALSHA sha 1 state_key op limit window_us burst anchor permits reserve_us now_us
--   [bands shadow_bands (limit window_us burst)...], with 1 key per band: run_bands (prelude.lua)
--   op: "acquire" | "release" (release does nothing here and answers as a peek)
--   anchor: "1" = epoch (a new window starts at the last multiple of window_us of now)
--   permits: 0 = peek at one permit; now_us: "" = Redis TIME, else a test/replay override
-- Reply: {allowed, limit, remaining, retry_after_us, reset_after_us, wait_us, leased,
-- shadow_denied}, µs.
-- State (string, PX = ceil(reset/1000) + 1 ms): start and count, packed (pack_state
-- 'B<d<d').

-- idiv, px, now_us, sizing, zadd_range, pack_state and unpack_state come from
-- prelude.lua, prepended at build time

local function band(key, seq, limit, w, burst, permits, reserve, now, commit)
  local capacity = limit
  local need, consume = sizing(permits, capacity)
  if not commit then consume = false end

  local start, count = now, 0
  if ARGV[5] == '1' then
    local phase = now - idiv(now, w) * w -- C's now % w
    if phase < 0 then phase = phase + w end
    start = now - phase
  end
  local stored = redis.call('GET', key)
  if stored then
    local a, b = unpack_state('B<d<d', stored)
    if now < a + w then start, count = a, b end
  end

  local allowed = count + need <= limit
  if allowed and consume then
    count = count + need
    -- reset after an admission is (start - now) + w > 0
    redis.call('SET', key, pack_state('B<d<d', start, count), 'PX', px((start - now) + w))
  end
  local remaining = limit - count
  -- differences first: every intermediate stays a small exact integer
  local reset = count > 0 and (start - now) + w or 0
  local retry = allowed and -1 or (start - now) + w
  if permits > capacity then allowed, retry = false, -1 end
  return {allowed and 1 or 0, capacity, remaining, retry, reset, 0, 0}
end

return run_bands(band)
