/** The optional client-side QPS/burst limiter: a token bucket on a fake clock, and the client using it. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConfigMaps } from '../../src/api/builtin.ts';
import {
  createClient,
  RateLimitOptionsError,
  type RestClient,
  type RestConfig,
  TokenBucket,
} from '../../src/client/index.ts';
import { createManager } from '../../src/manager/create.ts';
import { FakeClock } from '../../src/util/clock.ts';

/** Settles `p` into a flag, so a test can see whether it is still pending. */
function track(p: Promise<unknown>): { settled: () => boolean; error: () => unknown } {
  let done = false;
  let error: unknown;
  p.then(
    () => {
      done = true;
    },
    (err: unknown) => {
      done = true;
      error = err;
    },
  );
  return { settled: () => done, error: () => error };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('TokenBucket', () => {
  test('starts full: burst requests at once, then one per 1/qps', () => {
    const clock = new FakeClock(1000);
    const bucket = new TokenBucket({ qps: 2, burst: 3, clock });
    assert.deepEqual([bucket.reserve(), bucket.reserve(), bucket.reserve()], [0, 0, 0]);
    assert.equal(bucket.reserve(), 500);
    assert.equal(bucket.reserve(), 1000);
  });

  test('refills at qps while idle, never above burst', () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ qps: 10, burst: 5, clock });
    for (let i = 0; i < 5; i++) bucket.reserve();
    assert.equal(bucket.available(), 0);
    clock.advance(300);
    assert.ok(Math.abs(bucket.available() - 3) < 1e-9);
    clock.advance(60_000);
    assert.equal(bucket.available(), 5);
  });

  test('burst defaults to ceil(qps), at least 1', () => {
    assert.equal(new TokenBucket({ qps: 20, clock: new FakeClock() }).burst, 20);
    assert.equal(new TokenBucket({ qps: 0.5, clock: new FakeClock() }).burst, 1);
  });

  test('wait() resolves only once the token is due', async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ qps: 1, burst: 1, clock });
    await bucket.wait();
    const second = track(bucket.wait());
    await tick();
    assert.equal(second.settled(), false);
    await clock.advanceAsync(999);
    assert.equal(second.settled(), false);
    await clock.advanceAsync(1);
    assert.equal(second.settled(), true);
    assert.equal(second.error(), undefined);
  });

  test('an aborted wait rejects with the reason and gives its token back', async () => {
    const clock = new FakeClock();
    const bucket = new TokenBucket({ qps: 1, burst: 1, clock });
    bucket.reserve();
    const ac = new AbortController();
    const waiting = track(bucket.wait(ac.signal));
    await tick();
    ac.abort(new Error('shutting down'));
    await tick();
    assert.equal((waiting.error() as Error).message, 'shutting down');
    // The token the aborted wait held is free again: the next request waits 1 s, not 2 s.
    assert.equal(bucket.reserve(), 1000);
    await assert.rejects(bucket.wait(AbortSignal.abort()), { name: 'AbortError' });
  });

  test('refuses a qps or burst that cannot work, saying what is allowed', () => {
    assert.throws(() => new TokenBucket({ qps: 0 }), RateLimitOptionsError);
    assert.throws(() => new TokenBucket({ qps: Number.NaN }), /qps must be a number > 0/);
    assert.throws(() => new TokenBucket({ qps: 5, burst: 0 }), /burst must be an integer >= 1/);
    assert.throws(() => new TokenBucket({ qps: 5, burst: 1.5 }), RateLimitOptionsError);
  });
});

describe('the client with rateLimit', () => {
  let server: http.Server;
  let config: RestConfig;
  const seen: string[] = [];

  before(async () => {
    server = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.writeHead(200, { 'Content-Type': 'application/json' });
      if (req.url?.includes('watch=1')) {
        res.write(`${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a' } } })}\n`);
        res.end();
        return;
      }
      res.end(JSON.stringify({ metadata: { name: 'a', namespace: 'default' }, items: [] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    config = {
      server: `http://127.0.0.1:${port}`,
      host: `127.0.0.1:${port}`,
      namespace: 'default',
      authenticate: async () => ({ headers: {} }),
    };
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  test('requests beyond the burst wait for the clock; watches are not limited', {
    timeout: 30_000,
  }, async () => {
    const clock = new FakeClock();
    const client = createClient(config, { rateLimit: { qps: 1, burst: 2, clock } });
    try {
      seen.length = 0;
      const key = { namespace: 'default', name: 'a' };
      await client.get(ConfigMaps, key);
      await client.list(ConfigMaps, { namespace: 'default' });
      const third = track(client.get(ConfigMaps, key));
      // Watches pass while the bucket is empty.
      const events = [];
      for await (const e of client.watch(ConfigMaps, { namespace: 'default' })) events.push(e);
      assert.equal(events.length, 1);
      assert.equal(third.settled(), false);
      assert.equal(seen.filter((r) => !r.includes('watch=1')).length, 2);
      await clock.advanceAsync(1000);
      for (let i = 0; i < 100 && !third.settled(); i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(third.settled(), true);
      assert.equal(third.error(), undefined);
      assert.equal(seen.filter((r) => !r.includes('watch=1')).length, 3);
    } finally {
      client.close();
    }
  });

  test('without rateLimit nothing waits', { timeout: 30_000 }, async () => {
    const client = createClient(config);
    try {
      assert.equal(client.rateLimiter, undefined);
      await Promise.all(
        Array.from({ length: 20 }, () => client.get(ConfigMaps, { namespace: 'default', name: 'a' })),
      );
    } finally {
      client.close();
    }
  });

  test('createManager: rateLimit throttles the built client, off by default', {
    timeout: 30_000,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'opkit-rate-limit-'));
    try {
      const kubeconfig = join(dir, 'kubeconfig');
      writeFileSync(
        kubeconfig,
        [
          'apiVersion: v1',
          'kind: Config',
          `clusters: [{ name: c, cluster: { server: "${config.server}" } }]`,
          'users: [{ name: u, user: { token: t } }]',
          'contexts: [{ name: x, context: { cluster: c, user: u } }]',
          'current-context: x',
          '',
        ].join('\n'),
      );
      const throttled = await createManager({ kubeconfig, rateLimit: { qps: 3, burst: 6 } });
      const plain = await createManager({ kubeconfig });
      try {
        const limiter = (throttled.client as RestClient).rateLimiter;
        assert.deepEqual([limiter?.qps, limiter?.burst], [3, 6]);
        assert.equal((plain.client as RestClient).rateLimiter, undefined);
      } finally {
        (throttled.client as RestClient).close();
        (plain.client as RestClient).close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
