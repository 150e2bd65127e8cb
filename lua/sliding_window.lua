-- SPDX-License-Identifier: MIT
-- sluice sliding_window: the previous window weighted by its overlap + the current one + permits <= limit, O(1) (mirrors src/algorithm.c).
--
-- EVALSHA sha 1 state_key op limit window_us burst anchor permits reserve_us now_us
--   [bands shadow_bands (limit window_us burst)...], with 1 key per band: run_bands (prelude.lua)
--   op: "acquire" | "release" (release does nothing here and answers as a peek)
--   permits: 0 = peek at one permit; now_us: "" = Redis TIME, else a test/replay override
-- Reply: {allowed, limit, remaining, retry_after_us, reset_after_us, wait_us, leased,
-- shadow_denied}, µs.
-- State (string, PX = ceil(reset/1000) + 1 ms): start, current and previous, packed
-- (pack_state 'B<d<d<d'), windows aligned to multiples of window_us. limit * window_ms < 2^52
-- keeps every product exact.

-- idiv, px, now_us, sizing, zadd_range, pack_state and unpack_state come from
-- prelude.lua, prepended at build time

local function band(key, seq, limit, w, burst, permits, reserve, now, commit)
  local capacity = limit
  local need, consume = sizing(permits, capacity)
  if not commit then consume = false end

  local w_ms = idiv(w, 1000)
  local r = now - idiv(now, w) * w -- C's now % w
  if r < 0 then r = r + w end
  local start = now - r
  local cur, prev = 0, 0
  local stored = redis.call('GET', key)
  if stored then
    local a, b, c = unpack_state('B<d<d<d', stored)
    if start == a then
      cur, prev = b, c
    elseif start == a + w then
      prev = b
    elseif start < a then -- a clock that stepped back
      start, cur, prev = a, b, c
    end
  end
  local e_ms = idiv(now - start, 1000)
  if e_ms > w_ms - 1 then e_ms = w_ms - 1 end
  local weight = w_ms - e_ms -- the previous window's share, in w_ms parts

  -- cur + need <= limit first: it keeps (cur + need) * w_ms under 2^53
  local allowed = cur + need <= limit and prev * weight + (cur + need) * w_ms <= limit * w_ms
  if allowed and consume then
    cur = cur + need
    -- reset after an admission is (start - now) + 2w > 0
    redis.call('SET', key, pack_state('B<d<d<d', start, cur, prev), 'PX', px((start - now) + 2 * w))
  end
  local remaining = idiv(limit * w_ms - prev * weight - cur * w_ms, w_ms)
  if remaining < 0 then remaining = 0 end
  local reset = 0
  if cur > 0 then reset = (start - now) + 2 * w elseif prev > 0 then reset = (start - now) + w end
  local retry = -1
  if not allowed then
    local done = false
    -- later in this window, once the previous window's share has shrunk enough
    if cur + need <= limit and prev > 0 then
      local e_due = w_ms - idiv((limit - cur - need) * w_ms, prev)
      if e_due < w_ms then
        retry = (start - now) + e_due * 1000
        done = true
      end
    end
    -- else in the next window, where this window becomes the previous one
    if not done then
      local e_next = 0
      if cur > 0 then
        e_next = w_ms - idiv((limit - need) * w_ms, cur)
        if e_next < 0 then e_next = 0 end
      end
      retry = (start - now) + w + e_next * 1000
    end
  end
  if permits > capacity then allowed, retry = false, -1 end
  return {allowed and 1 or 0, capacity, remaining, retry, reset, 0, 0}
end

return run_bands(band)
