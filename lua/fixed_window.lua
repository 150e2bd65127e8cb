-- SPDX-License-Identifier: MIT
-- sluice fixed_window: count + permits <= limit in a window of window_us that starts at its first admitted hit, or at a multiple of window_us since the epoch (mirrors src/algorithm.c).
--
-- decide (anchor = first_hit, Redis time, 0 < permits <= limit): ARGV permits, limit,
--   window_ms.
--   State: the count in decimal (INCRBY), the window in the key's TTL: the window
--   starts when the key is made and ends when it expires, so a decision needs no
--   TIME and no GET. A denied call gives back what INCRBY took (DECRBY). Admitted,
--   it replies the count and the window's ms left, packed ('<d<d': a string reply
--   costs Redis less than a table); denied, as exact.
-- exact (anchor = epoch, or a virtual clock): ARGV permits, limit, window_us, anchor
--   (1 = epoch: a window starts at the last multiple of window_us of now), now_us
--   (absent: Redis TIME).
--   State: start and count, packed ('B<d<d'), PX = ceil(reset / 1000) + 1 ms.
-- bands: run_bands (prelude.lua); each band's state as exact's.
-- Each path reads the other's state: a count is a window that ends with the key.
-- A denial stays as it is until its retry: nothing to age it with.

-- The window a state holds at now: start and count (0, 0 when none holds); and the
-- end of its block, when one holds at now (then start and count are nil).
local function window_of(key, stored, now, w)
  if #stored == 17 then
    local f, start, count = struct.unpack('B<d<d', stored)
    if f ~= STATE_FORMAT then bad_state(key) end
    if now < start + w then return start, count end
    return 0, 0
  end
  local count = tonumber(stored)
  if not count or string.find(stored, '[^0-9]') then
    local u, rest = block_of(stored)
    if not u then bad_state(key) end
    if now < u then return nil, nil, u end
    if not rest then return 0, 0 end
    return window_of(key, rest, now, w) -- packed: a block keeps no count in the TTL
  end
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then return 0, 0 end
  return now + ttl * 1000 - w, count
end

local function band(key, seq, limit, w, burst, permits, reserve, now, virtual, commit, epoch)
  local capacity = limit
  local need, consume = sizing(permits, capacity)
  if not commit then consume = false end

  local start, count = now, 0
  if epoch then
    local phase = now - idiv(now, w) * w -- C's now % w
    if phase < 0 then phase = phase + w end
    start = now - phase
  end
  local stored = redis.call('GET', key)
  if stored then
    local a, b, u = window_of(key, stored, now, w)
    if u then return blocked_band(capacity, u, now) end
    if b > 0 then start, count = a, b end
  end

  local allowed = count + need <= limit
  if allowed and consume then
    count = count + need
    -- reset after an admission is (start - now) + w > 0
    redis.call('SET', key, struct.pack('B<d<d', STATE_FORMAT, start, count), 'PX',
               px((start - now) + w, virtual))
  end
  local remaining = limit - count
  -- differences first: every intermediate stays a small exact integer
  local reset = count > 0 and (start - now) + w or 0
  local retry = allowed and -1 or (start - now) + w
  if permits > capacity then allowed, retry = false, -1 end
  return {allowed and 1 or 0, capacity, remaining, retry, reset, 0, 0}
end

local function exact(KEYS, ARGV)
  local now, virtual = clock(ARGV[5])
  return compact(band(KEYS[1], nil, tonumber(ARGV[2]), tonumber(ARGV[3]), 0, tonumber(ARGV[1]), 0,
                      now, virtual, true, ARGV[4] == '1'), 8)
end

-- decide on a state that is not a count (another layout's): as exact does
local function decide_on_packed(KEYS, ARGV)
  return exact(KEYS, {ARGV[1], ARGV[2], ARGV[3] * 1000, '0'})
end

local function decide(KEYS, ARGV)
  local key = KEYS[1]
  local count = redis.pcall('INCRBY', key, ARGV[1])
  if type(count) == 'table' then return decide_on_packed(KEYS, ARGV) end
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then -- a new window, or a count without one (not sluice's): one from now
    redis.call('PEXPIRE', key, ARGV[3])
    ttl = tonumber(ARGV[3])
  end
  if count <= tonumber(ARGV[2]) then return struct.pack('<d<d', count, ttl) end
  redis.call('DECRBY', key, ARGV[1])
  count = count - ARGV[1]
  return {0, ARGV[2] - count, ttl * 1000, ttl * 1000}
end

local function bands(KEYS, ARGV)
  local epoch = ARGV[3] == '1'
  return run_bands(function(key, seq, l, w, b, permits, reserve, now, virtual, commit)
    return band(key, seq, l, w, b, permits, reserve, now, virtual, commit, epoch)
  end, KEYS, ARGV)
end

-- The window running at now (a new one starts, as an admission would start it)
-- counts permits more, up to 2 * limit.
local function penalize(KEYS, ARGV)
  return run_penalize(function(key, seq, limit, w, b, permits, now, virtual, epoch)
    local start, count = now, 0
    if epoch then
      local phase = now - idiv(now, w) * w
      if phase < 0 then phase = phase + w end
      start = now - phase
    end
    local u, rest = unblock(redis.call('GET', key))
    if rest then
      local a, c = window_of(key, rest, now, w)
      if c > 0 then start, count = a, c end
    end
    local after = count + permits
    if after > 2 * limit then after = 2 * limit end
    if after > count then count = after end
    put_state(key, struct.pack('B<d<d', STATE_FORMAT, start, count), px((start - now) + w, virtual),
              u, now, virtual)
  end, KEYS, ARGV)
end

-- A count's window is its key's TTL, which a block lengthens: packed, it says its end.
local function block(KEYS, ARGV)
  return block_string(KEYS, ARGV, function(key, rest, now, w, ttl)
    if #rest == 17 then return rest end
    if ttl < 0 then return nil end
    return struct.pack('B<d<d', STATE_FORMAT, now + ttl * 1000 - w, tonumber(rest))
  end)
end
