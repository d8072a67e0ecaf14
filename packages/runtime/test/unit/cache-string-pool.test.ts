import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { type ConfigMap, ConfigMaps, Secrets } from '../../src/api/builtin.ts';
import { Cache, forResource } from '../../src/cache/cache.ts';
import { Reflector } from '../../src/cache/reflector.ts';
import { StringPool } from '../../src/cache/string-pool.ts';
import { FakeClient } from '../../src/testing/fake-client.ts';
import { ScriptedClient } from '../../src/testing/index.ts';
import { deepFreezeJson, type StringInterner } from '../../src/util/freeze.ts';

describe('StringPool', () => {
  it('hands back the first copy of an equal long string, and leaves short ones alone', () => {
    const pool = new StringPool({ minLength: 8 });
    const long = 'abcdefghij';
    assert.equal(pool.intern(long), long);
    assert.equal(pool.intern('short'), 'short');
    assert.equal(pool.intern(`abcde${'fghij'}`), long);
    assert.deepEqual(pool.stats(), { strings: 1, chars: 10, hits: 1, charsShared: 10, resets: 0 });
  });

  it('holds at most maxChars characters: starts over when full, never holds a string larger than that', () => {
    const pool = new StringPool({ minLength: 4, maxChars: 10 });
    pool.intern('aaaa');
    pool.intern('bbbb');
    assert.deepEqual(pool.stats(), { strings: 2, chars: 8, hits: 0, charsShared: 0, resets: 0 });
    pool.intern('cccc');
    assert.deepEqual(pool.stats(), { strings: 1, chars: 4, hits: 0, charsShared: 0, resets: 1 });
    assert.equal(pool.intern('x'.repeat(11)), 'x'.repeat(11));
    assert.equal(pool.stats().strings, 1, 'a string over maxChars is not held');
  });

  it('holds at most 4 strings of one length above 16383 characters (V8 hashes those by their length)', () => {
    const pool = new StringPool();
    const of = (c: string) => `${c}${'x'.repeat(20_000)}`;
    for (const c of 'abcdef') pool.intern(of(c));
    assert.equal(pool.stats().strings, 4);
    assert.equal(pool.intern(of('a')), of('a'));
    assert.equal(pool.stats().hits, 1, 'the ones held are still shared');
    pool.intern('y'.repeat(20_002));
    assert.equal(pool.stats().strings, 5, 'another length is held');
  });

  it('refuses options that make no sense, naming the option', () => {
    assert.throws(() => new StringPool({ minLength: 0 }), /stringPool\.minLength/);
    assert.throws(
      () => new StringPool({ minLength: 100, maxChars: 10 }),
      /stringPool\.maxChars \(10\).*minLength \(100\)/,
    );
  });
});

describe('deepFreezeJson with a string interner', () => {
  const upper: StringInterner = { minLength: 5, intern: (s) => s.toUpperCase() };

  it("puts the interner's copy of every long string value in place (objects and arrays, any depth), keys untouched", () => {
    const value = JSON.parse(
      JSON.stringify({
        longkey1: 'value-one',
        short: 'abc',
        nested: { list: ['value-two', 'ab', { deeper: 'value-three' }], n: 12345 },
      }),
    ) as {
      longkey1: string;
      short: string;
      nested: { list: [string, string, { deeper: string }]; n: number };
    };
    deepFreezeJson(value, upper);
    assert.deepEqual(value, {
      longkey1: 'VALUE-ONE',
      short: 'abc',
      nested: { list: ['VALUE-TWO', 'ab', { deeper: 'VALUE-THREE' }], n: 12345 },
    });
    assert.ok(Object.isFrozen(value) && Object.isFrozen(value.nested) && Object.isFrozen(value.nested.list));
    assert.ok(Object.isFrozen(value.nested.list[2]));
  });

  it('keeps holes, leaves an already frozen part alone, and ends on a cycle', () => {
    const holes: unknown[] = ['value-one'];
    holes[2] = 'value-two';
    const frozen = Object.freeze({ text: 'kept-as-is' });
    const cyclic: Record<string, unknown> = { text: 'value-cyc', holes, frozen };
    cyclic.self = cyclic;
    deepFreezeJson(cyclic, upper);
    assert.equal(1 in holes, false, 'a hole stays a hole');
    assert.deepEqual([holes[0], holes[2]], ['VALUE-ONE', 'VALUE-TWO']);
    assert.equal(frozen.text, 'kept-as-is');
    assert.equal(cyclic.text, 'VALUE-CYC');
    assert.ok(Object.isFrozen(cyclic) && Object.isFrozen(holes));
    // Without an interner too (the freeze order is the same).
    const again: Record<string, unknown> = { a: { b: 1 } };
    again.self = again;
    deepFreezeJson(again);
    assert.ok(Object.isFrozen(again.a));
  });
});

describe('Reflector: equal long strings of stored objects share one copy', () => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  // 200 ConfigMaps, each parsed from its own JSON (as each watch event is), carrying the same 40 KB script.
  const script = `#!/bin/sh\n${'echo "a line of a script that every Database carries"\n'.repeat(800)}`;
  const texts = Array.from({ length: 200 }, (_, i) =>
    JSON.stringify({
      metadata: { namespace: 'ns', name: `cm-${i}`, uid: `u${i}`, resourceVersion: String(i + 1) },
      data: { 'instance.sh': script, name: `cm-${i}` },
    }),
  );
  function heapAfterStoring(r: Reflector<ConfigMap>): number {
    gc();
    const before = process.memoryUsage().heapUsed;
    r.apply({ type: 'init' });
    for (const t of texts) r.apply({ type: 'initApply', object: JSON.parse(t) as ConfigMap });
    r.apply({ type: 'initDone', resourceVersion: '200' });
    gc();
    return process.memoryUsage().heapUsed - before;
  }
  const scriptMiB = (200 * script.length) / 2 ** 20;

  it('by default: 200 copies of a 40 KB script cost about one', () => {
    const r = new Reflector(new ScriptedClient(), ConfigMaps);
    const grew = heapAfterStoring(r);
    assert.equal(r.store.size, 200);
    assert.equal(r.store.get('ns/cm-7')?.data?.['instance.sh'], script);
    assert.equal(r.stringPoolStats()?.hits, 199);
    assert.ok(
      grew < 2 * 2 ** 20,
      `the heap grew ${(grew / 2 ** 20).toFixed(1)} MiB (the scripts: ${scriptMiB.toFixed(1)} MiB)`,
    );
  });

  it('with stringPool: false every object keeps its own copy (what the default saves)', () => {
    const r = new Reflector(new ScriptedClient(), ConfigMaps, { stringPool: false });
    const grew = heapAfterStoring(r);
    assert.equal(r.stringPoolStats(), undefined);
    assert.ok(grew > 0.9 * scriptMiB * 2 ** 20, `the heap grew ${(grew / 2 ** 20).toFixed(1)} MiB`);
  });

  it('a user transform gets no pool (its objects need not be JSON data); pool options with one are an error', () => {
    const r = new Reflector(new ScriptedClient(), ConfigMaps, { transform: (o) => o });
    assert.equal(r.stringPoolStats(), undefined);
    assert.throws(
      () =>
        new Reflector(new ScriptedClient(), ConfigMaps, {
          transform: (o) => o,
          stringPool: { minLength: 10 },
        }),
      /stringPool applies only with the default transform \(core\/v1\/configmaps has its own\)/,
    );
  });

  it("asks the client for deep-frozen objects through its pool (the decoder's freezing), and stores what comes frozen as it is", async () => {
    // An empty LIST, then the watch (watchList's initial events: cache-watcher.test.ts).
    const opened = async (r: Reflector<ConfigMap>, client: ScriptedClient) => {
      client.queueList(r.resource, { items: [], resourceVersion: '1' });
      const ac = new AbortController();
      const running = r.run(ac.signal);
      const w = await client.nextWatch();
      const stop = (): Promise<void> => {
        ac.abort();
        return running;
      };
      return { w, stop };
    };
    const client = new ScriptedClient();
    const errors: unknown[] = [];
    const r = new Reflector(client, ConfigMaps, { watchList: false, onError: (e) => errors.push(e) });
    const { w, stop } = await opened(r, client);
    const strings = w.opts.deepFreeze?.strings;
    assert.ok(strings, 'the default transform: frozen, through the pool');
    // What a client that honours the hint delivers: frozen, its long strings through the pool.
    const delivered = (i: number) =>
      deepFreezeJson(
        JSON.parse(texts[i] as string) as ConfigMap & { kind: string; apiVersion: string },
        strings,
      );
    const first = delivered(0);
    w.push({ type: 'ADDED', object: { ...first, kind: 'ConfigMap', apiVersion: 'v1' } });
    w.push({ type: 'ADDED', object: delivered(1) });
    for (let i = 0; i < 50 && r.store.size < 2; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    assert.deepEqual(errors, []);
    assert.equal(r.store.size, 2, 'with or without kind and apiVersion');
    assert.equal(r.stringPoolStats()?.hits, 1, 'the second copy of the script came from the pool');
    assert.ok(Object.isFrozen(r.store.get('ns/cm-1')?.data));
    await stop();

    const own = new ScriptedClient();
    const { w: ownWatch, stop: stopOwn } = await opened(
      new Reflector(own, ConfigMaps, { transform: (o) => o, watchList: false }),
      own,
    );
    assert.equal(ownWatch.opts.deepFreeze, undefined, 'a transform of your own gets mutable objects');
    await stopOwn();
    const secrets = new ScriptedClient();
    const { w: secretWatch, stop: stopSecrets } = await opened(
      new Reflector(secrets, Secrets, { watchList: false }) as unknown as Reflector<ConfigMap>,
      secrets,
    );
    assert.deepEqual(secretWatch.opts.deepFreeze, {}, 'Secrets: frozen, not pooled');
    await stopSecrets();
  });

  it('Secrets are not pooled unless their options ask for it', () => {
    assert.equal(new Reflector(new ScriptedClient(), Secrets).stringPoolStats(), undefined);
    assert.ok(new Reflector(new ScriptedClient(), Secrets, { stringPool: {} }).stringPoolStats());
  });

  it("the Cache passes its stringPool to its informers, a resource's own first", () => {
    const on = new Cache(new FakeClient());
    assert.ok(on.getInformer(ConfigMaps).stringPoolStats(), 'on by default');
    assert.equal(on.getInformer(Secrets).stringPoolStats(), undefined, 'but not for Secrets');
    const off = new Cache(new FakeClient(), {
      stringPool: false,
      byResource: [forResource(Secrets, { stringPool: { minLength: 2048 } })],
    });
    assert.equal(off.getInformer(ConfigMaps).stringPoolStats(), undefined);
    assert.ok(off.getInformer(Secrets).stringPoolStats());
  });
});
