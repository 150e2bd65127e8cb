-- SPDX-License-Identifier: MIT
-- sliding_window: the previous window weighted by its overlap + the current one + permits <= limit, O(1) (mirrors src/algorithm.c).
--
-- decide (= exact: no fractions): ARGV permits, limit, window_us, now_us (absent:
--   Redis TIME). limit * window_ms < 2^52 (the keyfile's bound) keeps every product
--   exact. Admitted, it replies current (after), previous and now - start, packed
--   ('<d<d<d': a string reply costs Redis less than a table), from which the client
--   works out remaining and reset (src/redis/script.c); else as exact.
-- bands: run_bands (prelude.lua).
-- State (string, PX = ceil(reset/1000) + 1 ms): start, current and previous, packed
-- ('B<d<d<d'), windows aligned to multiples of window_us. decide writes the first
-- state of a window with PX, and then only the count, in place (SETRANGE, which
-- costs Redis less than a SET with KEEPTTL): the key keeps the expiry the window's
-- first write gave it, the end of the next window.
-- A denial carries current, previous and now - start: the client ages it exactly.

-- The windows a value holds at now: the current one's start (now's, or a later one's
-- after a clock that stepped back), its count and the previous one's; and the end of
-- its block, when one holds at now.
local function windows_in(key, stored, now, w)
  local start = now - now % w -- Lua's %: 0 <= now % w < w
  if not stored then return start, 0, 0 end
  if #stored ~= 25 then
    local u, rest = block_of(stored)
    if not u then bad_state(key) end
    if now < u then return start, 0, 0, u end
    return windows_in(key, rest, now, w)
  end
  local f, a, b, c = struct.unpack('B<d<d<d', stored)
  if f ~= STATE_FORMAT then bad_state(key) end
  if start == a then return start, b, c end
  if start == a + w then return start, 0, b end
  if start < a then return a, b, c end -- a clock that stepped back
  return start, 0, 0
end

local function windows_of(key, now, w)
  return windows_in(key, redis.call('GET', key), now, w)
end

-- The decision on the windows start, cur and prev (windows_of's).
local function decide_on(key, limit, w, permits, now, virtual, commit, start, cur, prev)
  local capacity = limit
  local need, consume = sizing(permits, capacity)
  if not commit then consume = false end

  local w_ms = w / 1000 -- a whole number: windows are whole ms
  local e_ms = idiv(now - start, 1000) -- < 0 after a clock that stepped back
  if e_ms > w_ms - 1 then e_ms = w_ms - 1 end
  local weight = w_ms - e_ms -- the previous window's share, in w_ms parts

  -- cur + need <= limit first: it keeps (cur + need) * w_ms under 2^53
  local allowed = cur + need <= limit and prev * weight + (cur + need) * w_ms <= limit * w_ms
  if allowed and consume then
    cur = cur + need
    -- reset after an admission is (start - now) + 2w > 0
    redis.call('SET', key, struct.pack('B<d<d<d', STATE_FORMAT, start, cur, prev), 'PX',
               px((start - now) + 2 * w, virtual))
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
      local e_due = w_ms - fdiv((limit - cur - need) * w_ms, prev)
      if e_due < w_ms then
        retry = (start - now) + e_due * 1000
        done = true
      end
    end
    -- else in the next window, where this window becomes the previous one
    if not done then
      local e_next = 0
      if cur > 0 then
        e_next = w_ms - fdiv((limit - need) * w_ms, cur)
        if e_next < 0 then e_next = 0 end
      end
      retry = (start - now) + w + e_next * 1000
    end
  end
  if permits > capacity then allowed, retry = false, -1 end
  return {allowed and 1 or 0, capacity, remaining, retry, reset, 0, 0, cur, prev, now - start}
end

local function band(key, seq, limit, w, burst, permits, reserve, now, virtual, commit)
  local start, cur, prev, u = windows_of(key, now, w)
  if u then return blocked_band(limit, u, now) end
  return decide_on(key, limit, w, permits, now, virtual, commit, start, cur, prev)
end

local function exact(KEYS, ARGV)
  local now, virtual = clock(ARGV[4])
  return compact(band(KEYS[1], nil, tonumber(ARGV[2]), tonumber(ARGV[3]), 0, tonumber(ARGV[1]),
                      0, now, virtual, true), 8)
end

-- An admission inline, as the common path of every script (a Lua function call costs
-- Redis as much as the arithmetic); a denial, or a clock that stepped back, as band.
local function decide(KEYS, ARGV)
  local key = KEYS[1]
  local permits, limit = known[ARGV[1]] or learn(ARGV[1]), known[ARGV[2]] or learn(ARGV[2])
  local w = known[ARGV[3]] or learn(ARGV[3])
  local now, virtual = clock(ARGV[4])
  local start, cur, prev = now - now % w, 0, 0
  local same = false -- the state of this window: its key expires when this window's would
  local stored = redis.call('GET', key)
  if stored then
    local f, a, b, c, u
    if #stored == 25 then f, a, b, c = struct.unpack('B<d<d<d', stored) end
    if f == STATE_FORMAT and a == start then
      cur, prev, same = b, c, true
    elseif f == STATE_FORMAT and a + w == start then
      prev = b
    else
      start, cur, prev, u = windows_in(key, stored, now, w)
      if u then return {0, BLOCKED, u - now, u - now} end
    end
  end
  local w_ms = w / 1000 -- whole: windows are whole ms
  local e_ms = (now - start) / 1000
  local weight = w_ms - (e_ms - e_ms % 1) -- the previous window's share
  local need = permits > 0 and permits or 1
  if start > now or need > limit or cur + need > limit or
     prev * weight + (cur + need) * w_ms > limit * w_ms then
    return compact(decide_on(key, limit, w, permits, now, virtual, true, start, cur, prev), 8)
  end
  if permits > 0 and same then -- the count alone, in place: the key keeps its expiry
    cur = cur + need
    redis.call('SETRANGE', key, '9', struct.pack('<d', cur))
  elseif permits > 0 then
    cur = cur + need
    local ms = (start - now + 2 * w + 999) / 1000
    ms = ms - ms % 1 + 1
    if virtual and ms < 3600000 then ms = 3600000 end
    redis.call('SET', key, struct.pack('B<d<d<d', STATE_FORMAT, start, cur, prev), 'PX', ms)
  end
  return struct.pack('<d<d<d', cur, prev, now - start)
end

local function bands(KEYS, ARGV)
  return run_bands(band, KEYS, ARGV)
end

-- The current window counts permits more, up to 2 * limit.
local function penalize(KEYS, ARGV)
  return run_penalize(function(key, seq, limit, w, b, permits, now, virtual)
    local u, rest = unblock(redis.call('GET', key))
    local start, cur, prev = windows_in(key, rest, now, w)
    local after = cur + permits
    if after > 2 * limit then after = 2 * limit end
    if after > cur then cur = after end
    put_state(key, struct.pack('B<d<d<d', STATE_FORMAT, start, cur, prev),
              px((start - now) + 2 * w, virtual), u, now, virtual)
  end, KEYS, ARGV)
end

local function block(KEYS, ARGV)
  return block_string(KEYS, ARGV, function(key, rest) return rest end)
end
