-- SPDX-License-Identifier: MIT
-- sluice token_bucket: a bucket of burst tokens refilled one per window / limit (exact), with reservations for waiting callers (mirrors src/algorithm.c).
--
-- EVALSHA sha 1 state_key op limit window_us burst anchor permits reserve_us now_us
--   [bands shadow_bands (limit window_us burst)...], with 1 key per band: run_bands (prelude.lua)
--   op: "acquire" | "release" (release does nothing here and answers as a peek)
--   permits: 0 = peek at one permit; reserve_us > 0: a caller that would be denied
--   takes its tokens now when they are due within reserve_us (wait_us = when due);
--   now_us: "" = Redis TIME, else a test/replay override; anchor is unused
-- Reply: {allowed, limit, remaining, retry_after_us, reset_after_us, wait_us, leased,
-- shadow_denied}, µs.
-- State (string, PX = ceil(reset/1000) + 1 ms): tokens, the last refill as a span
-- (µs and 1/d-ths of a µs) and d (= limit when written), packed (pack_state
-- 'B<d<d<d<d'); tokens may be below 0 while reservations are pending. A state of
-- the previous layout ('B<d<d': tokens, last in whole µs) is read as such.

-- idiv, px, now_us, sizing, zadd_range, pack_state, unpack_state and the span
-- helpers come from prelude.lua, prepended at build time

local function band(key, seq, l, w, burst, permits, reserve, now, commit)
  if reserve > MAX_RESERVE_US then reserve = MAX_RESERVE_US end
  local capacity = burst
  local need, consume = sizing(permits, capacity)
  if not commit then consume = false end
  if permits > capacity then reserve = 0 end

  local tq = idiv(w, l)
  local tr = w - tq * l
  local tokens, lq, lr = burst, now, 0
  local stored = redis.call('GET', key)
  if stored then
    local d
    if #stored == struct.size('B<d<d') then
      tokens, lq = unpack_state('B<d<d', stored)
      lr, d = 0, l
    else
      tokens, lq, lr, d = unpack_state('B<d<d<d<d', stored)
    end
    lq, lr = stored_time(l, lq, lr, d)
    if tokens < burst and not span_le(now, 0, lq, lr) then
      local eq, er = span_sub(l, now, 0, lq, lr)
      local fq, fr = times_t(l, tq, tr, burst - tokens)
      if span_le(fq, fr, eq, er) then
        tokens = burst
      else
        local gained = per_t(l, w, eq, er)
        tokens = tokens + gained
        lq, lr = span_add(l, lq, lr, times_t(l, tq, tr, gained))
      end
    end
    if tokens >= burst then
      tokens, lq, lr = burst, now, 0
    end
  end

  -- when the need - tokens missing tokens are due, from now (differences first)
  local dq, dr = 0, 0
  if tokens < need then
    local aq, ar = span_sub(l, lq, lr, now, 0)
    dq, dr = span_add(l, aq, ar, times_t(l, tq, tr, need - tokens))
  end
  local due_in = span_ceil(dq, dr)
  local allowed = tokens >= need
  local wait = 0
  if not allowed and consume and reserve > 0 and due_in <= reserve then
    allowed = true -- a reservation: the tokens are the caller's, due later
    wait = due_in
  end
  local reset = 0
  local function reset_of()
    local aq, ar = span_sub(l, lq, lr, now, 0)
    return span_ceil(span_add(l, aq, ar, times_t(l, tq, tr, burst - tokens)))
  end
  if allowed and consume then
    tokens = tokens - need
    -- reset after an admission is > 0
    redis.call('SET', key, pack_state('B<d<d<d<d', tokens, lq, lr, l), 'PX', px(reset_of()))
  end
  local remaining = tokens > 0 and tokens or 0
  if tokens < burst then reset = reset_of() end
  local retry = allowed and -1 or due_in
  if permits > capacity then allowed, retry = false, -1 end
  return {allowed and 1 or 0, capacity, remaining, retry, reset, wait, 0}
end

return run_bands(band)
