/**
 * Leader election safety against a real kube-apiserver (etcd + kube-apiserver from @opkit/controlplane):
 * - two candidates in separate threads, one of which blocks its event loop for longer than the lease,
 *   are never leading at the same moment;
 * - Lease renewals go over their own connection pool, so watches that hold every socket of the
 *   shared pool do not make the leader lose its lease.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { type ControlPlane, start } from '@opkit/controlplane';
import { ConfigMaps, Namespaces } from '../../src/api/builtin.ts';
import { createClient, loadConfig, RequestTimeoutError, RestClient } from '../../src/client/index.ts';
import { connectionsOf } from '../../src/client/pools.ts';
import { type LeaseObject, LeaseResource } from '../../src/leaderelection/index.ts';
import { silentLogger } from '../../src/log/index.ts';
import { createManager } from '../../src/manager/index.ts';
import { eventually } from '../../src/testing/index.ts';
import type { ElectorMessage, ElectorWorkerData } from './fixtures/elector-worker.ts';

let cp: ControlPlane;
let client: RestClient;

before(
  async () => {
    cp = await start({ mode: 'apiserver' });
    client = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), { fieldManager: 'le-safety' });
  },
  { timeout: 180_000 },
);

after(async () => {
  client?.close();
  await cp?.stop();
});

interface Candidate {
  worker: Worker;
  messages: ElectorMessage[];
  done: Promise<void>;
}

function candidate(data: Omit<ElectorWorkerData, 'kubeconfig'>): Candidate {
  const worker = new Worker(new URL('./fixtures/elector-worker.ts', import.meta.url), {
    workerData: { ...data, kubeconfig: cp.kubeconfigPath } satisfies ElectorWorkerData,
  });
  const messages: ElectorMessage[] = [];
  worker.on('message', (m: ElectorMessage) => messages.push(m));
  const done = new Promise<void>((resolve, reject) => {
    worker.once('error', reject);
    worker.once('exit', () => resolve());
  });
  return { worker, messages, done };
}

function times(c: Candidate, type: 'started' | 'act' | 'aborted'): number[] {
  return c.messages.flatMap((m) => (m.type === type ? [m.at] : []));
}

async function stop(c: Candidate): Promise<void> {
  c.worker.postMessage('stop');
  await c.done;
}

describe('leader election safety', () => {
  test('a leader whose event loop stalls longer than the lease never leads at the same moment as its successor', {
    timeout: 120_000,
  }, async (t) => {
    const ns = 'le-stall';
    await client.create(Namespaces, { metadata: { name: ns } });
    // Tight timings: renewDeadline + retryPeriod + the 5 % margin just below leaseDuration.
    const timings = { leaseDurationMs: 4_000, renewDeadlineMs: 3_200, retryPeriodMs: 500 };
    const base = { namespace: ns, lease: 'stall-operator', ...timings };
    const a = candidate({ ...base, identity: 'a', stallAfterMs: 1_500, stallMs: 9_000 });
    let b: Candidate | undefined;
    try {
      await eventually('a to lead', () => times(a, 'started').length > 0, { timeoutMs: 30_000 });
      b = candidate({ ...base, identity: 'b' });
      const bb = b;
      await eventually('b to take over', () => times(bb, 'started').length > 0, { timeoutMs: 60_000 });
      await eventually('a to wake up and end its term', () => a.messages.some((m) => m.type === 'done'), {
        timeoutMs: 60_000,
      });
      // b keeps leading (and acting) for a while after a woke up.
      const woke = a.messages.find((m) => m.type === 'stall');
      assert.ok(woke?.type === 'stall', 'a stalled');
      await eventually(
        'b to act after a woke up',
        () => times(bb, 'act').some((at) => at > woke.to + 1_000),
        {
          timeoutMs: 30_000,
        },
      );
      await stop(bb);

      const aStarted = times(a, 'started')[0]!;
      const aActs = times(a, 'act');
      const aAborted = times(a, 'aborted')[0]!;
      const bStarted = times(bb, 'started')[0]!;
      const bActs = times(bb, 'act');
      const bAborted = times(bb, 'aborted')[0]!;
      const aDone = a.messages.find((m) => m.type === 'done');
      t.diagnostic(
        `a led from 0, last acted at ${(aActs.at(-1)! - aStarted).toFixed(0)} ms, stalled ` +
          `${(woke.from - aStarted).toFixed(0)}..${(woke.to - aStarted).toFixed(0)} ms, 'leading' aborted at ` +
          `${(aAborted - aStarted).toFixed(0)} ms; b led from ${(bStarted - aStarted).toFixed(0)} ms`,
      );
      assert.equal(aDone?.type === 'done' && aDone.outcome, 'lost');
      assert.ok(aActs.length > 0 && bActs.length > 0, 'both acted while leading');
      // b took over while a was stalled, i.e. a stall longer than the lease did cost a its lease.
      assert.ok(bStarted > woke.from && bStarted < woke.to, 'b took over during the stall');
      // The leading intervals, as each side's own code saw them (acting only while isLeader()):
      // a: [aStarted, last act], b: [bStarted, bAborted]. They must not overlap.
      const aLast = aActs.at(-1)!;
      assert.ok(aLast < bStarted, `a acted at ${aLast}, after b began leading at ${bStarted}`);
      assert.ok(
        aActs.every((at) => at < woke.from),
        'a never acted after it woke up',
      );
      assert.ok(bActs.every((at) => at >= bStarted && at <= bAborted));
      // a ended its term (aborted 'leading') as soon as its event loop ran again.
      assert.ok(aAborted >= woke.to, "a's timers could not run during the stall");
    } finally {
      await Promise.allSettled([stop(a), b ? stop(b) : undefined]);
    }
  });

  test('Lease renewals succeed while long requests hold every socket of the shared pool', {
    timeout: 300_000,
  }, async (t) => {
    const ns = 'le-pool';
    const lease = 'pool-operator';
    await client.create(Namespaces, { metadata: { name: ns } });
    await client.create(ConfigMaps, { metadata: { namespace: ns, name: 'seed' }, data: { k: 'v' } });
    const timings = { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 };
    const mgr = await createManager({
      kubeconfig: cp.kubeconfigPath,
      namespace: ns,
      logger: silentLogger(),
      leaderElection: { id: lease, namespace: ns, ...timings },
      // HTTP/1.1's pool of sockets is what this is about (over HTTP/2 more streams open another session).
      transport: 'http1',
    });
    const ctl = new AbortController();
    let failure: unknown;
    const run = mgr.start(ctl.signal).catch((err: unknown) => {
      failure = err;
    });
    const watches = new AbortController();
    const streams: Promise<void>[] = [];
    const streamErrors: unknown[] = [];
    try {
      await mgr.elected;
      assert.ok(mgr.client instanceof RestClient);
      const shared = mgr.client;
      // 100 requests (the shared pool's size) that the API server answers only after 10 minutes: plain
      // GETs of a watch, each holding a socket of the pool (watches proper run on connections of their
      // own, h1-watch.ts).
      const path = `/api/v1/namespaces/${ns}/configmaps?watch=1&timeoutSeconds=600`;
      for (let i = 0; i < 100; i++) {
        streams.push(
          shared.transport.request({ method: 'GET', path, timeoutMs: 0, signal: watches.signal }).then(
            () => {
              streamErrors.push(new Error('a long request ended early'));
            },
            (err: unknown) => {
              if (!watches.signal.aborted) streamErrors.push(err);
            },
          ),
        );
      }
      const inUse = (): number => connectionsOf(shared.transport.agent).inUse();
      // Generous: on a loaded 2-core machine 100 handshakes against a busy API server can take a while.
      await eventually('100 long requests to hold a socket each', () => inUse() === 100, {
        timeoutMs: 180_000,
      });
      // The shared pool is exhausted: another request on it waits for a socket until it times out.
      await assert.rejects(
        shared.transport.request({ method: 'GET', path: `/api/v1/namespaces/${ns}`, timeoutMs: 1_000 }),
        RequestTimeoutError,
      );
      const before = (await client.get(LeaseResource, { namespace: ns, name: lease })).spec?.renewTime;
      // Longer than renewDeadline + a few retries: on a shared pool the leader would have lost the lease.
      const until = performance.now() + timings.renewDeadlineMs + 4 * timings.retryPeriodMs;
      let samples = 0;
      while (performance.now() < until) {
        assert.equal(failure, undefined, 'the manager is still running');
        assert.equal(mgr.isLeader(), true, 'still leading');
        samples++;
        await new Promise((r) => setTimeout(r, 100));
      }
      const held: LeaseObject = await client.get(LeaseResource, { namespace: ns, name: lease });
      t.diagnostic(`renewTime went from ${before} to ${held.spec?.renewTime} (${samples} samples leading)`);
      assert.equal(held.spec?.holderIdentity, mgr.identity);
      assert.notEqual(held.spec?.renewTime, before, 'renewed meanwhile');
    } finally {
      watches.abort();
      await Promise.allSettled(streams);
      ctl.abort();
      await run;
    }
    assert.equal(failure, undefined);
    assert.deepEqual(streamErrors, []);
  });
});
