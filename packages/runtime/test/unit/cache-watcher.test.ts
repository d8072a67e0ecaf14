import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { type ConfigMap, ConfigMaps } from '../../src/api/builtin.ts';
import type { KubeObject } from '../../src/api/object.ts';
import { Backoff } from '../../src/cache/backoff.ts';
import {
  DEFAULT_WATCH_LIST,
  ShortWatchError,
  type WatcherErrorContext,
  type WatcherEvent,
  WatchSilenceError,
  watcher,
} from '../../src/cache/watcher.ts';
import { ConnectionError, GoneError, InvalidError, ServerError } from '../../src/client/errors.ts';
import { ScriptedClient } from '../../src/testing/index.ts';
import { FakeClock } from '../../src/util/clock.ts';

const cm = (name: string, rv: string): ConfigMap => ({
  metadata: { namespace: 'ns', name, uid: `uid-${name}`, resourceVersion: rv },
  data: { rv },
});

type Ev = WatcherEvent<ConfigMap>;

/** Short human form of an event: 'init', 'initApply a@1', 'initDone 10', 'apply a@2', 'delete a@3'. */
function show(ev: Ev): string {
  switch (ev.type) {
    case 'init':
      return 'init';
    case 'initDone':
      return `initDone ${ev.resourceVersion}`;
    default:
      return `${ev.type} ${ev.object.metadata.name}@${ev.object.metadata.resourceVersion}`;
  }
}

async function take(gen: AsyncGenerator<Ev>, n: number, timeoutMs = 2000): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    let timer: NodeJS.Timeout | undefined;
    const r = await Promise.race([
      gen.next(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`timed out after ${out.length} events: ${out.join(', ')}`)),
          timeoutMs,
        );
      }),
    ]);
    clearTimeout(timer);
    if (r.done) throw new Error(`generator ended after ${out.join(', ')}`);
    out.push(show(r.value));
  }
  return out;
}

const tick = () => new Promise((r) => setImmediate(r));

interface Harness {
  client: ScriptedClient;
  clock: FakeClock;
  ac: AbortController;
  errors: { err: unknown; ctx: WatcherErrorContext }[];
  gen: AsyncGenerator<Ev, void, undefined>;
  bookmarks: string[];
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function harness(
  opts: {
    silenceTimeoutMs?: number;
    watchTimeoutSeconds?: number;
    pageSize?: number;
    watchList?: boolean;
  } = {},
): Harness {
  const client = new ScriptedClient();
  const clock = new FakeClock(1_000_000);
  const ac = new AbortController();
  cleanups.push(() => ac.abort());
  const errors: Harness['errors'] = [];
  const bookmarks: string[] = [];
  const gen = watcher(client, ConfigMaps, {
    namespace: 'ns',
    labelSelector: 'app=x',
    signal: ac.signal,
    clock,
    random: () => 0,
    // LIST pages unless a test asks for watchList (whatever OPKIT_WATCH_LIST says).
    watchList: false,
    ...opts,
    onError: (err, ctx) => errors.push({ err, ctx }),
    onBookmark: (rv) => bookmarks.push(rv),
  });
  return { client, clock, ac, errors, gen, bookmarks };
}

/** An empty list at resourceVersion 10, then one event on the watch, taken by the consumer: the watch. */
async function oneEventTaken(h: Harness) {
  h.client.queueList(ConfigMaps, { items: [], resourceVersion: '10' });
  await take(h.gen, 2);
  const next = take(h.gen, 1);
  const w = await h.client.nextWatch();
  w.push({ type: 'ADDED', object: cm('a', '11') });
  await next;
  return w;
}

describe('watcher', () => {
  it('lists (paginated, with selectors), then watches from the list resourceVersion with bookmarks', async () => {
    const h = harness({ pageSize: 2 });
    h.client.queueList(ConfigMaps, { items: [cm('a', '5'), cm('b', '7')], resourceVersion: '10' });
    assert.deepEqual(await take(h.gen, 4), ['init', 'initApply a@5', 'initApply b@7', 'initDone 10']);
    const list = h.client.listCalls[0]!.opts;
    assert.equal(list.limit, 2);
    assert.equal(list.namespace, 'ns');
    assert.equal(list.labelSelector, 'app=x');
    const next = take(h.gen, 3);
    const w = await h.client.nextWatch();
    assert.equal(w.opts.resourceVersion, '10');
    assert.equal(w.opts.allowWatchBookmarks, true);
    assert.equal(w.opts.namespace, 'ns');
    assert.equal(w.opts.labelSelector, 'app=x');
    assert.equal(w.opts.timeoutSeconds, 25, 'random 25-35 s; random() = 0 gives 25 s');
    w.push({ type: 'ADDED', object: cm('c', '11') });
    w.bookmark('12');
    w.push({ type: 'MODIFIED', object: cm('a', '13') }, { type: 'DELETED', object: cm('b', '14') });
    assert.deepEqual(await next, ['apply c@11', 'apply a@13', 'delete b@14']);
    assert.deepEqual(h.bookmarks, ['12']);
    assert.equal(h.errors.length, 0);
  });

  it('hands out each page before fetching the next; an expired continue token lists again, whole', async () => {
    const h = harness({ pageSize: 2 });
    h.client.queueList(ConfigMaps, {
      items: [cm('a', '5'), cm('b', '7')],
      resourceVersion: '10',
      continue: 'p2',
    });
    assert.deepEqual(await take(h.gen, 3), ['init', 'initApply a@5', 'initApply b@7']);
    await tick();
    assert.equal(h.client.listCalls.length, 1, 'page 2 is asked for only when page 1 was taken');
    h.client.queueList(ConfigMaps, { items: [cm('c', '8')], resourceVersion: '10' });
    assert.deepEqual(await take(h.gen, 2), ['initApply c@8', 'initDone 10']);
    assert.equal(h.client.listCalls[1]!.opts.continue, 'p2');
    assert.equal(h.client.listCalls[1]!.opts.limit, 2);
    assert.equal(h.client.listCalls[1]!.opts.labelSelector, 'app=x');

    const g = harness({ pageSize: 1 });
    g.client.queueList(ConfigMaps, { items: [cm('a', '5')], resourceVersion: '10', continue: 'p2' });
    g.client.queueList(ConfigMaps, {
      error: new GoneError({ code: 410, reason: 'Expired', message: 'too old' }),
    });
    g.client.queueList(ConfigMaps, { items: [cm('a', '5'), cm('b', '9')], resourceVersion: '12' });
    assert.deepEqual(await take(g.gen, 6), [
      'init',
      'initApply a@5',
      'init',
      'initApply a@5',
      'initApply b@9',
      'initDone 12',
    ]);
    assert.equal(g.client.listCalls[2]!.opts.limit, undefined, 'the fallback list is not paginated');
    assert.equal(g.client.listCalls[2]!.opts.continue, undefined);
    assert.equal(g.errors.length, 0);
  });

  it('fills in apiVersion/kind on listed objects', async () => {
    const h = harness();
    h.client.queueList(ConfigMaps, { items: [cm('a', '5')], resourceVersion: '10' });
    await take(h.gen, 1);
    const r = await h.gen.next();
    assert.ok(!r.done && r.value.type === 'initApply');
    assert.equal((r.value as { object: KubeObject }).object.apiVersion, 'v1');
    assert.equal((r.value as { object: KubeObject }).object.kind, 'ConfigMap');
  });

  it('picks a random watch timeout between 25 and 35 s per request', async () => {
    const client = new ScriptedClient();
    const ac = new AbortController();
    cleanups.push(() => ac.abort());
    const draws = [0.5, 0.999];
    let i = 0;
    const gen = watcher(client, ConfigMaps, {
      watchList: false,
      signal: ac.signal,
      random: () => draws[i++ % 2]!,
      clock: new FakeClock(),
    });
    client.queueList(ConfigMaps, { items: [], resourceVersion: '1' });
    await take(gen, 2);
    void take(gen, 1).catch(() => {});
    const w = await client.nextWatch();
    assert.equal(w.opts.timeoutSeconds, 30);
  });

  it('re-watches from the last resourceVersion after a clean close, without relisting', async () => {
    const h = harness();
    h.client.queueList(ConfigMaps, { items: [cm('a', '5')], resourceVersion: '10' });
    await take(h.gen, 3);
    const next = take(h.gen, 2);
    const w1 = await h.client.nextWatch();
    w1.push({ type: 'MODIFIED', object: cm('a', '11') });
    w1.bookmark('15');
    w1.close();
    const w2 = await h.client.nextWatch();
    assert.equal(w2.opts.resourceVersion, '15', 'resumes at the bookmark');
    w2.push({ type: 'MODIFIED', object: cm('a', '16') });
    assert.deepEqual(await next, ['apply a@11', 'apply a@16']);
    assert.equal(h.client.listCalls.length, 1, 'no relist');
    assert.equal(h.errors.length, 0);
  });

  it('relists on 410 Gone thrown by the watch', async () => {
    const h = harness();
    h.client.queueList(ConfigMaps, { items: [cm('a', '5')], resourceVersion: '10' });
    await take(h.gen, 3);
    const next = take(h.gen, 6);
    const w1 = await h.client.nextWatch();
    w1.push({ type: 'MODIFIED', object: cm('a', '11') });
    w1.fail(new GoneError({ code: 410, reason: 'Expired', message: 'too old resource version' }));
    await tick();
    h.client.queueList(ConfigMaps, { items: [cm('a', '20'), cm('b', '21')], resourceVersion: '30' });
    const w2 = await h.client.nextWatch();
    assert.equal(w2.opts.resourceVersion, '30', 'watches from the new list');
    w2.push({ type: 'ADDED', object: cm('c', '31') });
    assert.deepEqual(await next, [
      'apply a@11',
      'init',
      'initApply a@20',
      'initApply b@21',
      'initDone 30',
      'apply c@31',
    ]);
    assert.equal(h.client.listCalls.length, 2);
    assert.ok(h.errors[0]!.err instanceof GoneError);
    assert.equal(h.errors[0]!.ctx.action, 'relist');
  });

  it('relists on a 410 delivered as a watch ERROR event', async () => {
    const h = harness();
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '10' });
    await take(h.gen, 2);
    const next = take(h.gen, 3);
    const w1 = await h.client.nextWatch();
    w1.push({ type: 'ERROR', object: { kind: 'Status', status: 'Failure', code: 410, reason: 'Expired' } });
    await tick();
    h.client.queueList(ConfigMaps, { items: [cm('a', '40')], resourceVersion: '50' });
    assert.deepEqual(await next, ['init', 'initApply a@40', 'initDone 50']);
    assert.ok(h.errors[0]!.err instanceof GoneError);
  });

  it('backs off before relisting when relists keep ending in 410 straight away', async () => {
    const h = harness();
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '10' });
    await take(h.gen, 2);
    void take(h.gen, 100).catch(() => {});
    const gone = () => new GoneError({ code: 410 });
    (await h.client.nextWatch()).fail(gone()); // first 410: relist at once
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '11' });
    (await h.client.nextWatch()).fail(gone()); // 410 again, nothing gained since the relist: back off
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '13' });
    await tick();
    await tick();
    assert.equal(h.client.listCalls.length, 2);
    await h.clock.advanceAsync(800);
    const w = await h.client.nextWatch();
    assert.equal(h.client.listCalls.length, 3);
    assert.equal(w.opts.resourceVersion, '13');
  });

  it('also backs off when the server keeps answering with 410 ERROR events right after relists', async () => {
    const h = harness();
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '10' });
    await take(h.gen, 2);
    void take(h.gen, 100).catch(() => {});
    const expired = { type: 'ERROR' as const, object: { kind: 'Status', code: 410, reason: 'Expired' } };
    (await h.client.nextWatch()).push(expired);
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '11' });
    (await h.client.nextWatch()).push(expired);
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '12' });
    await tick();
    await tick();
    assert.equal(h.client.listCalls.length, 2, 'waiting out a backoff before the third list');
    await h.clock.advanceAsync(800);
    await h.client.nextWatch();
    assert.equal(h.client.listCalls.length, 3);
  });

  it('backs off on other watch errors and re-watches from the last resourceVersion (no relist)', async () => {
    const h = harness();
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '10' });
    await take(h.gen, 2);
    const next = take(h.gen, 2);
    const w1 = await h.client.nextWatch();
    w1.push({ type: 'ADDED', object: cm('a', '11') });
    w1.fail(new ServerError({ code: 503 }));
    await tick();
    await tick();
    assert.equal(h.errors.length, 1);
    assert.ok(h.errors[0]!.err instanceof ServerError);
    assert.deepEqual(h.errors[0]!.ctx, {
      phase: 'watch',
      resourceVersion: '11',
      action: 'backoff',
      delayMs: 800,
    });
    assert.equal(h.client.watches.length, 1, 'waits for the backoff');
    await h.clock.advanceAsync(799);
    assert.equal(h.client.watches.length, 1);
    await h.clock.advanceAsync(1);
    const w2 = await h.client.nextWatch();
    assert.equal(w2.opts.resourceVersion, '11');
    // A second failure in a row doubles the delay.
    w2.fail(new ServerError({ code: 500 }));
    await tick();
    await tick();
    assert.equal(h.errors[1]!.ctx.delayMs, 1600);
    await h.clock.advanceAsync(1600);
    const w3 = await h.client.nextWatch();
    assert.equal(w3.opts.resourceVersion, '11');
    w3.push({ type: 'MODIFIED', object: cm('a', '12') });
    assert.deepEqual(await next, ['apply a@11', 'apply a@12']);
    assert.equal(h.client.listCalls.length, 1);
  });

  it('starts the backoff over once a watch delivers again (a flapping link reconnects fast)', async () => {
    const h = harness();
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '10' });
    await take(h.gen, 2);
    const next = take(h.gen, 4);
    const delays: number[] = [];
    let w = await h.client.nextWatch();
    // Three failures in a row without any event: 800, 1600, 3200 ms.
    for (let i = 0; i < 3; i++) {
      w.fail(new ConnectionError('connect ECONNREFUSED', undefined));
      await tick();
      await tick();
      const d = h.errors.at(-1)?.ctx.delayMs ?? 0;
      delays.push(d);
      await h.clock.advanceAsync(d);
      if (i < 2) w = await h.client.nextWatch();
    }
    w = await h.client.nextWatch();
    // The server accepts the watch and it delivers; then the link breaks again: the first delay again.
    for (let i = 0; i < 3; i++) {
      w.push({ type: 'ADDED', object: cm(`c${i}`, String(11 + i)) });
      await tick();
      w.fail(new ConnectionError('read ECONNRESET', undefined));
      await tick();
      await tick();
      const d = h.errors.at(-1)?.ctx.delayMs ?? 0;
      delays.push(d);
      await h.clock.advanceAsync(d);
      if (i < 2) w = await h.client.nextWatch();
    }
    // A refused watch (1600), then an idle one (nothing to deliver) that the server accepted and that
    // broke after 5 s: 800 again.
    w = await h.client.nextWatch();
    w.fail(new ConnectionError('read ECONNRESET', undefined));
    await tick();
    await tick();
    delays.push(h.errors.at(-1)?.ctx.delayMs ?? 0);
    await h.clock.advanceAsync(delays.at(-1) ?? 0);
    w = await h.client.nextWatch();
    await h.clock.advanceAsync(5_000);
    w.fail(new ConnectionError('read ECONNRESET', undefined));
    await tick();
    await tick();
    delays.push(h.errors.at(-1)?.ctx.delayMs ?? 0);
    assert.deepEqual(
      delays,
      [800, 1600, 3200, 800, 800, 800, 1600, 800],
      JSON.stringify(h.errors.map((e) => e.ctx)),
    );
    await h.clock.advanceAsync(800);
    (await h.client.nextWatch()).push({ type: 'ADDED', object: cm('c3', '20') });
    assert.deepEqual(await next, ['apply c0@11', 'apply c1@12', 'apply c2@13', 'apply c3@20']);
  });

  it('waits at most 5 s while the API server cannot be reached; an answering server gets the full backoff, from its first step after an outage', async () => {
    const h = harness();
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '10' });
    await take(h.gen, 2);
    const next = take(h.gen, 1);
    const delays: number[] = [];
    const failNext = async (err: Error) => {
      (await h.client.nextWatch()).fail(err);
      await tick();
      await tick();
      const d = h.errors.at(-1)?.ctx.delayMs ?? 0;
      delays.push(d);
      await h.clock.advanceAsync(d);
    };
    // A long outage: refused connections; the backoff's sequence grows (800 ... 12800) but the wait stops
    // at 5 s, so the watch is re-opened within 5 s of the server's return, not up to 30 s later.
    for (let i = 0; i < 6; i++) await failNext(new ConnectionError('connect ECONNREFUSED', undefined));
    // The server answers, with errors (a restarting API server answers 503 for a moment): the full backoff,
    // not capped, but started over: the outage's long sequence would make the first answer wait 30 s.
    await failNext(new ServerError({ code: 503 }));
    await failNext(new ServerError({ code: 503 }));
    await failNext(new ServerError({ code: 503 }));
    // Unreachable again: the sequence goes on, capped again.
    await failNext(new ConnectionError('read ECONNRESET', undefined));
    await failNext(new ConnectionError('read ECONNRESET', undefined));
    assert.deepEqual(delays, [800, 1600, 3200, 5000, 5000, 5000, 800, 1600, 3200, 5000, 5000]);
    (await h.client.nextWatch()).push({ type: 'ADDED', object: cm('a', '11') });
    assert.deepEqual(await next, ['apply a@11']);
  });

  it('backs off and retries a failed list', async () => {
    const h = harness();
    h.client.queueList(ConfigMaps, { error: new ConnectionError('refused', undefined) });
    const next = take(h.gen, 2);
    await tick();
    await tick();
    assert.equal(h.errors[0]?.ctx.phase, 'list');
    assert.equal(h.errors[0]?.ctx.delayMs, 800);
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '3' });
    assert.equal(h.client.listCalls.length, 1);
    await h.clock.advanceAsync(800);
    assert.deepEqual(await next, ['init', 'initDone 3']);
    assert.equal(h.client.listCalls.length, 2);
  });

  it('aborts a watch that stays silent and re-establishes it from the last resourceVersion', async () => {
    const h = harness({ silenceTimeoutMs: 60_000 });
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '10' });
    await take(h.gen, 2);
    const next = take(h.gen, 1);
    const w1 = await h.client.nextWatch();
    await h.clock.advanceAsync(59_000);
    w1.bookmark('12'); // a bookmark is a sign of life: restarts the silence timer
    await tick();
    await h.clock.advanceAsync(59_000);
    assert.equal(w1.signal?.aborted, false);
    await h.clock.advanceAsync(1_000);
    assert.equal(w1.signal?.aborted, true, 'silent for 60 s: aborted');
    const w2 = await h.client.nextWatch();
    assert.equal(w2.opts.resourceVersion, '12');
    assert.ok(h.errors[0]!.err instanceof WatchSilenceError);
    assert.equal(h.errors[0]!.ctx.action, 'rewatch');
    w2.push({ type: 'ADDED', object: cm('a', '13') });
    assert.deepEqual(await next, ['apply a@13']);
    assert.equal(h.client.listCalls.length, 1);
  });

  it('detects silence even when the client ignores the abort signal', async () => {
    const h = harness({ silenceTimeoutMs: 1000 });
    h.client.respectSignal = false;
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '10' });
    await take(h.gen, 2);
    const next = take(h.gen, 1);
    await h.client.nextWatch();
    await h.clock.advanceAsync(1000);
    const w2 = await h.client.nextWatch();
    w2.push({ type: 'ADDED', object: cm('a', '11') });
    assert.deepEqual(await next, ['apply a@11']);
  });

  it('defaults the silence timeout to the watch timeout (at most 60 s: bookmarks come every minute) plus 10 s', async () => {
    // The default watch timeout (25 s with random() = 0): a half-open connection is found within 35 s.
    for (const [watchTimeoutSeconds, silenceMs] of [
      [undefined, 35_000],
      [20, 30_000],
      [300, 70_000],
    ] as const) {
      const h = harness(watchTimeoutSeconds ? { watchTimeoutSeconds } : {});
      h.client.queueList(ConfigMaps, { items: [], resourceVersion: '10' });
      await take(h.gen, 2);
      void take(h.gen, 1).catch(() => {});
      const w1 = await h.client.nextWatch();
      await h.clock.advanceAsync(silenceMs - 1);
      assert.equal(w1.signal?.aborted, false);
      await h.clock.advanceAsync(1);
      assert.equal(w1.signal?.aborted, true, `silent for ${silenceMs} ms: aborted`);
      assert.match(String(h.errors[0]?.err), /presumed dead; re-opening the watch on a new connection/);
      h.ac.abort();
    }
  });

  it('never presumes a healthy quiet watch dead: the server ends it at its timeout (a bookmark or none before)', async () => {
    const h = harness();
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '10' });
    await take(h.gen, 2);
    void take(h.gen, 1).catch(() => {});
    for (let i = 0; i < 6; i++) {
      const w = await h.client.nextWatch();
      assert.equal(w.opts.timeoutSeconds, 25);
      await h.clock.advanceAsync(23_000);
      if (i % 2 === 0) w.bookmark(String(11 + i));
      await tick();
      await h.clock.advanceAsync(2_000 + 700); // closed 0.7 s late, as measured on a loaded machine
      w.close();
      await tick();
    }
    assert.deepEqual(h.errors, [], 'no watch presumed dead');
    assert.equal(h.client.listCalls.length, 1, 'no relist');
  });

  it('does not count time the consumer spends on an event as silence', async () => {
    const h = harness({ silenceTimeoutMs: 1000 });
    const w1 = await oneEventTaken(h);
    // The consumer is "busy" (does not call next()) for far longer than the silence timeout.
    await h.clock.advanceAsync(10_000);
    assert.equal(w1.signal?.aborted, false);
  });

  it('arms one silence timer per watch, not one per event, and still times the wait in progress', async () => {
    const h = harness({ silenceTimeoutMs: 1000 });
    let armed = 0;
    const setTimeout = h.clock.setTimeout.bind(h.clock);
    h.clock.setTimeout = (fn, ms) => {
      armed++;
      return setTimeout(fn, ms);
    };
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '10' });
    await take(h.gen, 2);
    const next = take(h.gen, 200);
    const w1 = await h.client.nextWatch();
    for (let i = 0; i < 200; i++) w1.push({ type: 'ADDED', object: cm(`o${i}`, String(11 + i)) });
    assert.equal((await next).length, 200);
    assert.ok(armed <= 2, `${armed} timers armed for 200 events`);
    // Waiting again: silent for 999 ms is fine, for 1000 ms (from the start of this wait) it is dead.
    const after = take(h.gen, 1).catch(() => []);
    await h.clock.advanceAsync(600);
    w1.bookmark('300');
    await tick();
    await h.clock.advanceAsync(999);
    assert.equal(w1.signal?.aborted, false, 'a bookmark 999 ms ago: alive');
    await h.clock.advanceAsync(1);
    assert.equal(w1.signal?.aborted, true, 'silent for 1000 ms: aborted');
    h.ac.abort();
    await after;
  });

  it('times silence by the monotonic clock: a wall-clock step forward does not declare a healthy watch dead', async () => {
    // The real default clock, and Date.now() stepping 10 s ahead (NTP, a resumed VM) during a wait.
    const client = new ScriptedClient();
    const ac = new AbortController();
    cleanups.push(() => ac.abort());
    let silentAt: number | undefined;
    const gen = watcher(client, ConfigMaps, {
      signal: ac.signal,
      watchList: false,
      silenceTimeoutMs: 1000,
      onError: (err) => {
        if (err instanceof WatchSilenceError) silentAt ??= performance.now();
      },
    });
    client.queueList(ConfigMaps, { items: [], resourceVersion: '10' });
    await take(gen, 2);
    const next = take(gen, 1, 5000);
    const w = await client.nextWatch();
    await new Promise((r) => setTimeout(r, 300));
    w.push({ type: 'ADDED', object: cm('a', '11') });
    await next;
    const waitFrom = performance.now();
    const after = take(gen, 1, 5000).catch(() => []);
    const realNow = Date.now;
    cleanups.push(() => {
      Date.now = realNow;
    });
    await new Promise((r) => setTimeout(r, 200));
    Date.now = () => realNow() + 10_000;
    const deadline = performance.now() + 5000;
    while (silentAt === undefined && performance.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    Date.now = realNow;
    assert.ok(silentAt !== undefined, 'a watch silent for 1 s is still found');
    // Timers can only be late: never before the whole silence since the wait began.
    assert.ok(
      silentAt - waitFrom >= 990,
      `declared silent ${Math.round(silentAt - waitFrom)} ms into the wait`,
    );
    ac.abort();
    await after;
  });

  it('leaves no silence timer behind when aborted while the consumer holds an event', async () => {
    const h = harness({ silenceTimeoutMs: 1000 });
    await oneEventTaken(h);
    // The generator is paused at its yield and is never resumed: the abort alone must clear the timer.
    assert.equal(h.clock.pendingTimers(), 1);
    h.ac.abort();
    assert.equal(h.clock.pendingTimers(), 0);
  });

  it('treats an immediate empty close as an error (backoff, no hot loop)', async () => {
    const h = harness();
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '10' });
    await take(h.gen, 2);
    void take(h.gen, 1).catch(() => {});
    const w1 = await h.client.nextWatch();
    w1.close();
    await tick();
    await tick();
    assert.ok(h.errors[0]!.err instanceof ShortWatchError);
    assert.equal(h.client.watches.length, 1);
    await h.clock.advanceAsync(800);
    const w2 = await h.client.nextWatch();
    assert.equal(w2.opts.resourceVersion, '10');
  });

  it('returns (without throwing) when the signal aborts, closing the watch', async () => {
    const h = harness();
    h.client.queueList(ConfigMaps, { items: [], resourceVersion: '10' });
    await take(h.gen, 2);
    const pending = h.gen.next();
    const w1 = await h.client.nextWatch();
    h.ac.abort();
    assert.deepEqual(await pending, { done: true, value: undefined });
    assert.equal(w1.signal?.aborted, true);
  });

  it('returns when aborted during a backoff or a list', async () => {
    const h = harness();
    h.client.queueList(ConfigMaps, { error: new ServerError({ code: 503 }) });
    const pending = h.gen.next();
    await tick();
    await tick();
    assert.equal(h.errors.length, 1);
    h.ac.abort();
    assert.deepEqual(await pending, { done: true, value: undefined });

    const h2 = harness();
    const pending2 = h2.gen.next(); // list waits: nothing queued
    await tick();
    h2.ac.abort();
    assert.deepEqual(await pending2, { done: true, value: undefined });
  });

  it('closes the underlying watch when the consumer stops iterating', async () => {
    const h = harness();
    const w1 = await oneEventTaken(h);
    await h.gen.return(undefined);
    assert.equal(w1.signal?.aborted, true);
  });

  it('accepts a shared Backoff instance and honours 429 Retry-After', async () => {
    const { TooManyRequestsError } = await import('../../src/client/errors.ts');
    const client = new ScriptedClient();
    const clock = new FakeClock();
    const ac = new AbortController();
    cleanups.push(() => ac.abort());
    const errors: WatcherErrorContext[] = [];
    const gen = watcher(client, ConfigMaps, {
      watchList: false,
      signal: ac.signal,
      clock,
      backoff: new Backoff({ clock, random: () => 0, initialMs: 100 }),
      onError: (_e, ctx) => errors.push(ctx),
    });
    client.queueList(ConfigMaps, { error: new TooManyRequestsError({ code: 429 }, 5) });
    void take(gen, 1).catch(() => {});
    await tick();
    await tick();
    assert.equal(errors[0]?.delayMs, 5000);
  });

  describe('watchList: the initial state streamed through the watch (sendInitialEvents)', () => {
    const endOfInitial = (rv: string) => ({
      type: 'BOOKMARK' as const,
      object: {
        metadata: { resourceVersion: rv, annotations: { 'k8s.io/initial-events-end': 'true' } },
      },
    });

    it('asks for the initial events instead of listing, ends them at the annotated bookmark, goes on watching', async () => {
      const h = harness({ watchList: true });
      const next = take(h.gen, 5);
      const w = await h.client.nextWatch();
      assert.equal(w.opts.sendInitialEvents, true);
      assert.equal(w.opts.resourceVersion, undefined, 'the current state (a consistent read)');
      assert.equal(w.opts.labelSelector, 'app=x');
      assert.equal(w.opts.namespace, 'ns');
      w.push({ type: 'ADDED', object: cm('a', '5') }, { type: 'ADDED', object: cm('b', '7') });
      w.bookmark('8'); // without the annotation: not the end, and not a resourceVersion to resume at
      w.push(endOfInitial('10'));
      w.push({ type: 'MODIFIED', object: cm('a', '11') });
      assert.deepEqual(await next, ['init', 'initApply a@5', 'initApply b@7', 'initDone 10', 'apply a@11']);
      assert.equal(h.client.listCalls.length, 0, 'no LIST');
      assert.deepEqual(h.bookmarks, [], 'bookmarks among the initial events are not told');
      // Closed at its timeout: re-opened from the last resourceVersion, as an ordinary watch.
      const after = take(h.gen, 1);
      w.close();
      const w2 = await h.client.nextWatch();
      assert.equal(w2.opts.sendInitialEvents, undefined);
      assert.equal(w2.opts.resourceVersion, '11');
      w2.push({ type: 'DELETED', object: cm('b', '12') });
      assert.deepEqual(await after, ['delete b@12']);
      assert.equal(h.errors.length, 0);
    });

    it('starts the initial events over when the watch ends before their end (no resume from the middle)', async () => {
      const h = harness({ watchList: true });
      const next = take(h.gen, 5);
      const w1 = await h.client.nextWatch();
      w1.push({ type: 'ADDED', object: cm('a', '5') });
      w1.fail(new ConnectionError('socket hang up', undefined));
      await tick();
      await tick();
      await h.clock.advanceAsync(800);
      const w2 = await h.client.nextWatch();
      assert.equal(w2.opts.sendInitialEvents, true);
      assert.equal(w2.opts.resourceVersion, undefined);
      w2.push({ type: 'ADDED', object: cm('a', '6') }, endOfInitial('9'));
      assert.deepEqual(await next, ['init', 'initApply a@5', 'init', 'initApply a@6', 'initDone 9']);
      assert.equal(h.errors[0]?.ctx.action, 'backoff');
    });

    it('relists through the initial events after 410 Gone', async () => {
      const h = harness({ watchList: true });
      const next = take(h.gen, 5);
      const w1 = await h.client.nextWatch();
      w1.push(endOfInitial('10'));
      w1.fail(new GoneError({ code: 410, reason: 'Expired', message: 'too old resource version' }));
      const w2 = await h.client.nextWatch();
      assert.equal(w2.opts.sendInitialEvents, true);
      w2.push({ type: 'ADDED', object: cm('a', '20') }, endOfInitial('30'));
      assert.deepEqual(await next, ['init', 'initDone 10', 'init', 'initApply a@20', 'initDone 30']);
      assert.equal(h.client.listCalls.length, 0);
    });

    it('lists from then on when the server refuses sendInitialEvents (the WatchList feature off: 422)', async () => {
      const h = harness({ watchList: true });
      const next = take(h.gen, 3);
      const w1 = await h.client.nextWatch();
      w1.fail(
        new InvalidError({
          code: 422,
          reason: 'Invalid',
          message:
            'sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
        }),
      );
      h.client.queueList(ConfigMaps, { items: [cm('a', '5')], resourceVersion: '10' });
      assert.deepEqual(await next, ['init', 'initApply a@5', 'initDone 10']);
      assert.equal(h.errors[0]?.ctx.action, 'relist');
      assert.ok(h.errors[0]?.err instanceof InvalidError);
      void take(h.gen, 1).catch(() => {});
      const w2 = await h.client.nextWatch();
      assert.equal(w2.opts.sendInitialEvents, undefined);
      assert.equal(w2.opts.resourceVersion, '10');
    });

    it('is on by default (no LIST), unless OPKIT_WATCH_LIST=false', async () => {
      const client = new ScriptedClient();
      const ac = new AbortController();
      cleanups.push(() => ac.abort());
      const gen = watcher(client, ConfigMaps, { signal: ac.signal, clock: new FakeClock() });
      void take(gen, 1).catch(() => {});
      await tick();
      const off = /^(false|0)$/i.test(process.env.OPKIT_WATCH_LIST ?? '');
      assert.equal(DEFAULT_WATCH_LIST, !off);
      assert.equal(client.listCalls.length, off ? 1 : 0);
      if (!off) {
        const w = await client.nextWatch();
        assert.equal(w.opts.sendInitialEvents, true);
        assert.equal(w.opts.allowWatchBookmarks, true, 'the API server requires bookmarks with it');
      }
    });
  });
});
