-- SPDX-License-Identifier: MIT
-- sluice: what every script of lua/ shares. cmake/embed_lua.cmake puts this file in
-- front of the scripts (Redis scripts cannot load modules): once in the Redis 7
-- Function library that holds them all, and in front of each EVALSHA script.
--
-- Each algorithm's file defines three entries, each called as ENTRY(KEYS, ARGV):
--   decide  the common path: the rule's constants worked out by the client, plain
--           arithmetic exact in doubles (the client picks it when the rule allows)
--   exact   the same decision on any rule: token_bucket and gcra split every time
--           and duration into whole µs and 1/L-ths of a µs (the others have no
--           fractions: their exact is their decide)
--   bands   a rule with bands: every band decided, all or nothing (run_bands)
-- and token_bucket and gcra a fourth, which answers alike for both:
--   warmup  a rule with a warm-up (warm_up, below)
-- The library registers them as sluice_HASH_ALGORITHM_ENTRY; for EVALSHA, the
-- script of an entry is this file, the algorithm's, and `return ENTRY(KEYS, ARGV)`.
--
-- Replies (integers, times in µs):
--   decide, exact: admitted {1, remaining, reset_after}, or {1, remaining,
--   reset_after, wait, leased} when either is not 0; denied {0, remaining,
--   reset_after, retry_after, ...} and what the client needs to age the denial (per
--   algorithm, at most 3 numbers; docs/algorithms.md). retry_after is what the state
--   says: the client answers -1 for more permits than the capacity, which no state
--   admits. The limit is the rule's capacity, which the client knows.
--   bands: {allowed, limit, remaining, retry_after, reset_after, wait, leased,
--   refused} (run_bands says what refused is): 8 numbers, which no other reply has.
--   The common path answers in less where it can (each algorithm's file says how):
--   an integer, or a string of packed doubles, from which the client works out the
--   fields (src/redis/script.c). Redis turns a table into a reply at about the cost
--   of a command; an integer or a string costs it next to nothing.
--
-- A state key that holds a value sluice did not write in a layout the script reads
-- fails the call (bad_state) instead of being misread.
--
-- Two more entries keep a key's policy with its state (src/policy.c):
--   penalize  takes permits as admitted now, up to twice the capacity in use in each
--             band (docs/algorithms.md); KEYS and ARGV as bands'. Replies {1, 0, 0}.
--   block     ARGV duration_us (0: lifts the block), window_us, now_us (absent:
--             Redis TIME); KEYS state [, seq]. Replies {1, 0, 0}.
-- A block lives in front of a string state ('B<d': BLOCK_FORMAT, until, then the
-- state's own bytes, or none), which no common path reads as a state: it falls to
-- the path that reads other layouts, which sees the block; a ZSET state holds it as
-- a member scored BLOCK_SCORE, above every time, which the common path reads as the
-- newest entry. A blocked call is denied with remaining BLOCKED (the client reads
-- blocked) and retry and reset until the block ends; once it has ended the state
-- is read as if the block had never been, and the next write drops it.

local STATE_FORMAT = 1 -- the first byte of every packed state
local BLOCK_FORMAT = 2 -- the first byte of a block in front of a state
local WARM_FORMAT = 3 -- the first byte of a warm-up's state (warm_up, below)
local BLOCKED = -9007199254740992 -- the remaining of a blocked reply: -2^53
local BLOCK_SCORE = 9007199254740992 -- a ZSET's block member: 2^53, above every time
local BELOW_BLOCK = '(9007199254740992' -- every score of a time, as a ZRANGEBYSCORE bound

local function bad_state(key)
  error({err = 'ERR sluice: ' .. key .. ' holds a value sluice did not write in this format'})
end

-- What the common paths spare Redis. A call of a C function from a script (tonumber,
-- math.floor, string.byte) costs Redis about 1000 instructions, reading digits
-- (strtod) 500, a table lookup or arithmetic 100; so the common paths read a number
-- by arithmetic ('123' + 0), floor by `x - x % 1`, and remember what repeats. In a
-- Function library these locals live as long as the library; in an EVALSHA script,
-- for the call.
-- The numbers of argument texts seen: a rule passes the same few call after call.
local known, n_known = {}, 0
-- The number `text` (decimal) says, remembered in `known` (up to 256 texts).
local function learn(text)
  if n_known >= 256 then known, n_known = {}, 0 end
  local v = text + 0
  known[text], n_known = v, n_known + 1
  return v
end
-- Redis TIME's seconds as last read, and as µs: they change once a second.
local time_s, time_us = nil, 0

-- The zeros in front of a TIME µs part of n digits, to make it 6.
local ZEROS = {'00000', '0000', '000', '00', '0', ''}

-- The time of a call in µs, and whether it is virtual: `given` when the client passes
-- one (a virtual clock: tests, `sluice replay`), else ('' or nil) Redis TIME; then
-- TIME's two texts, seconds and µs (nil under a virtual clock). A number passed to
-- redis.call is formatted by snprintf("%.17g"), 3500 instructions for a time in µs;
-- the time's digits are sec .. ZEROS[#us] .. us, which costs 700.
local function clock(given)
  if given and given ~= '' then return tonumber(given), true end
  local t = redis.call('TIME')
  local sec, us = t[1], t[2]
  if sec ~= time_s then time_s, time_us = sec, sec * 1000000 end
  return time_us + us, false, sec, us
end

-- The PX of a key whose state is back to full capacity after `us` (> 0) µs. Under
-- a virtual clock the times are unrelated to the real time in which keys expire,
-- so a key lives at least an hour: long enough not to vanish while virtual time
-- still needs it, short enough to go if a replay dies before it deletes its keys.
local function px(us, virtual)
  local ms = math.floor((us + 999) / 1000) + 1
  if virtual and ms < 3600000 then ms = 3600000 end
  return ms
end

-- How long past its state's return to full capacity a key of the common path (gcra,
-- token_bucket) lives at most: the key's expiry moves only when the state would
-- outlive it, a second or more at a time, and a state that says until when the key
-- lives at least is written in place (SETRANGE) in between, which costs Redis less
-- than half of what a SET with PX costs it.
local KEEP_US = 1000000

-- floor(a / b) for 0 <= a < 2^53 and 0 < b < 2^53, exact (a / b may round up to an
-- integer the quotient is just below).
local function fdiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then return q - 1 end
  return q
end

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

-- A string value with a block in front: its end (µs) and the state after it (nil:
-- none); nil for any other value.
local function block_of(stored)
  if #stored < 9 or string.byte(stored, 1) ~= BLOCK_FORMAT then return nil end
  local _, u = struct.unpack('B<d', stored)
  if #stored == 9 then return u, nil end
  return u, string.sub(stored, 10)
end

-- A band's reply to a call on a state blocked until u (> now).
local function blocked_band(capacity, u, now)
  return {0, capacity, BLOCKED, u - now, u - now, 0, 0}
end

-- A ZSET's newest member {member, score} (ZRANGE -1 -1 WITHSCORES): the end of the
-- block it is, or nil.
local function zblock_of(newest)
  if newest[2] and tonumber(newest[2]) >= BLOCK_SCORE then
    return tonumber(string.sub(newest[1], 7))
  end
  return nil
end

-- Writes `state` (packed bytes) to key with PX ms, behind the block that ends at u
-- when it has not ended: the key then lives until the block's end at least.
local function put_state(key, state, ms, u, now, virtual)
  if u and u > now then
    local until_ms = px(u - now, virtual)
    if until_ms > ms then ms = until_ms end
    state = struct.pack('B<d', BLOCK_FORMAT, u) .. state
  end
  redis.call('SET', key, state, 'PX', ms)
end

-- What a string value holds: the end of its block (nil: none) and the state after it
-- (nil: none).
local function unblock(stored)
  if not stored then return nil, nil end
  local u, rest = block_of(stored)
  if u then return u, rest end
  return nil, stored
end

-- The block entry of a string state: `packed(key, rest, now, w)` gives the state the
-- block goes in front of as bytes that say when they end (rest: what key holds, the
-- block left out; nil: nothing).
local function block_string(KEYS, ARGV, packed)
  local key, d, w = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
  local now, virtual = clock(ARGV[3])
  local stored = redis.call('GET', key)
  local _, rest = unblock(stored)
  local ttl = -1
  if rest then
    ttl = redis.call('PTTL', key)
    rest = packed(key, rest, now, w, ttl)
  end
  if d > 0 then
    local ms = px(d, virtual)
    if ttl > ms then ms = ttl end
    local state = struct.pack('B<d', BLOCK_FORMAT, now + d) .. (rest or '')
    redis.call('SET', key, state, 'PX', ms)
  elseif rest and ttl > 0 then
    redis.call('SET', key, rest, 'PX', ttl)
  elseif rest then
    redis.call('SET', key, rest)
  elseif stored then
    redis.call('DEL', key)
  end
  return {1, 0, 0}
end

-- The block entry of a ZSET state (KEYS state [, seq]): its block member, replaced.
local function block_zset(KEYS, ARGV)
  local key, seq, d = KEYS[1], KEYS[2], tonumber(ARGV[1])
  local now, virtual = clock(ARGV[3])
  redis.call('ZREMRANGEBYSCORE', key, BLOCK_SCORE, BLOCK_SCORE)
  if d > 0 then
    redis.call('ZADD', key, BLOCK_SCORE, string.format('block:%d', now + d))
    local ms = px(d, virtual)
    for _, k in ipairs({key, seq}) do -- the seq key too: its numbers must not start over
      if redis.call('PTTL', k) < ms then redis.call('PEXPIRE', k, ms) end
    end
  end
  return {1, 0, 0}
end

-- The penalize entry: `one(key, seq, limit, w, burst, permits, now, virtual, epoch)`
-- takes the permits of one band, each band's permits at most twice its capacity (ARGV
-- and KEYS as run_bands').
local function run_penalize(one, KEYS, ARGV)
  local permits = tonumber(ARGV[1])
  local given = ARGV[4]
  if given == '' then given = nil end
  local now, virtual = clock(given)
  local n = 1 + tonumber(ARGV[5]) + tonumber(ARGV[6])
  local per = #KEYS / n
  for i = 1, n do
    local a = 6 + 3 * (i - 1)
    local k, s = KEYS[i], nil
    if per == 2 then k, s = KEYS[2 * i - 1], KEYS[2 * i] end
    one(k, s, tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), permits, now,
        virtual, ARGV[3] == '1')
  end
  return {1, 0, 0}
end

-- The permits a call is sized at: `need` (1 for a peek, capacity + 1 past the
-- capacity, which is denied whatever the state) and whether it may consume.
local function sizing(permits, capacity)
  local need = permits > 0 and permits or 1
  if need > capacity then need = capacity + 1 end
  return need, permits > 0 and permits <= capacity
end

-- ZADDs the members first..top (decimal sequence numbers), all at score t, in
-- batches of 1000 so that no call gets too many arguments.
local function zadd_range(key, t, first, top)
  local i = first
  while i <= top do
    local args, n = {}, 0
    while i <= top and n < 2000 do
      args[n + 1] = t
      args[n + 2] = i
      n = n + 2
      i = i + 1
    end
    redis.call('ZADD', key, unpack(args, 1, n))
  end
end

-- ---- the exact path: spans ---------------------------------------------------------
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

-- ---- warm-up: token_bucket and gcra with warmup = U (src/algorithm.c's warmup) ----
-- Guava's SmoothWarmingUp with cold factor 3, its costs exact. ARGV: permits, limit,
-- window_us, warmup_us, reserve_us, now_us (absent: Redis TIME); KEYS[1]: the
-- rule's state key. State: the time the limit is free (a span: µs and 1/d-ths), the
-- stored time in 1/(2L) µs (0 warm, 2 U L cold) and d (= limit when written), packed
-- ('B<d<d<d<d', WARM_FORMAT first). It shares the key with the rule's state without
-- warm-up, and each reads the other's as none: a reload that adds or removes
-- `warmup` starts the key afresh, as in process, with no command more. A call is admitted when the limit is free, and pushes the free time
-- on by n T plus, for the stored time spent above U / 2 (from b down to a), (b -
-- a)(a + b - 2 U L) / (2 L U) 1/L µs rounded up. With U L < 2^52 (the keyfile
-- refuses more) every number and every divisor stays below 2^53 and 2^52. Replies
-- as exact's, a denial with nothing to age it by (it holds until retry, remaining 0).
local function warm_up(KEYS, ARGV)
  local key = KEYS[1]
  local permits, l, w, u = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  local reserve = tonumber(ARGV[5])
  local now, virtual = clock(ARGV[6])
  if reserve > MAX_RESERVE_US then reserve = MAX_RESERVE_US end
  local need, consume = sizing(permits, l)
  local tq = idiv(w, l)
  local tr = w - tq * l
  local cold, threshold, interval = 2 * u * l, u * l, 6 * w -- 1/(2L) µs
  local fq, fr, stored = now, 0, cold -- a new limit starts cold
  local raw = redis.call('GET', key)
  if raw and string.byte(raw, 1) == BLOCK_FORMAT then -- a block in front (block_string)
    local bu, rest = block_of(raw)
    if not bu then bad_state(key) end
    if now < bu then return {0, BLOCKED, bu - now, bu - now} end
    raw = rest
  end
  if raw and string.byte(raw, 1) ~= WARM_FORMAT then
    -- the rule's state without warm-up (packed, or gcra's time in decimal): none here
    if string.byte(raw, 1) ~= STATE_FORMAT and not string.find(raw, '^%d+$') then
      bad_state(key)
    end
    raw = nil
  end
  if raw then
    if #raw ~= 33 then bad_state(key) end
    local _, q, r, s, d = struct.unpack('B<d<d<d<d', raw)
    fq, fr = stored_time(l, q, r, d)
    if d ~= l then -- kept under another limit: rounded up, colder
      local sq, sr = muldivmod(s, l, d)
      if sr > 0 then sq = sq + 1 end
      s = sq
    end
    if s < cold then stored = s end
  end
  if not span_le(now, 0, fq, fr) then
    -- idle since free: unused permits stored again at 1/T; a gap shorter than 3T,
    -- only up to the threshold
    local gq, gr = span_sub(l, now, 0, fq, fr)
    local gap = cold
    if gq < u then gap = 2 * (gq * l + gr) end
    if gap >= interval or gap >= cold then
      stored = stored + gap
      if stored > cold then stored = cold end
    else
      local filled = stored + gap
      if filled > threshold then filled = threshold end
      if filled > stored then stored = filled end
    end
    fq, fr = now, 0
  end
  local allowed = need <= l and span_le(fq, fr, now, 0)
  local wait = 0
  if not allowed and consume and reserve > 0 then
    local due = span_ceil(span_sub(l, fq, fr, now, 0))
    if due <= reserve then allowed, wait = true, due end
  end
  local function reset_of(free_now)
    if stored >= cold and free_now then return 0 end
    local bq, br = 0, 0
    if not free_now then bq, br = span_sub(l, fq, fr, now, 0) end
    local idle = 0 -- the idle time after which it is cold: U - S, at least 3T, at most U
    if stored < cold then
      idle = cold - stored
      if idle < interval then idle = interval end
      if idle > cold then idle = cold end
    end
    local half = fdiv(idle + 1, 2) -- 1/L µs, rounded up
    local hq = fdiv(half, l)
    return span_ceil(span_add(l, bq, br, hq, half - hq * l))
  end
  if allowed and consume then
    local per = 2 * w -- a permit's stored time
    local most = fdiv(stored, per)
    if most * per < stored then most = most + 1 end
    local spent = stored
    if need < most then spent = need * per end
    local a, b = stored - spent, stored
    if a < threshold then a = threshold end
    if b < threshold then b = threshold end
    local extra = 0
    if b > a then -- ceil((b - a)(a + b - cold) / (2 L U)), halving a quotient by L U
      local q1, r1 = muldivmod(b - a, a + b - cold, u * l)
      if q1 % 2 == 1 then
        extra = (q1 + 1) / 2
      elseif r1 > 0 then
        extra = q1 / 2 + 1
      else
        extra = q1 / 2
      end
    end
    local nq, nr = times_t(l, tq, tr, need)
    fq, fr = span_add(l, fq, fr, nq, nr)
    local eq = fdiv(extra, l)
    fq, fr = span_add(l, fq, fr, eq, extra - eq * l)
    stored = stored - spent
    redis.call('SET', key, struct.pack('B<d<d<d<d', WARM_FORMAT, fq, fr, stored, l), 'PX',
               px(reset_of(false), virtual))
  end
  local free_now = span_le(fq, fr, now, 0)
  local remaining = free_now and l or 0
  local reset = reset_of(free_now)
  if allowed then
    if wait == 0 then return {1, remaining, reset} end
    return {1, remaining, reset, wait, 0}
  end
  return {0, remaining, reset, span_ceil(span_sub(l, fq, fr, now, 0))}
end

-- A band's answer {allowed, limit, remaining, retry, reset, wait, leased, ...} as
-- decide and exact reply (see above): the first seven fields, then from `extra` on
-- what ages a denial.
local function compact(r, extra)
  if r[1] == 1 then
    if r[6] == 0 and r[7] == 0 then return {1, r[3], r[5]} end
    return {1, r[3], r[5], r[6], r[7]}
  end
  local out = {0, r[3], r[5], r[4]}
  local i = extra
  while r[i] do
    out[#out + 1] = r[i]
    i = i + 1
  end
  return out
end

-- The driver of a rule with bands, for every algorithm but concurrency:
-- `band(key, seq, limit, w, burst, permits, reserve, now, virtual, commit)` decides
-- one band (seq: sliding_log's seq key, else nil) and returns {allowed, limit,
-- remaining, retry, reset, wait, leased};
-- commit false decides as if the call consumed and writes nothing.
-- ARGV: permits, reserve_us, anchor (fixed_window: 1 = epoch), now_us ("" = Redis
-- TIME), bands, shadow_bands, then limit, window_us and burst of each band, the
-- rule's own first; KEYS[i]: the state of band i (a call names no key it does not
-- use: on a Cluster a slot half migrated fails a call only when its keys are
-- split); sliding_log's band i has two, KEYS[2i - 1] and KEYS[2i] (its seq key). Every band is decided without writing, then, when every enforced band
-- admits, each takes the permits (a shadow band only when it admits too). The
-- reply reports the enforced band with the fewest remaining (the first on a tie),
-- the latest retry (-1 when one can never pass) and reset, and 8th the bands that
-- refused, bit i - 1 for band i: denied, the enforced bands that refused;
-- admitted, the shadow bands that would have (so an admitted call with any bit
-- set is shadow_denied).
local function run_bands(band, KEYS, ARGV)
  local permits = tonumber(ARGV[1])
  local reserve = tonumber(ARGV[2])
  local given = ARGV[4]
  if given == '' then given = nil end
  local now, virtual = clock(given)
  local enforced = 1 + tonumber(ARGV[5])
  local n = enforced + tonumber(ARGV[6])
  local per = #KEYS / n -- keys per band: 2 with a seq key, else 1
  local function spec(i)
    local a = 6 + 3 * (i - 1)
    local k, s = KEYS[i], nil
    if per == 2 then k, s = KEYS[2 * i - 1], KEYS[2 * i] end
    return k, s, tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  end
  local each, all = {}, true
  for i = 1, n do
    local k, s, l, w, b = spec(i)
    each[i] = band(k, s, l, w, b, permits, 0, now, virtual, false)
    if each[i][3] == BLOCKED then -- the key's block (in the rule's own band)
      local r = each[i]
      return {0, r[2], BLOCKED, r[4], r[5], 0, 0, 0}
    end
    if i <= enforced and each[i][1] == 0 then all = false end
  end
  if permits > 0 and all then
    for i = 1, n do
      if i <= enforced or each[i][1] == 1 then
        local k, s, l, w, b = spec(i)
        each[i] = band(k, s, l, w, b, permits, 0, now, virtual, true)
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
