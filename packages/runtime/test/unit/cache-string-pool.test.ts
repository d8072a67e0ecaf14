import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { type ConfigMap, ConfigMaps } from '../../src/api/builtin.ts';
import { Reflector } from '../../src/cache/reflector.ts';
import { StringPool } from '../../src/cache/string-pool.ts';
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

  it('refuses options that make no sense, naming the option', () => {
    assert.throws(() => new StringPool({ minLength: 0 }), /minLength/);
    assert.throws(() => new StringPool({ minLength: 100, maxChars: 10 }), /maxChars/);
  });
});

describe('deepFreezeJson with a string interner', () => {
  it('passes every long string value (objects and arrays, at any depth) through it, and no key', () => {
    const seen: string[] = [];
    const interner: StringInterner = {
      minLength: 5,
      intern: (s) => {
        seen.push(s);
        return s;
      },
    };
    const text = JSON.stringify({
      longkey1: 'value-one',
      short: 'abc',
      nested: { list: ['value-two', 'ab', { deeper: 'value-three' }], n: 12345 },
    });
    const value: unknown = deepFreezeJson(JSON.parse(text), interner);
    assert.deepEqual(seen.sort(), ['value-one', 'value-three', 'value-two']);
    assert.deepEqual(value, JSON.parse(text));
    assert.ok(Object.isFrozen(value));
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

  it('a user transform gets no pool (its objects need not be JSON data)', () => {
    const r = new Reflector(new ScriptedClient(), ConfigMaps, { transform: (o) => o });
    assert.equal(r.stringPoolStats(), undefined);
  });
});
