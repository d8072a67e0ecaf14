/** The shared helpers of util/: one of each, used instead of per-file copies. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { ConfigMaps } from '../../src/api/builtin.ts';
import { GoneError, TooManyRequestsError } from '../../src/client/errors.ts';
import { aborted, abortReason } from '../../src/util/abort.ts';
import { causeChain, findCause, messageOf } from '../../src/util/errors.ts';
import { deepFreeze, deepFreezeJson } from '../../src/util/freeze.ts';
import { nodeHttp } from '../../src/util/node-http.ts';
import { withTypeMeta } from '../../src/util/type-meta.ts';

describe('util helpers', () => {
  test('withTypeMeta fills missing or empty apiVersion/kind without touching the (maybe frozen) object', () => {
    const bare = Object.freeze({ metadata: { name: 'a' } });
    const typed = withTypeMeta(ConfigMaps, bare);
    assert.deepEqual(typed, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a' } });
    assert.notEqual(typed, bare);
    assert.equal('kind' in bare, false);
    const empty = withTypeMeta(ConfigMaps, { apiVersion: '', kind: 'ConfigMap', metadata: { name: 'b' } });
    assert.equal(empty.apiVersion, 'v1');
    const complete = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' } };
    assert.equal(withTypeMeta(ConfigMaps, complete), complete, 'a complete object is returned as is');
  });

  test('deepFreeze freezes nested objects and arrays in place and returns the value', () => {
    const sym = Symbol('s');
    const v = { a: { b: [{ c: 1 }] }, [sym]: { d: 2 } };
    assert.equal(deepFreeze(v), v);
    assert.ok(Object.isFrozen(v.a.b[0]));
    assert.ok(Object.isFrozen(v[sym]));
    assert.equal(deepFreeze(null), null);
    assert.equal(deepFreeze(3), 3);
  });

  test('deepFreezeJson freezes JSON data as deepFreeze does; non-plain objects inside go to deepFreeze', () => {
    const isDeepFrozen = (v: unknown): boolean =>
      typeof v !== 'object' || v === null || (Object.isFrozen(v) && Object.values(v).every(isDeepFrozen));
    const text = JSON.stringify({
      metadata: { name: 'a', labels: { x: 'y' }, ownerReferences: [{ uid: 'u', controller: true }] },
      spec: { replicas: 2, template: { spec: { containers: [{ args: ['a', 'b'], env: [{ name: 'N' }] }] } } },
      data: [[1, [2, { deep: null }]], {}],
    });
    const parsed: unknown = JSON.parse(text);
    assert.equal(deepFreezeJson(parsed), parsed);
    assert.ok(isDeepFrozen(parsed));
    assert.deepEqual(parsed, JSON.parse(text));
    // A class instance, a Map and a null-prototype object inside: frozen like deepFreeze does (symbol keys too).
    const sym = Symbol('s');
    class Box {
      inner = { n: 1 };
      [sym] = { m: 2 };
    }
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, { p: { q: 1 } });
    const mixed = { box: new Box(), when: new Date(0), map: new Map([['k', 1]]), bare };
    deepFreezeJson(mixed);
    assert.ok(Object.isFrozen(mixed.box.inner) && Object.isFrozen(mixed.box[sym]));
    assert.ok(Object.isFrozen(mixed.when) && Object.isFrozen(mixed.map) && Object.isFrozen(bare.p));
    // An object already frozen is taken as deeply frozen (as deepFreeze does).
    const shared = Object.freeze({ inner: { n: 1 } });
    deepFreezeJson({ shared });
    assert.equal(Object.isFrozen(shared.inner), false);
    assert.equal(deepFreezeJson(null), null);
    assert.equal(deepFreezeJson('s'), 's');
  });

  test('aborted resolves on abort (at once if already aborted); abortReason keeps Error reasons', async () => {
    await aborted(AbortSignal.abort());
    const ac = new AbortController();
    let done = false;
    const p = aborted(ac.signal).then(() => {
      done = true;
    });
    await new Promise((r) => setImmediate(r));
    assert.equal(done, false);
    ac.abort(new Error('stop'));
    await p;
    assert.equal(abortReason(ac.signal).message, 'stop');
    const other = new AbortController();
    other.abort('a string');
    assert.equal(abortReason(other.signal).name, 'AbortError');
  });

  test('messageOf and the cause chain (cycles end it)', () => {
    assert.equal(messageOf(new Error('boom')), 'boom');
    assert.equal(messageOf('plain'), 'plain');
    const limited = new TooManyRequestsError({ kind: 'Status', code: 429, message: 'slow down' }, 429);
    const outer = new Error('reconcile failed', { cause: new Error('write failed', { cause: limited }) });
    assert.deepEqual(
      [...causeChain(outer)].map((e) => e.message),
      ['reconcile failed', 'write failed', 'slow down'],
    );
    assert.equal(findCause(outer, TooManyRequestsError), limited);
    assert.equal(findCause(outer, GoneError), undefined);
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    (a as { cause?: unknown }).cause = b;
    assert.equal([...causeChain(a)].length, 2);
  });

  test('nodeHttp is node:http; importing the runtime does not load undici (an ESM import of node:http would)', async () => {
    assert.equal(nodeHttp, (await import('node:http')).default);
    const index = new URL('../../src/index.ts', import.meta.url).href;
    const script = `await import(${JSON.stringify(index)}); console.log(JSON.stringify(process.moduleLoadList.filter((m) => m.includes('undici'))));`;
    const loaded: unknown = JSON.parse(
      execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' }),
    );
    assert.deepEqual(loaded, []);
  });
});
