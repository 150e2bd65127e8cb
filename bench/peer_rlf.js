// SPDX-License-Identifier: MIT
// bench_redis's peer: rate-limiter-flexible's RateLimiterRedis.consume (one script, three
// commands) on the redis-server of the run, with IN_FLIGHT calls in flight on one ioredis
// connection, for about SECONDS; run by redis_algorithms.c as
//   node peer_rlf.js PORT SECONDS IN_FLIGHT
// with NODE_PATH naming the node_modules that scripts/deps.sh filled. It warms up (the
// script loaded, the connection made), prints "ready", waits for a line on stdin, runs, and
// prints "CALLS ELAPSED_NS DENIED ERRORS".
'use strict';
const Redis = require('ioredis');
const { RateLimiterRedis } = require('rate-limiter-flexible');

const [port, seconds, inFlight] = process.argv.slice(2).map(Number);
const client = new Redis({ host: '127.0.0.1', port, lazyConnect: false });
// a limit that never says no, as sluice's rows have
const limiter = new RateLimiterRedis({
  storeClient: client, keyPrefix: 'peer', points: 1e12, duration: 3600,
});

async function run() {
  await limiter.consume('k', 1);
  process.stdout.write('ready\n');
  await new Promise((resolve) => process.stdin.once('data', resolve));
  let calls = 0, denied = 0, errors = 0;
  const start = process.hrtime.bigint();
  const end = start + BigInt(Math.round(seconds * 1e9));
  async function loop() {
    while (process.hrtime.bigint() < end) {
      try {
        await limiter.consume('k', 1);
      } catch (e) {
        if (e instanceof Error) errors++; else denied++;
      }
      calls++;
    }
  }
  await Promise.all(Array.from({ length: inFlight }, loop));
  const elapsed = process.hrtime.bigint() - start;
  process.stdout.write(`${calls} ${elapsed} ${denied} ${errors}\n`);
  client.disconnect();
}

run().catch((e) => {
  process.stderr.write(`peer_rlf: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
