import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type Logger, pino } from 'pino';
import { ConfigMaps, Secrets } from '../../src/api/builtin.ts';
import { type KubeObject, keyOf, type ObjectMeta } from '../../src/api/object.ts';
import { defineResource, type Resource, resourceId } from '../../src/api/resource.ts';
import { Cache } from '../../src/cache/cache.ts';
import { ConnectionError } from '../../src/client/errors.ts';
import {
  Controller,
  type ControllerContext,
  type ControllerOptions,
  controllerFor,
  type EventObject,
  enqueueForObject,
  generationChanged,
  type InformerProvider,
  type InformerSource,
  type ReconcileContext,
  type Reconciler,
  ReconcileTimeoutError,
  type Request,
  requeueAfter,
  type SourceEventHandler,
  TerminalError,
} from '../../src/controller/index.ts';
import { silentLogger } from '../../src/log/logger.ts';
import { Manager } from '../../src/manager/manager.ts';
import type { Runnable } from '../../src/manager/runnable.ts';
import { MetricsRegistry } from '../../src/metrics/index.ts';
import { ItemExponentialFailureRateLimiter } from '../../src/queue/index.ts';
import { tooManyRequestsError } from '../../src/testing/errors.ts';
import { eventually } from '../../src/testing/eventually.ts';
import { FakeClient } from '../../src/testing/fake-client.ts';
import { FakeClock } from '../../src/util/clock.ts';

// ---------------------------------------------------------------------------------------------------
// A scripted, informer-like source: the test decides what the "cluster" says and when it has synced.

const storeKey = (o: EventObject): string => `${o.metadata.namespace ?? ''}/${o.metadata.name ?? ''}`;

class ScriptedInformer<T extends KubeObject = KubeObject> implements InformerSource<T> {
  readonly handlers = new Set<SourceEventHandler<T>>();
  readonly objects = new Map<string, EventObject<T>>();
  #synced = false;
  #waiters = new Set<() => void>();

  addEventHandler(h: SourceEventHandler<T>): { remove(): void } {
    this.handlers.add(h);
    for (const o of this.objects.values()) h.onAdd?.(o, true);
    return { remove: () => this.handlers.delete(h) };
  }

  hasSynced(): boolean {
    return this.#synced;
  }

  waitForSync(signal?: AbortSignal): Promise<boolean> {
    if (this.#synced) return Promise.resolve(true);
    if (signal?.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (): void => resolve(true);
      this.#waiters.add(done);
      signal?.addEventListener('abort', () => {
        this.#waiters.delete(done);
        resolve(false);
      });
    });
  }

  sync(): void {
    this.#synced = true;
    for (const w of this.#waiters) w();
    this.#waiters.clear();
  }

  add(o: EventObject<T>): void {
    this.objects.set(storeKey(o), o);
    for (const h of this.handlers) h.onAdd?.(o, false);
  }

  update(o: EventObject<T>): void {
    const old = this.objects.get(storeKey(o)) ?? o;
    this.objects.set(storeKey(o), o);
    for (const h of this.handlers) h.onUpdate?.(old, o);
  }

  remove(o: EventObject<T>): void {
    this.objects.delete(storeKey(o));
    for (const h of this.handlers) h.onDelete?.(o);
  }
}

class ScriptedCache implements InformerProvider {
  readonly informers = new Map<string, ScriptedInformer>();
  readonly synced: boolean;
  constructor(synced = true) {
    this.synced = synced;
  }
  getInformer<T extends KubeObject>(res: Resource<T>): ScriptedInformer<T> {
    let inf = this.informers.get(resourceId(res));
    if (!inf) {
      inf = new ScriptedInformer();
      if (this.synced) inf.sync();
      this.informers.set(resourceId(res), inf);
    }
    return inf as unknown as ScriptedInformer<T>;
  }
  of<T extends KubeObject>(res: Resource<T>): ScriptedInformer<T> {
    return this.getInformer(res);
  }
}

// ---------------------------------------------------------------------------------------------------

const Widgets = defineResource<KubeObject>({
  group: 'test.opkit.dev',
  version: 'v1',
  kind: 'Widget',
  plural: 'widgets',
  namespaced: true,
});

const widget = (name: string, meta: ObjectMeta = {}): KubeObject => ({
  apiVersion: 'test.opkit.dev/v1',
  kind: 'Widget',
  metadata: { name, namespace: 'ns', generation: 1, ...meta },
});

/** Lets pending promise continuations run. */
async function flush(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}

interface Deferred {
  promise: Promise<void>;
  resolve(): void;
  reject(err: unknown): void;
}
function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function setup(options: ControllerOptions = {}, syncedCache = true) {
  const clock = new FakeClock(1_000_000);
  const cache = new ScriptedCache(syncedCache);
  const metrics = new MetricsRegistry();
  const added: Runnable[] = [];
  const ctx: ControllerContext = {
    cache,
    client: new FakeClient(),
    clock,
    metrics,
    add: (r) => added.push(r),
  };
  const informer = cache.of(Widgets);
  const build = (reconciler: Reconciler, extra: ControllerOptions = {}): Controller =>
    controllerFor(ctx, Widgets)
      .named('test')
      .withOptions({ rateLimiter: new ItemExponentialFailureRateLimiter(100, 100_000), ...options, ...extra })
      .complete(reconciler);
  return { clock, cache, metrics, ctx, informer, added, build };
}

/** Starts a controller; returns a stop function that aborts and waits for start() to return. */
function run(c: Controller): { stop(): Promise<void>; done: Promise<void> } {
  const ac = new AbortController();
  const done = c.start(ac.signal);
  return {
    done,
    stop: async () => {
      ac.abort();
      await done;
    },
  };
}

async function metricValue(reg: MetricsRegistry, series: string): Promise<number | undefined> {
  for (const line of (await reg.text()).split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

const total = (result: string) => `controller_runtime_reconcile_total{controller="test",result="${result}"}`;

// ---------------------------------------------------------------------------------------------------

describe('Controller', () => {
  it('queues events before start but reconciles only after start and informer sync', async () => {
    const { ctx, cache, build, added } = setup({}, false);
    const informer = cache.of(Widgets);
    const calls: { req: Request; ctx: ReconcileContext }[] = [];
    const c = build(async (req, rctx) => {
      calls.push({ req, ctx: rctx });
    });
    assert.equal(c.needLeaderElection, true);
    assert.equal(c.name, 'test');
    assert.deepEqual(added, [c], 'complete() adds the controller to the context');
    assert.equal(ctx.metrics, (ctx as { metrics: MetricsRegistry }).metrics);

    informer.add(widget('a'));
    informer.add(widget('b'));
    await flush();
    assert.equal(calls.length, 0, 'not started');
    assert.equal(c.queue.len(), 2, 'keys queued while not started');

    const r = run(c);
    await flush();
    assert.equal(calls.length, 0, 'informer not synced yet');
    informer.sync();
    await flush();
    assert.deepEqual(
      calls.map((x) => x.req),
      [
        { namespace: 'ns', name: 'a' },
        { namespace: 'ns', name: 'b' },
      ],
    );
    const first = calls[0]!.ctx;
    assert.equal(first.controller, 'test');
    assert.match(first.reconcileID, /^[0-9a-f-]{36}$/);
    assert.notEqual(first.reconcileID, calls[1]!.ctx.reconcileID);
    assert.equal(first.signal.aborted, false);
    await r.stop();
    await assert.rejects(c.start(new AbortController().signal), /started more than once/);
  });

  it('retries a throwing reconcile with increasing delays', async () => {
    const { clock, informer, build, metrics } = setup();
    const times: number[] = [];
    const c = build(async () => {
      times.push(clock.now());
      throw new Error('boom');
    });
    const r = run(c);
    const t0 = clock.now();
    informer.add(widget('a'));
    await flush();
    for (let i = 0; i < 16; i++) await clock.advanceAsync(100);
    assert.deepEqual(
      times.map((t) => t - t0),
      [0, 100, 300, 700, 1500],
      'base 100 ms, doubling',
    );
    assert.equal(c.queue.numRequeues('ns/a'), 5);
    assert.equal(await metricValue(metrics, total('error')), 5);
    assert.equal(
      await metricValue(metrics, 'controller_runtime_reconcile_errors_total{controller="test"}'),
      5,
    );
    await r.stop();
  });

  it('a TerminalError is not retried (until the next event)', async () => {
    const { clock, informer, build, metrics } = setup();
    let calls = 0;
    const c = build(async () => {
      calls++;
      throw calls === 1 ? new TerminalError('bad spec') : new TerminalError(new Error('wrapped'));
    });
    const r = run(c);
    informer.add(widget('a'));
    await flush();
    await clock.advanceAsync(1_000_000);
    assert.equal(calls, 1);
    assert.equal(c.queue.numRequeues('ns/a'), 0);
    informer.update(widget('a', { generation: 2 }));
    await flush();
    assert.equal(calls, 2, 'a new event reconciles again');
    await clock.advanceAsync(1_000_000);
    assert.equal(calls, 2);
    assert.equal(
      await metricValue(metrics, 'controller_runtime_terminal_reconcile_errors_total{controller="test"}'),
      2,
    );
    assert.equal(
      await metricValue(metrics, 'controller_runtime_reconcile_errors_total{controller="test"}'),
      2,
    );
    assert.equal(await metricValue(metrics, total('error')), 2);
    await r.stop();
  });

  it('requeueAfter reconciles the key again after the delay; requeue uses backoff', async () => {
    const { clock, informer, build, metrics } = setup();
    const times: number[] = [];
    const c = build(async () => {
      times.push(clock.now());
      if (times.length === 1) return requeueAfter(5_000);
      if (times.length === 2) return { requeue: true };
      return undefined;
    });
    const r = run(c);
    const t0 = clock.now();
    informer.add(widget('a'));
    await flush();
    await clock.advanceAsync(4_999);
    assert.equal(times.length, 1);
    await clock.advanceAsync(1);
    assert.equal(times.length, 2);
    await clock.advanceAsync(100);
    assert.deepEqual(
      times.map((t) => t - t0),
      [0, 5_000, 5_100],
    );
    await clock.advanceAsync(100_000);
    assert.equal(times.length, 3);
    assert.equal(await metricValue(metrics, total('requeue_after')), 1);
    assert.equal(await metricValue(metrics, total('requeue')), 1);
    assert.equal(await metricValue(metrics, total('success')), 1);
    assert.throws(() => requeueAfter(-1), RangeError);
    await r.stop();
  });

  it('a hanging reconcile is timed out and abandoned; other keys proceed; the key never runs twice at once', async () => {
    const { clock, informer, build, metrics } = setup({
      reconcileTimeoutMs: 1_000,
      maxConcurrentReconciles: 1,
    });
    const hang = deferred();
    const calls: string[] = [];
    const signals: AbortSignal[] = [];
    const c = build(async (req, ctx) => {
      calls.push(req.name);
      if (req.name === 'stuck' && calls.filter((n) => n === 'stuck').length === 1) {
        signals.push(ctx.signal);
        await hang.promise; // ignores its signal
      }
    });
    const r = run(c);
    informer.add(widget('stuck'));
    informer.add(widget('other'));
    await flush();
    assert.deepEqual(calls, ['stuck'], 'one worker, busy with the stuck key');
    await clock.advanceAsync(999);
    assert.deepEqual(calls, ['stuck']);
    await clock.advanceAsync(1);
    assert.deepEqual(calls, ['stuck', 'other'], 'the timeout freed the worker');
    assert.equal(signals[0]!.aborted, true);
    assert.ok(signals[0]!.reason instanceof ReconcileTimeoutError);
    assert.equal(
      await metricValue(metrics, 'controller_runtime_reconcile_errors_total{controller="test"}'),
      1,
    );

    // The retry (100 ms backoff) waits for the abandoned reconcile: never two at once for one key.
    await clock.advanceAsync(10_000);
    assert.deepEqual(calls, ['stuck', 'other']);
    informer.update(widget('stuck', { generation: 2 }));
    await clock.advanceAsync(10_000);
    assert.deepEqual(calls, ['stuck', 'other']);
    const unfinished = await metricValue(
      metrics,
      'workqueue_unfinished_work_seconds{name="test",controller="test"}',
    );
    assert.ok(unfinished !== undefined && unfinished >= 20, `unfinished work ${unfinished}`);

    hang.resolve();
    await flush();
    assert.deepEqual(calls, ['stuck', 'other', 'stuck'], 'retried once the abandoned reconcile ended');
    await r.stop();
  });

  it('a reconcile that honours its signal is retried with backoff after the timeout', async () => {
    const { clock, informer, build } = setup({ reconcileTimeoutMs: 500 });
    const times: number[] = [];
    const c = build(async (_req, ctx) => {
      times.push(clock.now());
      if (times.length === 1) {
        await new Promise<void>((_resolve, reject) =>
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)),
        );
      }
    });
    const r = run(c);
    const t0 = clock.now();
    informer.add(widget('a'));
    await flush();
    await clock.advanceAsync(500);
    await clock.advanceAsync(100);
    assert.deepEqual(
      times.map((t) => t - t0),
      [0, 600],
    );
    await r.stop();
  });

  it('respects maxConcurrentReconciles and never runs one key concurrently', async () => {
    const { informer, build } = setup({ maxConcurrentReconciles: 3 });
    const running = new Set<string>();
    const gates: { key: string; d: Deferred }[] = [];
    const calls: string[] = [];
    let maxSeen = 0;
    const c = build(async (req) => {
      const k = keyOf(req);
      assert.ok(!running.has(k), `${k} runs twice at once`);
      running.add(k);
      maxSeen = Math.max(maxSeen, running.size);
      calls.push(req.name);
      const d = deferred();
      gates.push({ key: k, d });
      try {
        await d.promise;
      } finally {
        running.delete(k);
      }
    });
    const release = async (): Promise<void> => {
      gates.shift()?.d.resolve();
      await flush();
    };
    for (let i = 0; i < 8; i++) informer.add(widget(`w${i}`));
    const r = run(c);
    await flush();
    assert.equal(running.size, 3);
    assert.equal(c.activeWorkers, 3);
    // An event for a key being processed does not start it elsewhere.
    informer.update(widget('w0', { generation: 2 }));
    informer.update(widget('w1', { generation: 2 }));
    await flush();
    assert.equal(running.size, 3);
    while (gates.length > 0) await release();
    assert.equal(maxSeen, 3);
    assert.equal(calls.length, 10);
    assert.equal(calls.filter((n) => n === 'w0').length, 2);
    assert.equal(calls.filter((n) => n === 'w1').length, 2);
    assert.equal(c.activeWorkers, 0);
    await r.stop();
  });

  it('recovers panics (synchronous throws, runtime faults) and counts them', async () => {
    const { clock, informer, build, metrics } = setup();
    let calls = 0;
    const c = build(((_req: Request) => {
      calls++;
      if (calls === 1) throw new Error('sync throw');
      if (calls === 2)
        return Promise.reject(new TypeError("Cannot read properties of undefined (reading 'x')"));
      return Promise.resolve();
    }) as Reconciler);
    const r = run(c);
    informer.add(widget('a'));
    await flush();
    await clock.advanceAsync(100);
    await clock.advanceAsync(200);
    assert.equal(calls, 3);
    assert.equal(
      await metricValue(metrics, 'controller_runtime_reconcile_panics_total{controller="test"}'),
      2,
    );
    assert.equal(
      await metricValue(metrics, 'controller_runtime_reconcile_errors_total{controller="test"}'),
      2,
    );
    assert.equal(await metricValue(metrics, total('success')), 1);
    await r.stop();
  });

  it('with recoverPanic false a panic stops the controller and start() rejects', async () => {
    const { informer, build } = setup({ recoverPanic: false });
    const c = build((() => {
      throw new Error('sync throw');
    }) as unknown as Reconciler);
    const done = c.start(new AbortController().signal);
    informer.add(widget('a'));
    await assert.rejects(done, /sync throw/);
  });

  it('shutdown aborts in-flight reconciles, waits for them, then stops taking keys', async () => {
    const { informer, build } = setup({ maxConcurrentReconciles: 2 });
    const signals: AbortSignal[] = [];
    const calls: string[] = [];
    const c = build(async (req, ctx) => {
      calls.push(req.name);
      signals.push(ctx.signal);
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
      await flush(1);
    });
    informer.add(widget('a'));
    informer.add(widget('b'));
    informer.add(widget('c'));
    const ac = new AbortController();
    let stopped = false;
    const done = c.start(ac.signal).then(() => {
      stopped = true;
    });
    await flush();
    assert.deepEqual(calls, ['a', 'b']);
    ac.abort();
    await done;
    assert.equal(stopped, true);
    assert.ok(signals.every((s) => s.aborted));
    assert.deepEqual(calls, ['a', 'b'], 'queued key c is not started after shutdown');
    assert.equal(informer.handlers.size, 0, 'event handlers removed');
    informer.add(widget('d'));
    assert.equal(c.queue.len(), 1, 'nothing queued after shutdown (c was already queued)');
  });

  it('shutdown gives up on reconciles that ignore their signal after the drain deadline', async () => {
    const { clock, informer, build } = setup({ drainTimeoutMs: 5_000, reconcileTimeoutMs: 0 });
    const c = build(() => new Promise<void>(() => {}));
    informer.add(widget('a'));
    const ac = new AbortController();
    let stopped = false;
    const done = c.start(ac.signal).then(() => {
      stopped = true;
    });
    await flush();
    ac.abort();
    await flush();
    assert.equal(stopped, false);
    await clock.advanceAsync(4_999);
    assert.equal(stopped, false);
    await clock.advanceAsync(1);
    await done;
    assert.equal(stopped, true);
  });

  it('start() rejects when the informers do not sync in time', async () => {
    const { clock, build } = setup({ cacheSyncTimeoutMs: 10_000 }, false);
    const c = build(async () => {});
    const done = c.start(new AbortController().signal);
    let rejected = false;
    done.catch(() => {
      rejected = true;
    });
    await clock.advanceAsync(9_999);
    assert.equal(rejected, false);
    await clock.advanceAsync(1);
    await assert.rejects(done, /timed out after 10000 ms waiting for caches to sync/);
  });

  it('stopping while waiting for the sync resolves start()', async () => {
    const { build } = setup({}, false);
    const c = build(async () => {});
    const ac = new AbortController();
    const done = c.start(ac.signal);
    await flush();
    ac.abort();
    await done;
  });

  it('exports standard metrics after N reconciles', async () => {
    const { clock, informer, build, metrics } = setup({ maxConcurrentReconciles: 2 });
    let n = 0;
    const c = build(async () => {
      n++;
      if (n === 4) throw new Error('once');
    });
    const r = run(c);
    for (let i = 0; i < 5; i++) informer.add(widget(`w${i}`));
    await flush();
    await clock.advanceAsync(100); // the failed one is retried
    assert.equal(n, 6);
    const text = await metrics.text();
    const expect = [
      'controller_runtime_reconcile_total{controller="test",result="success"} 5',
      'controller_runtime_reconcile_total{controller="test",result="error"} 1',
      'controller_runtime_reconcile_total{controller="test",result="requeue"} 0',
      'controller_runtime_reconcile_total{controller="test",result="requeue_after"} 0',
      'controller_runtime_reconcile_errors_total{controller="test"} 1',
      'controller_runtime_terminal_reconcile_errors_total{controller="test"} 0',
      'controller_runtime_reconcile_panics_total{controller="test"} 0',
      'controller_runtime_reconcile_time_seconds_count{controller="test"} 6',
      'controller_runtime_max_concurrent_reconciles{controller="test"} 2',
      'controller_runtime_active_workers{controller="test"} 0',
      'workqueue_adds_total{name="test",controller="test"} 6',
      'workqueue_retries_total{name="test",controller="test"} 1',
      'workqueue_depth{name="test",controller="test"} 0',
      'workqueue_queue_duration_seconds_count{name="test",controller="test"} 6',
      'workqueue_work_duration_seconds_count{name="test",controller="test"} 6',
      'workqueue_unfinished_work_seconds{name="test",controller="test"} 0',
      'workqueue_longest_running_processor_seconds{name="test",controller="test"} 0',
    ];
    const lines = new Set(text.split('\n'));
    for (const line of expect) assert.ok(lines.has(line), `missing: ${line}\n${text}`);
    await r.stop();
  });

  it('counts and logs abandoned reconciles (still running after the timeout) until they end', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger: Logger = pino({ level: 'debug' }, { write: (s: string) => lines.push(JSON.parse(s)) });
    const { clock, informer, build, metrics } = setup({ reconcileTimeoutMs: 1_000, logger });
    const hang = deferred();
    const calls: string[] = [];
    const c = build(async (req, ctx) => {
      calls.push(req.name);
      if (req.name === 'stuck' && calls.length === 1) await hang.promise; // ignores its signal
      if (req.name === 'polite' && calls.filter((n) => n === 'polite').length === 1) {
        // honours its signal: settles as soon as it aborts, so it is not "abandoned"
        await new Promise<void>((_res, rej) =>
          ctx.signal.addEventListener('abort', () => rej(ctx.signal.reason)),
        );
      }
    });
    const gauge = 'opkit_controller_abandoned_reconciles{controller="test"}';
    const counter = 'opkit_controller_abandoned_reconciles_total{controller="test"}';
    assert.equal(await metricValue(metrics, gauge), 0, 'the series exists from the start');
    assert.equal(await metricValue(metrics, counter), 0);
    const r = run(c);
    informer.add(widget('stuck'));
    await flush();
    await clock.advanceAsync(1_000);
    await flush();
    assert.equal(c.abandonedReconciles, 1);
    assert.equal(await metricValue(metrics, gauge), 1);
    assert.equal(await metricValue(metrics, counter), 1);
    const warn = lines.find(
      (l) => typeof l.msg === 'string' && l.msg.startsWith('Reconciler ignored its aborted signal'),
    );
    assert.ok(warn, 'a warning for the abandoned reconcile');
    assert.equal(warn.level, 40);
    assert.equal(warn.key, 'ns/stuck');
    assert.equal(warn.abandoned, 1);
    assert.equal(warn.maxConcurrentReconciles, 1);

    // A reconcile that honours its signal times out too, but is not abandoned.
    informer.add(widget('polite'));
    await flush();
    await clock.advanceAsync(1_000);
    await flush();
    assert.equal(c.abandonedReconciles, 1);
    assert.equal(await metricValue(metrics, counter), 1);

    hang.resolve();
    await flush();
    assert.equal(c.abandonedReconciles, 0);
    assert.equal(await metricValue(metrics, gauge), 0, 'the gauge drops when the abandoned call ends');
    assert.equal(await metricValue(metrics, counter), 1);
    assert.ok(lines.some((l) => l.msg === 'Abandoned reconcile finished; its key is free again'));
    await r.stop();
  });

  it('a cache read given the reconcile context ends at the reconcile timeout (nothing is abandoned)', async () => {
    const { clock, informer, build, metrics } = setup({ reconcileTimeoutMs: 1_000 });
    // An informer that can never sync: every list is forbidden (RBAC), retried with backoff forever.
    const api = new FakeClient();
    api.onRequest((req) => {
      if ((req.verb === 'list' || req.verb === 'watch') && req.resource === Secrets)
        throw new Error('forbidden: secrets');
    });
    const reads = new Cache(api, { backoff: { initialMs: 5, maxMs: 5 } });
    const stopCache = new AbortController();
    const cacheDone = reads.start(stopCache.signal);
    const outcomes: string[] = [];
    const c = build(async (req, ctx) => {
      try {
        await reads.get(Secrets, req, ctx); // the ReconcileContext is a valid { signal } option
        outcomes.push('read');
      } catch (err) {
        outcomes.push(err instanceof ReconcileTimeoutError ? 'timed out' : String(err));
        throw err;
      }
    });
    const r = run(c);
    try {
      informer.add(widget('a'));
      await flush();
      await clock.advanceAsync(999);
      assert.deepEqual(outcomes, []);
      await clock.advanceAsync(1);
      await flush();
      assert.deepEqual(outcomes, ['timed out'], 'the read rejected with the abort reason');
      assert.equal(c.abandonedReconciles, 0);
      assert.equal(
        await metricValue(metrics, 'opkit_controller_abandoned_reconciles_total{controller="test"}'),
        0,
      );
    } finally {
      stopCache.abort();
      await r.stop();
      await cacheDone;
    }
  });

  it('honours Retry-After of a TooManyRequestsError (also as a cause) instead of the 100 ms backoff', async () => {
    const { clock, informer, build, metrics } = setup();
    const times: number[] = [];
    const c = build(async () => {
      times.push(clock.now());
      if (times.length === 1) throw tooManyRequestsError(7);
      if (times.length === 2) throw new Error('apply failed', { cause: tooManyRequestsError(1) });
      if (times.length === 3) throw tooManyRequestsError(0); // no Retry-After: the rate limiter decides
    });
    const r = run(c);
    const t0 = clock.now();
    informer.add(widget('a'));
    await flush();
    await clock.advanceAsync(100);
    assert.equal(times.length, 1, 'not retried after the rate limiter 100 ms backoff');
    await clock.advanceAsync(6_899);
    assert.equal(times.length, 1);
    await clock.advanceAsync(1);
    assert.equal(times.length, 2, 'retried after Retry-After: 7 s');
    await clock.advanceAsync(1_000);
    assert.equal(times.length, 3, 'max(200 ms backoff, 1 s Retry-After)');
    await clock.advanceAsync(400);
    assert.deepEqual(
      times.map((t) => t - t0),
      [0, 7_000, 8_000, 8_400],
      'then the backoff (400 ms) when it is longer than Retry-After',
    );
    assert.equal(c.queue.numRequeues('ns/a'), 0, 'forgotten after the success');
    assert.equal(await metricValue(metrics, total('error')), 3);
    await r.stop();
  });

  it('logs controller, key and reconcileID, and never the object', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger: Logger = pino({ level: 'debug' }, { write: (s: string) => lines.push(JSON.parse(s)) });
    const { informer, build } = setup({ logger });
    let id = '';
    const c = build(async (_req, ctx) => {
      id = ctx.reconcileID;
      ctx.log.info('hello from reconcile');
      throw new Error('nope');
    });
    const r = run(c);
    informer.add(widget('a', { labels: { secret: 'do-not-log' } }));
    await flush();
    await r.stop();
    const mine = lines.find((l) => l.msg === 'hello from reconcile');
    assert.ok(mine);
    assert.equal(mine.controller, 'test');
    assert.equal(mine.key, 'ns/a');
    assert.equal(mine.reconcileID, id);
    const err = lines.find((l) => l.msg === 'Reconciler error');
    assert.ok(err);
    assert.equal(err.key, 'ns/a');
    assert.equal(err.reconcileID, id);
    assert.equal((err.err as { message: string }).message, 'nope');
    assert.ok(!JSON.stringify(lines).includes('do-not-log'));
  });

  it('an unavailable API server is one warning, the retries at debug, and an info line when it is back', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger: Logger = pino({ level: 'debug' }, { write: (s: string) => lines.push(JSON.parse(s)) });
    const { clock, informer, build } = setup({ logger });
    let calls = 0;
    const c = build(async () => {
      calls++;
      if (calls <= 3)
        throw new ConnectionError('GET /api/v1/secrets failed: connect ECONNREFUSED', undefined);
      if (calls === 4)
        throw new Error('ensure Secret', { cause: new ConnectionError('socket hang up', undefined) });
    });
    const r = run(c);
    informer.add(widget('a'));
    informer.add(widget('b'));
    await flush();
    for (let i = 0; i < 20 && calls < 6; i++) await clock.advanceAsync(1_000);
    await r.stop();
    assert.ok(calls >= 6, `reconciled ${calls} times`);
    const levels = (msg: RegExp) => lines.filter((l) => msg.test(String(l.msg))).map((l) => l.level);
    assert.deepEqual(levels(/^Reconciler error: the API server is unavailable/), [40], 'one warning');
    assert.deepEqual(levels(/^Reconciler error$/), [20, 20, 20], 'the other failures at debug');
    assert.deepEqual(levels(/the API server answers again/), [30]);
    assert.equal(lines.filter((l) => (l.level as number) >= 50).length, 0, 'no error-level line');
  });

  it('survives throwing handlers and predicates', async () => {
    const { ctx, cache } = setup();
    const c = new Controller(ctx, 'raw', async () => {});
    const informer = cache.of(Widgets);
    c.watch(Widgets, enqueueForObject(), {
      predicates: [
        {
          create: (o) => {
            if (o.metadata.name === 'bad') throw new Error('predicate bug');
            return true;
          },
        },
      ],
    });
    informer.add(widget('bad'));
    informer.add(widget('good'));
    assert.equal(c.queue.len(), 1);
  });

  it('rejects duplicate names per metrics registry and bad options', () => {
    const { ctx } = setup();
    new Controller(ctx, 'dup', async () => {});
    assert.throws(() => new Controller(ctx, 'dup', async () => {}), /already exists/);
    new Controller(ctx, 'dup', async () => {}, { skipNameValidation: true });
    assert.throws(() => new Controller(ctx, 'x', async () => {}, { maxConcurrentReconciles: 0 }), RangeError);
    // Another manager (registry) may use the same name.
    new Controller({ ...ctx, metrics: new MetricsRegistry() }, 'dup', async () => {});
  });
});

describe('controllerFor builder', () => {
  const owner = (name: string, controller = true) => ({
    apiVersion: 'test.opkit.dev/v1',
    kind: 'Widget',
    name,
    uid: `uid-${name}`,
    controller,
  });

  it('wires the primary, owned and mapped watches with their predicates', async () => {
    const { ctx, cache } = setup();
    const reqs: string[] = [];
    const c = controllerFor(ctx, Widgets)
      .owns(ConfigMaps)
      .watches(Secrets, (s) => [{ namespace: s.metadata.namespace, name: `from-${s.metadata.name}` }])
      .withPredicates(generationChanged())
      .withOptions({ maxConcurrentReconciles: 2 })
      .build(async (req) => {
        reqs.push(keyOf(req));
      });
    assert.equal(c.name, 'widget', 'default name: lower-case kind');
    assert.equal(c.maxConcurrentReconciles, 2);
    const widgets = cache.of(Widgets);
    const cms = cache.of(ConfigMaps);
    const secrets = cache.of(Secrets);

    widgets.add(widget('w1'));
    widgets.update(widget('w1', { generation: 1, resourceVersion: '9' })); // filtered: same generation
    cms.add({ metadata: { name: 'cm', namespace: 'ns', ownerReferences: [owner('w2')] } });
    cms.add({ metadata: { name: 'cm2', namespace: 'ns', ownerReferences: [owner('w3', false)] } }); // not controller
    cms.update({ metadata: { name: 'cm', namespace: 'ns', generation: 1, ownerReferences: [owner('w2')] } }); // predicates of the primary do not apply
    secrets.add({ metadata: { name: 's', namespace: 'ns' } });

    const r = run(c);
    await flush();
    assert.deepEqual(reqs.sort(), ['ns/from-s', 'ns/w1', 'ns/w2']);
    reqs.length = 0;
    cms.remove({ metadata: { name: 'cm', namespace: 'ns', ownerReferences: [owner('w2')] } });
    await flush();
    assert.deepEqual(reqs, ['ns/w2'], 'deleting an owned child reconciles its owner');
    await r.stop();
  });

  it('withEventFilter applies to every watch', async () => {
    const { ctx, cache } = setup();
    const reqs: string[] = [];
    const c = controllerFor(ctx, Widgets)
      .named('filtered')
      .owns(ConfigMaps)
      .withEventFilter({ create: (o) => o.metadata.labels?.keep === 'yes' })
      .build(async (req) => {
        reqs.push(keyOf(req));
      });
    cache.of(Widgets).add(widget('w1'));
    cache.of(Widgets).add(widget('w2', { labels: { keep: 'yes' } }));
    cache.of(ConfigMaps).add({ metadata: { name: 'c', namespace: 'ns', ownerReferences: [owner('w3')] } });
    cache.of(ConfigMaps).add({
      metadata: { name: 'd', namespace: 'ns', labels: { keep: 'yes' }, ownerReferences: [owner('w4')] },
    });
    const r = run(c);
    await flush();
    assert.deepEqual(reqs.sort(), ['ns/w2', 'ns/w4']);
    await r.stop();
  });

  it('works with the real Cache over the FakeClient: deleting an owned child reconciles the owner', async () => {
    const client = new FakeClient();
    const cache = new Cache(client);
    const cacheStop = new AbortController();
    const cacheDone = cache.start(cacheStop.signal);
    const ctx: ControllerContext = { cache, client, metrics: new MetricsRegistry() };
    const parent = await client.create(ConfigMaps, { metadata: { name: 'parent', namespace: 'ns' } });
    const seen: string[] = [];
    const c = controllerFor(ctx, ConfigMaps)
      .named('cm-owner')
      .withPredicates({
        create: (o) => o.metadata.name === 'parent',
        update: () => false,
        delete: () => false,
      })
      .owns(ConfigMaps)
      .complete(async (req) => {
        seen.push(keyOf(req));
      });
    const r = run(c);
    const waitFor = async (pred: () => boolean): Promise<void> => {
      for (let i = 0; i < 200 && !pred(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.ok(pred(), `timed out; seen ${JSON.stringify(seen)}`);
    };
    await waitFor(() => seen.includes('ns/parent'));
    seen.length = 0;
    await client.create(ConfigMaps, {
      metadata: {
        name: 'child',
        namespace: 'ns',
        ownerReferences: [
          {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            name: 'parent',
            uid: parent.metadata.uid!,
            controller: true,
          },
        ],
      },
    });
    await waitFor(() => seen.length >= 1);
    seen.length = 0;
    await client.delete(ConfigMaps, { namespace: 'ns', name: 'child' });
    await waitFor(() => seen.includes('ns/parent'));
    await r.stop();
    cacheStop.abort();
    await cacheDone;
  });

  it('runs under the Manager (the manager is the ControllerContext; complete() adds the controller)', async () => {
    const client = new FakeClient();
    const mgr = new Manager({ client, logger: silentLogger() });
    await client.create(ConfigMaps, { metadata: { name: 'a', namespace: 'ns' } });
    const seen: string[] = [];
    const c = controllerFor(mgr, ConfigMaps)
      .named('mgr-test')
      .complete(async (req) => {
        seen.push(keyOf(req));
      });
    const ac = new AbortController();
    const run = mgr.start({ signal: ac.signal, handleSignals: false });
    for (let i = 0; i < 200 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(seen, ['ns/a']);
    const text = await mgr.metrics.text();
    assert.match(text, /controller_runtime_reconcile_total\{controller="mgr-test",result="success"\} 1/);
    assert.equal(c.needLeaderElection, true);
    ac.abort();
    await run;
  });
});

describe('Controller workers and the event loop', () => {
  it('a backlog of reconciles that make no request does not starve the event loop', async () => {
    // Reconciles that read only from the cache and find nothing to write never wait for I/O; the other
    // work of the process (health probes, watch data, timers) must still run while the backlog drains.
    const { informer, build } = setup({ maxConcurrentReconciles: 2 });
    let reconciled = 0;
    const c = build(async () => {
      reconciled++;
    });
    for (let i = 0; i < 200; i++) informer.add(widget(`w${i}`));
    informer.sync();
    const r = run(c);
    const seen = await new Promise<number>((resolve) => setImmediate(() => resolve(reconciled)));
    await eventually('every key reconciled', () => reconciled === 200, { timeoutMs: 30_000 });
    await r.stop();
    assert.ok(seen < 200, `a macrotask ran only after all ${seen} reconciles`);
  });
});
