-- SPDX-License-Identifier: MIT
-- sluice gcra: the generic cell rate algorithm with redis-cell's CL.THROTTLE semantics, the emission interval exact (mirrors src/algorithm.c).
--
-- EVALSHA sha 1 state_key op limit window_us burst anchor permits reserve_us now_us
--   [bands shadow_bands (limit window_us burst)...], with 1 key per band: run_bands (prelude.lua)
--   op: "acquire" | "release" (release does nothing here and answers as a peek)
--   permits: 0 = peek at one permit; now_us: "" = Redis TIME, else a test/replay override
-- Reply: {allowed, limit, remaining, retry_after_us, reset_after_us, wait_us, leased,
-- shadow_denied}, µs.
-- State (string, PX = ceil(reset/1000) + 1 ms): the theoretical arrival time as a
-- span (µs and 1/d-ths of a µs) and d (= limit when written), packed (pack_state
-- 'B<d<d<d'); a state of the previous layout (the time in decimal µs) is read as such.
-- Emission interval T = window / limit, delay variation tolerance = burst * T.
-- anchor and reserve_us are unused.

-- idiv, px, now_us, sizing, zadd_range, pack_state, unpack_state and the span
-- helpers come from prelude.lua, prepended at build time

local function band(key, seq, l, w, burst, permits, reserve, now, commit)
  local capacity = burst
  local need, consume = sizing(permits, capacity)
  if not commit then consume = false end

  local tq = idiv(w, l)
  local tr = w - tq * l
  local dvq, dvr = times_t(l, tq, tr, burst)
  -- times relative to now: ttl = tat - now (at least 0), new_ttl = ttl + need * T
  local ttq, ttr = 0, 0
  local stored = redis.call('GET', key)
  if stored then
    local aq, ar, d
    if string.find(stored, '^%d+$') then
      aq, ar, d = tonumber(stored), 0, l
    else
      aq, ar, d = unpack_state('B<d<d<d', stored)
    end
    aq, ar = stored_time(l, aq, ar, d)
    if not span_le(aq, ar, now, 0) then ttq, ttr = span_sub(l, aq, ar, now, 0) end
  end
  local nq, nr = span_add(l, ttq, ttr, times_t(l, tq, tr, need))

  local allowed = span_le(nq, nr, dvq, dvr) -- now >= allow_at = new_tat - DVT
  if allowed and consume then
    ttq, ttr = nq, nr -- > 0
    redis.call('SET', key, pack_state('B<d<d<d', now + nq, nr, l), 'PX', px(span_ceil(nq, nr)))
  end
  local remaining = 0
  if not span_le(dvq, dvr, ttq, ttr) then
    remaining = per_t(l, w, span_sub(l, dvq, dvr, ttq, ttr))
  end
  local retry = allowed and -1 or span_ceil(span_sub(l, nq, nr, dvq, dvr))
  if permits > capacity then allowed, retry = false, -1 end
  return {allowed and 1 or 0, capacity, remaining, retry, span_ceil(ttq, ttr), 0, 0}
end

return run_bands(band)
