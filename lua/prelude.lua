-- SPDX-License-Identifier: MIT
-- sluice: the helpers every script of lua/ shares; cmake/embed_lua.cmake puts this
-- file in front of each script (Redis scripts cannot load modules).

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

-- the PX of a key whose state is back to full capacity after `us` (> 0) µs, as a
-- number (redis.call writes an integer below 2^53 in plain digits). Under
-- a time override (tests, `sluice replay`) the times are virtual and unrelated to
-- the real time in which keys expire, so a key lives at least an hour: long enough
-- not to vanish while virtual time still needs it, short enough to go if a replay
-- dies before it deletes its keys.
local function px(us)
  local ms = idiv(us + 999, 1000) + 1
  if ARGV[8] ~= nil and ARGV[8] ~= '' and ms < 3600000 then ms = 3600000 end
  return ms
end

-- The state of fixed_window, sliding_window and token_bucket: a format byte, then
-- little-endian doubles (exact below 2^53; packing costs Redis less than formatting
-- and matching decimals). fmt is 'B<d<d' or 'B<d<d<d'.
local STATE_FORMAT = 1
local function pack_state(fmt, ...)
  return struct.pack(fmt, STATE_FORMAT, ...)
end

-- The doubles of a packed state. A value in any other format (another sluice
-- version's, or not sluice's) fails the script instead of being misread.
local function unpack_state(fmt, stored)
  if #stored ~= struct.size(fmt) or string.byte(stored, 1) ~= STATE_FORMAT then
    error({err = 'ERR sluice: ' .. KEYS[1] .. ' holds a value sluice did not write in this format'})
  end
  return select(2, struct.unpack(fmt, stored))
end

local function now_us()
  if ARGV[8] == nil or ARGV[8] == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return tonumber(ARGV[8])
end

-- The permits a call is sized at: `need` (1 for a peek, capacity + 1 past the
-- capacity, which is denied whatever the state) and whether it may consume.
local function sizing(permits, capacity)
  local need = permits > 0 and permits or 1
  if need > capacity then need = capacity + 1 end
  return need, permits > 0 and permits <= capacity
end

-- ZADDs the members first..top (decimal sequence numbers), all at score, in
-- batches of 1000 so that no call gets too many arguments.
local function zadd_range(key, score, first, top)
  local i = first
  while i <= top do
    local args = {}
    local n = 0
    while i <= top and n < 1000 do
      args[#args + 1] = score
      args[#args + 1] = string.format('%d', i)
      i = i + 1
      n = n + 1
    end
    redis.call('ZADD', key, unpack(args))
  end
end

-- Exact rates, for token_bucket and gcra (src/algorithm.c computes the same): the
-- emission interval T = W / L is exact, a time or duration is a span (q, r): q
-- whole µs plus r/L µs, 0 <= r < L. Every number stays below 2^53; a product that
-- may not is split.
local TWO53 = 9007199254740992
-- the longest a token_bucket caller may reserve ahead: 18250 days (algorithm.h)
local MAX_RESERVE_US = 18250 * 86400 * 1000000

-- floor(a * b / d) and a * b mod d, for 0 <= a, b < 2^53 and 0 < d < 2^52 whose
-- quotient is below 2^53.
local function muldivmod(a, b, d)
  local p = a * b
  if p < TWO53 then -- exact: p / d is off by at most one
    local q = math.floor(p / d)
    local r = p - q * d
    if r < 0 then return q - 1, r + d elseif r >= d then return q + 1, r - d end
    return q, r
  end
  local qa = math.floor(a / d)
  local ra = a - qa * d
  if ra < 0 then qa, ra = qa - 1, ra + d elseif ra >= d then qa, ra = qa + 1, ra - d end
  -- a * b = qa * b * d + ra * b; ra * b by doubling over the bits of b, reducing mod d
  local q, r, rest, bit = 0, 0, b, 1
  while bit * 2 <= rest do bit = bit * 2 end
  while bit >= 1 do
    q, r = q * 2, r * 2
    if r >= d then q, r = q + 1, r - d end
    if rest >= bit then
      rest = rest - bit
      r = r + ra
      if r >= d then q, r = q + 1, r - d end
    end
    bit = bit / 2
  end
  return qa * b + q, r
end

local function span_add(l, aq, ar, bq, br)
  local r = ar + br
  if r >= l then return aq + bq + 1, r - l end
  return aq + bq, r
end

local function span_sub(l, aq, ar, bq, br)
  local r = ar - br
  if r < 0 then return aq - bq - 1, r + l end
  return aq - bq, r
end

local function span_le(aq, ar, bq, br)
  return aq < bq or (aq == bq and ar <= br)
end

-- the span rounded up to whole µs
local function span_ceil(q, r)
  if r > 0 then return q + 1 end
  return q
end

-- k * T for k >= 0, T = tq + tr / l
local function times_t(l, tq, tr, k)
  local q, r = muldivmod(k, tr, l)
  return k * tq + q, r
end

-- floor(x / T) = floor((xq * l + xr) / w) for x >= 0 (the caller bounds it)
local function per_t(l, w, xq, xr)
  local q, rest = muldivmod(xq, l, w)
  return q + idiv(rest + xr, w)
end

-- a time stored as (q, r) in 1/d-ths of a µs, in 1/l-ths: when the limit changed
-- since (a reload), rounded up to the next whole µs, never earlier
local function stored_time(l, q, r, d)
  if d ~= l then
    if r > 0 then return q + 1, 0 end
    return q, 0
  end
  return q, r
end

-- The driver of every algorithm but concurrency: `band(key, seq, limit, w, burst,
-- permits, reserve, now, commit)` decides one band and returns its reply
-- {allowed, limit, remaining, retry, reset, wait, leased}; commit false decides
-- as if the call consumed and writes nothing. A rule with bands passes ARGV[9]
-- bands and ARGV[10] shadow bands, then limit, window_us and burst of each, and
-- the keys of band i (the rule's own is band 1): KEYS[2i - 1], KEYS[2i] (its state
-- and its seq key) for sliding_log, KEYS[i] (its state) for the algorithms that need
-- no seq key, whose `band` gets nil for it (a call names no key it does not use: on a
-- Cluster a slot half migrated fails a call only when its keys are split). Every band is
-- decided without writing, then, when every enforced band admits, each takes the
-- permits (a shadow band only when it admits too). The reply reports the enforced
-- band with the fewest remaining (the first on a tie), the latest retry (-1 when
-- one can never pass) and reset, and 8th the bands that refused, bit i - 1 for band
-- i: denied, the enforced bands that refused; admitted, the shadow bands that would
-- have (so an admitted call with any bit set is shadow_denied).
local function run_bands(band)
  local permits = tonumber(ARGV[6])
  local reserve = tonumber(ARGV[7])
  if ARGV[1] == 'release' then permits, reserve = 0, 0 end
  local now = now_us()
  local enforced = 1 + tonumber(ARGV[9] or '0')
  local n = enforced + tonumber(ARGV[10] or '0')
  local per = #KEYS / n -- keys per band: 2 with a seq key, else 1
  local function keys_of(i)
    if per == 2 then return KEYS[2 * i - 1], KEYS[2 * i] end
    return KEYS[i], nil
  end
  if n == 1 then
    local k, s = keys_of(1)
    local r = band(k, s, tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]),
                   permits, reserve, now, true)
    r[8] = 0
    return r
  end
  local function spec(i)
    local k, s = keys_of(i)
    if i == 1 then
      return k, s, tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
    end
    local a = 10 + 3 * (i - 2)
    return k, s, tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  end
  local each, all = {}, true
  for i = 1, n do
    local k, s, l, w, b = spec(i)
    each[i] = band(k, s, l, w, b, permits, 0, now, false)
    if i <= enforced and each[i][1] == 0 then all = false end
  end
  if permits > 0 and all then
    for i = 1, n do
      if i <= enforced or each[i][1] == 1 then
        local k, s, l, w, b = spec(i)
        each[i] = band(k, s, l, w, b, permits, 0, now, true)
      end
    end
  end
  local tight, retry, reset, never, shadow = 1, -1, 0, false, 0
  for i = 1, enforced do
    local r = each[i]
    if r[3] < each[tight][3] then tight = i end
    if r[5] > reset then reset = r[5] end
    if r[1] == 0 and r[4] < 0 then
      never = true
    elseif r[1] == 0 and r[4] > retry then
      retry = r[4]
    end
  end
  local first, last, bit = 1, enforced, 1
  if all then first, last = enforced + 1, n end
  for i = 1, last do
    if i >= first and each[i][1] == 0 then shadow = shadow + bit end
    bit = bit * 2
  end
  if all or never then retry = -1 end
  return {all and 1 or 0, each[tight][2], each[tight][3], retry, reset, 0, 0, shadow}
end
