/**
 * What the primary says about its replicas, in status.instances and on /metrics: the parser of the query's
 * output, the coarse lag the status holds (stable while idle and under small lag), the precise reasons of
 * a replica that is not ready (replication-status.ts, pure), and the poll's cadence, back-off and gauges
 * (replication-poll.ts, with a FakePodExecutor and a clock).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Pod } from '@opkit/runtime';
import { FakePodExecutor } from '@opkit/runtime/testing';
import { Registry } from 'prom-client';
import { statefulSet, withDefaults } from '../../src/controllers/database/desired/index.ts';
import {
  maxLagBytes,
  parseReplication,
  type ReplicationSample,
  slotName,
} from '../../src/controllers/database/engines/index.ts';
import { FailoverMetrics } from '../../src/controllers/database/failover/metrics.ts';
import type { InstanceStatus } from '../../src/controllers/database/instances.ts';
import { ReplicationPoller } from '../../src/controllers/database/replication-poll.ts';
import {
  formatLag,
  lagBucketBytes,
  lagBucketSeconds,
  type PolledReplication,
  withReplication,
} from '../../src/controllers/database/replication-status.ts';

const MiB = 1024 * 1024;
const BOUND = 64 * MiB;

const OUTPUT = [
  'self|f|2',
  'sender|pg-1|streaming|0|0',
  'sender|pg-2|catchup||1500',
  'slot|opkit_pg_1|reserved',
  'slot|opkit_pg_2|lost',
  '',
].join('\n');

describe('parseReplication', () => {
  it('reads the primary, its WAL senders and its slots', () => {
    assert.deepEqual(parseReplication(OUTPUT), {
      inRecovery: false,
      timeline: 2,
      senders: [
        { name: 'pg-1', state: 'streaming', lagBytes: 0, lagMs: 0 },
        { name: 'pg-2', state: 'catchup', lagBytes: undefined, lagMs: 1500 },
      ],
      slots: { opkit_pg_1: 'reserved', opkit_pg_2: 'lost' },
    });
  });
  it('a primary without replicas; a replica asked', () => {
    assert.deepEqual(parseReplication('self|f|1\n'), {
      inRecovery: false,
      timeline: 1,
      senders: [],
      slots: {},
    });
    assert.equal(parseReplication('self|t|3\n')?.inRecovery, true);
  });
  it('anything else is no answer', () => {
    assert.equal(parseReplication(''), undefined);
    assert.equal(parseReplication('psql: error: connection refused\n'), undefined);
    assert.equal(parseReplication('sender|pg-1|streaming|0|0\n'), undefined);
  });
});

describe('the coarse lag of the status', () => {
  it('bytes: 0 below 1 MiB, then powers of two MiB', () => {
    assert.equal(lagBucketBytes(0), 0);
    assert.equal(lagBucketBytes(MiB - 1), 0);
    assert.equal(lagBucketBytes(MiB), MiB);
    assert.equal(lagBucketBytes(3 * MiB - 1), 2 * MiB);
    assert.equal(lagBucketBytes(52 * MiB), 32 * MiB);
    assert.equal(lagBucketBytes(64 * MiB), 64 * MiB);
  });
  it('seconds: 0 below 1 s, then powers of two seconds', () => {
    assert.equal(lagBucketSeconds(0), 0);
    assert.equal(lagBucketSeconds(999), 0);
    assert.equal(lagBucketSeconds(1000), 1);
    assert.equal(lagBucketSeconds(7999), 4);
    assert.equal(lagBucketSeconds(8000), 8);
  });
  it('messages say whole units', () => {
    assert.equal(formatLag(52 * MiB + 5), '52 MiB');
    assert.equal(formatLag(64 * MiB), '64 MiB');
    assert.equal(formatLag(512), '512 B');
    assert.equal(formatLag(3 * 1024 * MiB), '3 GiB');
  });
});

const inst = (name: string, role: 'primary' | 'replica', ready = true): InstanceStatus => ({
  name,
  role,
  ready,
  ...(ready
    ? {}
    : { reason: 'ReadinessProbeFailing', message: `${name}: its readiness probe (health.sh ready) fails` }),
  result: 'cloned',
  timeline: 1,
});

const polled = (sample: Partial<ReplicationSample>, primary = 'pg-0'): PolledReplication => ({
  primary,
  at: 0,
  sample: { inRecovery: false, timeline: 1, senders: [], slots: {}, ...sample },
});

describe('the lag bound: spec.maxReplicaLag', () => {
  const db = (maxReplicaLag?: string) =>
    withDefaults({
      apiVersion: 'myapp.example.com/v1',
      kind: 'Database',
      metadata: { name: 'pg', namespace: 'ns' },
      spec: {
        engine: 'postgres',
        version: '16',
        storage: '1Gi',
        replicas: 3,
        ...(maxReplicaLag ? { maxReplicaLag } : {}),
      },
    });
  const env = (d: ReturnType<typeof db>) =>
    statefulSet(d, { configHash: '' })
      .spec?.template.spec?.containers.find((c) => c.name === 'postgres')
      ?.env?.find((e) => e.name === 'MAX_LAG_BYTES')?.value;
  it('64Mi by default, unchanged in the pod template', () => {
    assert.equal(maxLagBytes(db()), BOUND);
    assert.equal(env(db()), String(BOUND));
  });
  it('the readiness probe and the status use the spec', () => {
    assert.equal(maxLagBytes(db('128Mi')), 128 * MiB);
    assert.equal(env(db('128Mi')), String(128 * MiB));
    assert.equal(maxLagBytes(db('1G')), 1e9);
  });
});

describe('withReplication', () => {
  const three = [inst('pg-0', 'primary'), inst('pg-1', 'replica'), inst('pg-2', 'replica')];

  it('a quiet cluster: replicas streaming, lag 0, the timeline of the primary', () => {
    const out = withReplication(
      three,
      polled({
        timeline: 1,
        senders: [
          { name: 'pg-1', state: 'streaming', lagBytes: 0, lagMs: 0 },
          { name: 'pg-2', state: 'streaming', lagBytes: 0, lagMs: 0 },
        ],
      }),
      'pg-0',
      BOUND,
    );
    assert.deepEqual(out, [
      inst('pg-0', 'primary'),
      { ...inst('pg-1', 'replica'), streaming: true, lagBytes: 0, lagSeconds: 0 },
      { ...inst('pg-2', 'replica'), streaming: true, lagBytes: 0, lagSeconds: 0 },
    ]);
  });

  it('small lag under writes gives the same status as none (nothing to write)', () => {
    const at = (bytes: number, ms: number) =>
      withReplication(
        three,
        polled({
          senders: [
            { name: 'pg-1', state: 'streaming', lagBytes: bytes, lagMs: ms },
            { name: 'pg-2', state: 'streaming', lagBytes: bytes, lagMs: ms },
          ],
        }),
        'pg-0',
        BOUND,
      );
    assert.deepEqual(at(200 * 1024, 40), at(0, 0));
    assert.deepEqual(at(900 * 1024, 950), at(0, 0));
    assert.deepEqual(at(5 * MiB, 1200), at(7 * MiB, 1900), 'both in the 4 MiB / 1 s bucket');
    assert.notDeepEqual(at(5 * MiB, 1200), at(9 * MiB, 1200));
  });

  it('after a failover: the timeline is the new primary’s, for it and its streaming replicas', () => {
    const out = withReplication(
      [inst('pg-0', 'replica'), inst('pg-1', 'primary'), inst('pg-2', 'replica', false)],
      polled({ timeline: 2, senders: [{ name: 'pg-0', state: 'streaming', lagBytes: 0, lagMs: 0 }] }, 'pg-1'),
      'pg-1',
      BOUND,
    );
    assert.deepEqual(
      out.map((i) => [i.name, i.timeline, i.streaming]),
      [
        ['pg-0', 2, true],
        ['pg-1', 2, undefined],
        ['pg-2', 1, false],
      ],
    );
  });

  it('names why a replica is not ready: not streaming (WAL removed), lag over the bound', () => {
    const out = withReplication(
      [inst('pg-0', 'primary'), inst('pg-1', 'replica', false), inst('pg-2', 'replica', false)],
      polled({
        senders: [{ name: 'pg-1', state: 'streaming', lagBytes: 80 * MiB, lagMs: 12_000 }],
        slots: { [slotName('pg-2')]: 'lost' },
      }),
      'pg-0',
      BOUND,
    );
    assert.equal(out[1]?.reason, 'LagOverBound');
    assert.equal(out[1]?.message, 'pg-1: replay lag 80 MiB over the bound 64 MiB');
    assert.equal(out[1]?.lagBytes, 64 * MiB);
    assert.equal(out[1]?.lagSeconds, 8);
    assert.equal(out[2]?.reason, 'NotStreaming');
    assert.match(
      out[2]?.message ?? '',
      /^pg-2: not streaming from the primary pg-0: the primary removed WAL/,
    );
    assert.equal(out[2]?.streaming, false);
    assert.equal(out[2]?.lagBytes, undefined);
  });

  it('a replica connected but not streaming yet, or not connected at all', () => {
    const out = withReplication(
      [inst('pg-0', 'primary'), inst('pg-1', 'replica', false), inst('pg-2', 'replica', false)],
      polled({ senders: [{ name: 'pg-1', state: 'catchup', lagBytes: undefined, lagMs: 0 }] }),
      'pg-0',
      BOUND,
    );
    assert.equal(out[1]?.message, 'pg-1: not streaming from the primary pg-0 (its WAL sender is catchup)');
    assert.equal(out[2]?.message, 'pg-2: not streaming from the primary pg-0 (not connected to it)');
  });

  it('other reasons (a missing pod, a crash loop) are kept', () => {
    const missing = { ...inst('pg-1', 'replica', false), reason: 'PodMissing', message: 'gone' };
    const [, out] = withReplication([inst('pg-0', 'primary'), missing], polled({}), 'pg-0', BOUND);
    assert.equal(out?.reason, 'PodMissing');
    assert.equal(out?.streaming, false);
  });

  it('an answer of another primary, or of an instance in recovery, is not used', () => {
    const sample = { senders: [{ name: 'pg-1', state: 'streaming', lagBytes: 0, lagMs: 0 }] };
    assert.deepEqual(withReplication(three, polled(sample, 'pg-1'), 'pg-0', BOUND), three);
    assert.deepEqual(withReplication(three, polled({ ...sample, inRecovery: true }), 'pg-0', BOUND), three);
    assert.deepEqual(withReplication(three, undefined, 'pg-0', BOUND), three);
  });
});

const pod = (name: string, ready = true): Pod => ({
  metadata: { name, namespace: 'ns' },
  status: { conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
});

describe('ReplicationPoller', () => {
  const setup = (answer: () => { stdout?: string; exitCode?: number }) => {
    const exec = new FakePodExecutor({ defaultNamespace: 'ns' });
    exec.on({ pod: /.*/, container: 'postgres' }, () => answer());
    const registry = new Registry();
    const metrics = new FailoverMetrics(registry);
    let now = 1_000_000;
    const woken: string[] = [];
    const poller = new ReplicationPoller({
      exec,
      metrics,
      intervalMs: 30_000,
      clock: () => now,
      wake: (ns, name) => woken.push(`${ns}/${name}`),
    });
    const req = {
      namespace: 'ns',
      name: 'pg',
      primary: 'pg-0',
      pods: [pod('pg-0'), pod('pg-1'), pod('pg-2')],
      replicas: 3,
      failingOver: false,
    };
    /** A reconcile's poll, then the exec it started has answered. */
    const poll = async (r = req) => {
      const a = poller.poll(r);
      await poller.settled();
      return a;
    };
    return { exec, registry, poller, req, woken, poll, advance: (ms: number) => (now += ms) };
  };
  const lagOf = async (registry: Registry) =>
    (await registry.getSingleMetric('database_replication_lag_bytes')?.get())?.values.map((v) => [
      v.labels.pod,
      v.value,
    ]);

  it('the reconcile never waits for the exec; the answer wakes it, and serves until the next poll', async () => {
    let release: () => void = () => {};
    const exec = new FakePodExecutor({ defaultNamespace: 'ns' });
    exec.on(
      { pod: 'pg-0' },
      () => new Promise((resolve) => (release = () => resolve({ stdout: 'self|f|1\n' }))),
    );
    const woken: string[] = [];
    const poller = new ReplicationPoller({ exec, wake: (ns, name) => woken.push(`${ns}/${name}`) });
    const req = {
      namespace: 'ns',
      name: 'pg',
      primary: 'pg-0',
      pods: [pod('pg-0')],
      replicas: 2,
      failingOver: false,
    };
    assert.deepEqual(poller.poll(req), { nextMs: 30_000 }, 'no answer yet, and no wait for it');
    assert.deepEqual(poller.poll(req).polled, undefined);
    assert.equal(exec.calls.length, 1, 'one exec in flight at a time');
    release();
    await poller.settled();
    assert.deepEqual(woken, ['ns/pg']);
    assert.equal(poller.poll(req).polled?.sample.timeline, 1);
  });

  it('asks the primary once per interval; an answer the status shows alike wakes nobody', async () => {
    let out = 'self|f|1\nsender|pg-1|streaming|0|0\nsender|pg-2|streaming|4096|20\n';
    const t = setup(() => ({ stdout: out }));
    const first = await t.poll();
    assert.equal(t.exec.calls.length, 1);
    assert.deepEqual(t.exec.calls[0]?.name, 'pg-0');
    assert.equal(first.nextMs, 30_000);
    assert.deepEqual(t.woken, ['ns/pg']);
    t.advance(10_000);
    const between = await t.poll();
    assert.equal(t.exec.calls.length, 1, 'no exec between polls');
    assert.equal(between.nextMs, 20_000);
    assert.equal(between.polled?.sample.senders.length, 2);
    t.advance(20_000);
    out = 'self|f|1\nsender|pg-1|streaming|200|3\nsender|pg-2|streaming|9000|40\n';
    await t.poll();
    assert.equal(t.exec.calls.length, 2);
    assert.deepEqual(t.woken, ['ns/pg'], 'the same coarse lag: no reconcile for it');
    assert.deepEqual(await lagOf(t.registry), [
      ['pg-1', 200],
      ['pg-2', 9000],
    ]);
    t.advance(30_000);
    out = 'self|f|1\nsender|pg-1|streaming|0|0\n';
    await t.poll();
    assert.deepEqual(t.woken, ['ns/pg', 'ns/pg'], 'pg-2 stopped streaming: the status changes');
  });

  it('nobody asked: one instance, a primary not Ready, a failover in progress', async () => {
    const t = setup(() => ({ stdout: 'self|f|1\n' }));
    assert.deepEqual(await t.poll({ ...t.req, replicas: 1 }), {});
    assert.deepEqual(await t.poll({ ...t.req, pods: [pod('pg-0', false), pod('pg-1')] }), {});
    assert.deepEqual(await t.poll({ ...t.req, failingOver: true }), {});
    assert.equal(t.exec.calls.length, 0);
  });

  it('a primary that does not answer is asked again after twice the wait; its answer dropped after two failures', async () => {
    let ok = true;
    const t = setup(() => (ok ? { stdout: 'self|f|1\n' } : { exitCode: 2, stdout: '' }));
    await t.poll();
    ok = false;
    t.advance(30_000);
    const failed = await t.poll();
    assert.ok(failed.polled, 'the last answer is kept a while');
    assert.equal(t.poller.poll(t.req).nextMs, 60_000, 'twice the wait after a failure');
    t.advance(60_000);
    await t.poll();
    const again = t.poller.poll(t.req);
    assert.equal(again.nextMs, 120_000);
    assert.equal(again.polled, undefined, 'two polls in a row failed');
    assert.equal(t.exec.calls.length, 3);
  });

  it('a slow exec in flight does not make the last answer stale; a primary not asked for long does', async () => {
    let release: () => void = () => {};
    let slow = false;
    const t = setup(() => ({ stdout: 'self|f|1\n' }));
    t.exec.on({ pod: 'pg-0' }, () =>
      slow
        ? new Promise((resolve) => (release = () => resolve({ stdout: 'self|f|1\n' })))
        : { stdout: 'self|f|1\n' },
    );
    await t.poll();
    slow = true;
    t.advance(30_000);
    t.poller.poll(t.req); // starts the slow exec
    t.advance(70_000); // 100 s old: more than three intervals, less than that and an exec timeout
    assert.ok(t.poller.poll(t.req).polled, 'kept while the exec is in flight');
    release();
    await t.poller.settled();
    assert.equal(t.poller.poll(t.req).polled?.at, 1_030_000, 'the new answer, dated when it was asked');
    // The primary not Ready for long: nobody is asked, and the answer expires.
    const notReady = { ...t.req, pods: [pod('pg-0', false)] };
    t.advance(200_000);
    assert.deepEqual(t.poller.poll(notReady), {});
  });

  it('a new primary is asked at once', async () => {
    const t = setup(() => ({ stdout: 'self|f|2\n' }));
    await t.poll();
    t.advance(1_000);
    await t.poll({ ...t.req, primary: 'pg-1' });
    assert.equal(t.exec.calls.length, 2);
    assert.equal(t.exec.calls[1]?.name, 'pg-1');
    assert.equal(t.poller.poll({ ...t.req, primary: 'pg-1' }).polled?.primary, 'pg-1');
    assert.equal(t.poller.poll(t.req).polled, undefined, 'the answer of another primary is not served');
  });

  it('gauges go with the instance that stops streaming, is scaled away, and with the Database', async () => {
    let out = 'self|f|1\nsender|pg-1|streaming|10|0\nsender|pg-2|streaming|20|0\n';
    const t = setup(() => ({ stdout: out }));
    await t.poll();
    assert.deepEqual(await lagOf(t.registry), [
      ['pg-1', 10],
      ['pg-2', 20],
    ]);
    out = 'self|f|1\nsender|pg-1|streaming|0|0\n';
    t.advance(30_000);
    await t.poll({ ...t.req, replicas: 2, pods: [pod('pg-0'), pod('pg-1')] });
    assert.deepEqual(await lagOf(t.registry), [['pg-1', 0]]);
    await t.poller.forget('ns', 'pg');
    assert.deepEqual(await lagOf(t.registry), []);
  });
});
