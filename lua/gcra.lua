-- SPDX-License-Identifier: MIT
-- gcra: the generic cell rate algorithm with redis-cell's CL.THROTTLE semantics, the emission interval exact (mirrors src/algorithm.c).
--
-- Emission interval T = window / limit, delay variation tolerance DVT = burst * T.
-- decide (T a whole number of µs and (burst + 1) * T <= 2^52, which the client
--   checks): ARGV inc (permits * T for a call that takes permits, else 0), DVT, now_us
--   (absent: Redis TIME). Every number is a whole µs below 2^53. A call that takes
--   permits is admitted, and written, when tat - now + inc <= DVT. Replies tat - now
--   as read (at least 0), one integer, from which the client works out the rest
--   (src/redis/script.c); a block as exact's.
--   State: the theoretical arrival time and a time until which the key lives at
--   least (0: not known, under a virtual clock), in whole µs, packed ('B<d<d'); the
--   tat alone ('B<d', an older layout) is read as such. While the key outlives the
--   new tat, the tat is written in place (SETRANGE), else the state with SET and a
--   PX KEEP_US past the tat (prelude.lua).
-- exact (any rule): ARGV permits, limit, window_us, burst, now_us (absent: Redis TIME).
--   Times and durations are spans (prelude.lua).
--   State: the theoretical arrival time as a span (µs and 1/d-ths of a µs) and d
--   (= limit when written), packed ('B<d<d<d'); a time in decimal µs (an older
--   layout) is read as such.
-- bands: run_bands (prelude.lua); each band's state as exact's.
-- Each path reads the other's state (a time past a whole µs rounded up to the next).
-- exact's PX = ceil(reset / 1000) + 1 ms. A denial carries tat - now, as a span (exact: its
-- µs and 1/limit-ths; decide: its µs): the client ages it exactly.

-- The theoretical arrival time a state holds at now, as a span in 1/l-ths of a µs
-- (l nil: in whole µs, a fraction rounded up; now for a warm-up's state, which is
-- none here); and the end of its block, when one holds at now (then the time is nil).
local function tat_of(key, stored, l, now)
  local n = #stored
  if n == 17 or n == 9 then
    local f, tat = struct.unpack('B<d', stored)
    if f == STATE_FORMAT then return tat, 0 end
  elseif n == 25 then
    local f, aq, ar, d = struct.unpack('B<d<d<d', stored)
    if f == STATE_FORMAT then return stored_time(l or 0, aq, ar, d) end
  end
  if string.find(stored, '^%d+$') then return tonumber(stored), 0 end
  if string.byte(stored, 1) == WARM_FORMAT then return now, 0 end -- a warm-up's: none
  local u, rest = block_of(stored)
  if not u then bad_state(key) end
  if now < u then return nil, 0, u end
  if not rest then return now, 0 end
  return tat_of(key, rest, l, now)
end


local function band(key, seq, l, w, burst, permits, reserve, now, virtual, commit)
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
    local aq, ar, u = tat_of(key, stored, l, now)
    if u then return blocked_band(capacity, u, now) end
    if not span_le(aq, ar, now, 0) then ttq, ttr = span_sub(l, aq, ar, now, 0) end
  end
  local nq, nr = span_add(l, ttq, ttr, times_t(l, tq, tr, need))

  local allowed = span_le(nq, nr, dvq, dvr) -- now >= allow_at = new_tat - DVT
  if allowed and consume then
    ttq, ttr = nq, nr -- > 0
    redis.call('SET', key, struct.pack('B<d<d<d', STATE_FORMAT, now + nq, nr, l), 'PX',
               px(span_ceil(nq, nr), virtual))
  end
  local remaining = 0
  if not span_le(dvq, dvr, ttq, ttr) then
    remaining = per_t(l, w, span_sub(l, dvq, dvr, ttq, ttr))
  end
  local retry = allowed and -1 or span_ceil(span_sub(l, nq, nr, dvq, dvr))
  if permits > capacity then allowed, retry = false, -1 end
  return {allowed and 1 or 0, capacity, remaining, retry, span_ceil(ttq, ttr), 0, 0, ttq, ttr}
end

local function exact(KEYS, ARGV)
  local now, virtual = clock(ARGV[5])
  return compact(band(KEYS[1], nil, tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]),
                      tonumber(ARGV[1]), 0, now, virtual, true), 8)
end

-- Inline, as the common path of every script: a Lua function call costs Redis as
-- much as the arithmetic, and a table reply more than the rest of the decision.
local function decide(KEYS, ARGV)
  local key = KEYS[1]
  local inc, dvt = known[ARGV[1]] or learn(ARGV[1]), known[ARGV[2]] or learn(ARGV[2])
  local now, virtual = clock(ARGV[3])
  local ttl, lives = 0, 0
  local stored = redis.call('GET', key)
  if stored then
    local f, tat, u
    if #stored == 17 then
      f, tat, lives = struct.unpack('B<d<d', stored)
    end
    if f ~= STATE_FORMAT then
      tat, f, u = tat_of(key, stored, nil, now)
      lives = 0 -- not known
      if u then return {0, BLOCKED, u - now, u - now} end
    end
    if tat > now then ttl = tat - now end
  end
  local new = ttl + inc
  if inc > 0 and new <= dvt then
    if now + new <= lives then -- the key outlives the new tat as it is
      redis.call('SETRANGE', key, '1', struct.pack('<d', now + new))
    else
      local ms = (new + KEEP_US + 999) / 1000
      ms = ms - ms % 1 + 1
      lives = now + (ms - 1) * 1000
      if virtual then ms, lives = ms < 3600000 and 3600000 or ms, 0 end
      redis.call('SET', key, struct.pack('B<d<d', STATE_FORMAT, now + new, lives), 'PX', ms)
    end
  end
  return ttl
end

local function bands(KEYS, ARGV)
  return run_bands(band, KEYS, ARGV)
end

-- warmup: a rule with a warm-up, the same for token_bucket and gcra (prelude.lua)
local warmup = warm_up

-- The tat moves to max(tat, now) + permits * T, at most now + 2 * DVT.
local function penalize(KEYS, ARGV)
  return run_penalize(function(key, seq, l, w, burst, permits, now, virtual)
    if permits > 2 * burst then permits = 2 * burst end
    local tq = idiv(w, l)
    local tr = w - tq * l
    local dvq, dvr = times_t(l, tq, tr, burst)
    local u, rest = unblock(redis.call('GET', key))
    local aq, ar = now, 0
    if rest then aq, ar = tat_of(key, rest, l, now) end
    if span_le(aq, ar, now, 0) then aq, ar = now, 0 end
    local mq, mr = span_add(l, now, 0, span_add(l, dvq, dvr, dvq, dvr))
    local nq, nr = span_add(l, aq, ar, times_t(l, tq, tr, permits))
    if span_le(mq, mr, nq, nr) then
      if span_le(aq, ar, mq, mr) then nq, nr = mq, mr else nq, nr = aq, ar end
    end
    put_state(key, struct.pack('B<d<d<d', STATE_FORMAT, nq, nr, l),
              px(span_ceil(span_sub(l, nq, nr, now, 0)), virtual), u, now, virtual)
  end, KEYS, ARGV)
end

local function block(KEYS, ARGV)
  return block_string(KEYS, ARGV, function(key, rest) return rest end)
end
