-- SPDX-License-Identifier: MIT
-- token_bucket: a bucket of burst tokens refilled one per window / limit (exact), with reservations for waiting callers (mirrors src/algorithm.c).
--
-- T = window / limit. reserve_us > 0: a caller that would be denied takes its tokens
-- now when they are due within reserve_us (wait = when due).
-- decide (T a whole number of µs and (burst + 1) * T <= 2^52, which the client
--   checks): ARGV inc (need * T; negated for a call that takes nothing: a peek, or
--   more than the burst), T, burst * T, now_us ('' or absent: Redis TIME), lim
--   (absent: inc). Every number is a whole µs or a count below 2^53. The bucket read
--   is r = tokens * T + now - last refill (at most burst * T); a call that takes
--   permits is admitted, and written, when r >= lim (lim = inc - reserve_us when it
--   may reserve). Replies r, one integer, from which the client works out the rest
--   (src/redis/script.c); a block, or a clock that stepped back, as exact's.
--   State: tokens, the last refill and a time until which the key lives at least
--   (0: not known, under a virtual clock), in whole µs, packed ('B<d<d<d'); tokens
--   and the last refill alone ('B<d<d', an older layout) are read as such. While the
--   key outlives the bucket's refill to full, tokens and refill are written in place
--   (SETRANGE), else the state with SET and a PX KEEP_US past the refill (prelude.lua).
-- exact (any rule): ARGV permits, limit, window_us, burst, reserve_us, now_us (absent:
--   Redis TIME). Times and durations are spans (prelude.lua).
--   State: tokens, the last refill as a span (µs and 1/d-ths of a µs) and d (= limit
--   when written), packed ('B<d<d<d<d').
-- bands: run_bands (prelude.lua); each band's state as exact's.
-- Each path reads the other's state (a time past a whole µs rounded up to the next).
-- tokens may be below 0 while reservations are pending. exact's PX = ceil(reset/1000)
-- + 1 ms.
-- A denial carries tokens and now - last refill, as a span (exact: its µs and
-- 1/limit-ths; decide: its µs): the client ages it exactly.

-- tokens and the last refill a state holds, the time as a span in 1/l-ths of a µs
-- (l nil: in whole µs, a fraction rounded up); nil for none (a block that has
-- ended, with no state behind it, or a warm-up's state); and the end of its block,
-- when one holds at now.
local function bucket_of(key, stored, l, now)
  local n = #stored
  if n == 25 or n == 17 then
    local f, tokens, last = struct.unpack('B<d<d', stored)
    if f == STATE_FORMAT then return tokens, last, 0 end
  elseif n == 33 then
    local f, tokens, lq, lr, d = struct.unpack('B<d<d<d<d', stored)
    if f == STATE_FORMAT then return tokens, stored_time(l or 0, lq, lr, d) end
  end
  if string.byte(stored, 1) == WARM_FORMAT then return nil end -- a warm-up's: none
  local u, rest = block_of(stored)
  if not u then bad_state(key) end
  if now < u then return nil, nil, nil, u end
  if not rest then return nil end
  return bucket_of(key, rest, l, now)
end

-- The tokens at now of a bucket that holds tokens at lq, lr (l, tq, tr: the rate),
-- refilled: tokens and the time of the last refill.
local function refill(l, w, tq, tr, burst, now, tokens, lq, lr)
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
  if tokens >= burst then return burst, now, 0 end
  return tokens, lq, lr
end

local function band(key, seq, l, w, burst, permits, reserve, now, virtual, commit)
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
    local t, q, r, u = bucket_of(key, stored, l, now)
    if u then return blocked_band(capacity, u, now) end
    if t then tokens, lq, lr = refill(l, w, tq, tr, burst, now, t, q, r) end
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
    redis.call('SET', key, struct.pack('B<d<d<d<d', STATE_FORMAT, tokens, lq, lr, l), 'PX',
               px(reset_of(), virtual))
  end
  local remaining = tokens > 0 and tokens or 0
  if tokens < burst then reset = reset_of() end
  local retry = allowed and -1 or due_in
  if permits > capacity then allowed, retry = false, -1 end
  local eq, er = span_sub(l, now, 0, lq, lr)
  return {allowed and 1 or 0, capacity, remaining, retry, reset, wait, 0, tokens, eq, er}
end

local function exact(KEYS, ARGV)
  local now, virtual = clock(ARGV[6])
  return compact(band(KEYS[1], nil, tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]),
                      tonumber(ARGV[1]), tonumber(ARGV[5]), now, virtual, true), 8)
end

-- Inline, as the common path of every script: a Lua function call costs Redis as
-- much as the arithmetic, and a table reply more than the rest of the decision. The
-- bucket is read as r = tokens * T + (now - last refill), refilled: min(r, burst * T).
local function decide(KEYS, ARGV)
  local key = KEYS[1]
  local inc, t = known[ARGV[1]] or learn(ARGV[1]), known[ARGV[2]] or learn(ARGV[2])
  local top = known[ARGV[3]] or learn(ARGV[3])
  local now, virtual = clock(ARGV[4])
  local r, lives = top, 0
  local stored = redis.call('GET', key)
  if stored then
    local f, tokens, last, u
    if #stored == 25 then
      f, tokens, last, lives = struct.unpack('B<d<d<d', stored)
    end
    if f ~= STATE_FORMAT then
      tokens, last, f, u = bucket_of(key, stored, nil, now)
      lives = 0 -- not known
      if u then return {0, BLOCKED, u - now, u - now} end
    end
    if tokens and now < last then -- a clock that stepped back: the exact path decides
      local need = inc > 0 and inc or -inc
      local permits = need / t
      if inc < 0 and need == t then permits = 0 end -- a peek
      local reserve = 0
      if ARGV[5] then reserve = inc - tonumber(ARGV[5]) end
      return compact(band(key, nil, 1, t, top / t, permits, reserve, now, virtual, true), 8)
    end
    if tokens then
      r = tokens * t + (now - last)
      if r > top then r = top end
    end
  end
  local lim = inc
  if ARGV[5] then lim = known[ARGV[5]] or learn(ARGV[5]) end
  if inc > 0 and r >= lim then
    local left = r - inc
    local tokens = left / t
    tokens = tokens - tokens % 1 -- floor
    if tokens * t > left then tokens = tokens - 1 end
    local last = now - (left - tokens * t)
    if now + (top - left) <= lives then -- the key outlives the refill as it is
      redis.call('SETRANGE', key, '1', struct.pack('<d<d', tokens, last))
    else
      local ms = (top - left + KEEP_US + 999) / 1000
      ms = ms - ms % 1 + 1
      lives = now + (ms - 1) * 1000
      if virtual then ms, lives = ms < 3600000 and 3600000 or ms, 0 end
      redis.call('SET', key, struct.pack('B<d<d<d', STATE_FORMAT, tokens, last, lives), 'PX', ms)
    end
  end
  return r
end

local function bands(KEYS, ARGV)
  return run_bands(band, KEYS, ARGV)
end

-- warmup: a rule with a warm-up, the same for token_bucket and gcra (prelude.lua)
local warmup = warm_up

-- The tokens, refilled to now, drop by permits, down to -burst.
local function penalize(KEYS, ARGV)
  return run_penalize(function(key, seq, l, w, burst, permits, now, virtual)
    local tq = idiv(w, l)
    local tr = w - tq * l
    local u, rest = unblock(redis.call('GET', key))
    local tokens, lq, lr = burst, now, 0
    if rest then
      local t, q, r = bucket_of(key, rest, l, now)
      if t then tokens, lq, lr = refill(l, w, tq, tr, burst, now, t, q, r) end
    end
    local after = tokens - permits
    if after < -burst then after = -burst end
    if after < tokens then tokens = after end
    local aq, ar = span_sub(l, lq, lr, now, 0)
    local reset = span_ceil(span_add(l, aq, ar, times_t(l, tq, tr, burst - tokens)))
    put_state(key, struct.pack('B<d<d<d<d', STATE_FORMAT, tokens, lq, lr, l), px(reset, virtual), u,
              now, virtual)
  end, KEYS, ARGV)
end

local function block(KEYS, ARGV)
  return block_string(KEYS, ARGV, function(key, rest) return rest end)
end
