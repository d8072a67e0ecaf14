/**
 * The fake client's eventDelivery option: each watch stream gets its events with its own delay, in order.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ConfigMap, ConfigMaps, Secrets } from '../../src/api/builtin.ts';
import type { KubeObject, WatchEvent } from '../../src/api/object.ts';
import { Cache } from '../../src/cache/cache.ts';
import { eventually, FakeClient, type FakeWatchInfo, randomDelays } from '../../src/testing/index.ts';

const cm = (name: string, v: string): ConfigMap => ({
  metadata: { namespace: 'default', name },
  data: { v },
});
const summary = (events: WatchEvent<KubeObject>[]): string[] =>
  events.map((e) => `${e.type} ${e.object.metadata.name} ${e.object.metadata.resourceVersion}`);

/** Reads a stream in the background; `events` grows as they arrive. */
function collect(stream: AsyncIterable<WatchEvent<ConfigMap>>): {
  events: WatchEvent<ConfigMap>[];
  ended: Promise<void>;
} {
  const events: WatchEvent<ConfigMap>[] = [];
  const ended = (async () => {
    for await (const event of stream) events.push(event);
  })();
  return { events, ended };
}

async function writes(fake: FakeClient): Promise<void> {
  const a = await fake.create(ConfigMaps, cm('a', '1'));
  await fake.create(ConfigMaps, cm('b', '1'));
  await fake.update(ConfigMaps, { ...a, data: { v: '2' } });
  await fake.delete(ConfigMaps, { namespace: 'default', name: 'b' });
}

/** Lets pending I/O callbacks and microtasks run (not timers that are due later). */
const ticks = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

describe('FakeClient: eventDelivery (per-watch delays)', () => {
  it('two watches of one resource get the same events in order, each when its own delay says', async () => {
    const asked: FakeWatchInfo[] = [];
    const fake = new FakeClient({
      eventDelivery: {
        delayMs: (watch) => {
          asked.push(watch);
          return watch.index === 0 ? 0 : 3_600_000; // the second stream: an hour late
        },
      },
    });
    const prompt = collect(fake.watch(ConfigMaps, { namespace: 'default' }));
    const late = collect(fake.watch(ConfigMaps, { labelSelector: '' }));
    await ticks(); // both streams are open
    await writes(fake);
    await ticks();

    const expected = ['ADDED a 1', 'ADDED b 2', 'MODIFIED a 3', 'DELETED b 4'];
    assert.deepEqual(summary(prompt.events), expected);
    assert.deepEqual(late.events, [], 'the delayed stream has seen nothing yet');
    assert.deepEqual(
      [...new Set(asked.map((w) => `${w.index} ${w.resource.plural} ${w.namespace ?? '*'}`))],
      ['0 configmaps default', '1 configmaps *'],
    );

    // A stream that ends cleanly hands out what was sent before its end.
    fake.closeWatches();
    await Promise.all([prompt.ended, late.ended]);
    assert.deepEqual(summary(late.events), expected);
  });

  it('delivers once the delay is over, never out of order even when a later event has a shorter delay', async () => {
    let n = 0;
    // The second stream's first event takes 200 ms, the ones after it none: they still come after it.
    const fake = new FakeClient({
      eventDelivery: { delayMs: (watch) => (watch.index === 0 ? 0 : n++ === 0 ? 200 : 0) },
    });
    const prompt = collect(fake.watch(ConfigMaps));
    const late = collect(fake.watch(ConfigMaps));
    await ticks();
    await writes(fake);
    await eventually('the delayed events', () => late.events.length === 4, { timeoutMs: 30_000 });
    assert.deepEqual(summary(late.events), summary(prompt.events));
    fake.closeWatches();
  });

  it('randomDelays: reproducible per seed, each stream its own draws, order kept', async () => {
    const draws = (seed: number): number[] => {
      const d = randomDelays({ maxMs: 50, seed });
      const w0: FakeWatchInfo = { resource: ConfigMaps, index: 0 };
      const w1: FakeWatchInfo = { resource: ConfigMaps, index: 1 };
      const e: WatchEvent<KubeObject> = { type: 'ADDED', object: cm('a', '1') };
      return [d.delayMs(w0, e), d.delayMs(w1, e), d.delayMs(w0, e), d.delayMs(w1, e)];
    };
    assert.deepEqual(draws(7), draws(7));
    assert.notDeepEqual(draws(7), draws(8));
    assert.ok(draws(7).every((ms) => ms >= 0 && ms < 50));

    const fake = new FakeClient({ eventDelivery: randomDelays({ maxMs: 40, seed: 1 }) });
    const streams = [
      collect(fake.watch(ConfigMaps)),
      collect(fake.watch(ConfigMaps)),
      collect(fake.watch(ConfigMaps)),
    ];
    await ticks();
    for (let i = 0; i < 10; i++) await fake.create(ConfigMaps, cm(`c${i}`, '1'));
    await eventually('every stream to get its events', () => streams.every((s) => s.events.length === 10), {
      timeoutMs: 30_000,
    });
    const expected = Array.from({ length: 10 }, (_, i) => `ADDED c${i} ${i + 1}`);
    for (const s of streams) assert.deepEqual(summary(s.events), expected);
    fake.closeWatches();
  });

  it('an aborted stream drops what it still held', async () => {
    const fake = new FakeClient({ eventDelivery: { delayMs: () => 3_600_000 } });
    const stop = new AbortController();
    const stream = collect(fake.watch(ConfigMaps, { signal: stop.signal }));
    await ticks();
    await writes(fake);
    stop.abort();
    await stream.ended;
    assert.deepEqual(stream.events, []);
    assert.equal(fake.activeWatches(), 0);
  });

  it("lets one informer's cache be behind another's, as on a cluster", async () => {
    const fake = new FakeClient({
      eventDelivery: { delayMs: (watch) => (watch.resource === Secrets ? 3_600_000 : 0) },
    });
    // LIST pages: lists are not delayed (initial events streamed through the delayed watch would be).
    const cache = new Cache(fake, { watchList: false });
    const stop = new AbortController();
    const running = cache.start(stop.signal);
    await cache.list(ConfigMaps);
    await cache.list(Secrets); // both informers synced
    await fake.create(Secrets, { metadata: { namespace: 'default', name: 's' } });
    await fake.create(ConfigMaps, cm('c', '1'));
    const key = { namespace: 'default', name: 'c' };
    await eventually('the ConfigMap in the cache', () => cache.get(ConfigMaps, key), { timeoutMs: 30_000 });
    assert.equal(
      await cache.get(Secrets, { namespace: 'default', name: 's' }),
      undefined,
      'the Secrets informer has not seen the Secret created before the ConfigMap',
    );
    stop.abort();
    await running;
  });
});
