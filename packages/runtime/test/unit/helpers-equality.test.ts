import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { deepCopy, deepEqual, isPlainObject, isSubset } from '../../src/helpers/equality.ts';

describe('deepEqual', () => {
  it('compares primitives, arrays and objects structurally', () => {
    assert.equal(deepEqual(1, 1), true);
    assert.equal(deepEqual('a', 'a'), true);
    assert.equal(deepEqual(Number.NaN, Number.NaN), true);
    assert.equal(deepEqual(1, '1'), false);
    assert.equal(deepEqual(null, undefined), false);
    assert.equal(deepEqual([1, 2], [1, 2]), true);
    assert.equal(deepEqual([1, 2], [2, 1]), false);
    assert.equal(deepEqual([1], { 0: 1 }), false);
    assert.equal(deepEqual({ a: { b: [1, { c: 2 }] } }, { a: { b: [1, { c: 2 }] } }), true);
    assert.equal(deepEqual({ a: 1 }, { a: 1, b: 2 }), false);
    assert.equal(deepEqual({ a: 1, b: 2 }, { b: 2, a: 1 }), true);
  });

  it('treats undefined-valued keys as absent', () => {
    assert.equal(deepEqual({ a: 1, b: undefined }, { a: 1 }), true);
    assert.equal(deepEqual({ a: 1 }, { a: 1, b: undefined }), true);
    assert.equal(deepEqual({ a: undefined }, { b: undefined }), true);
  });

  it('compares dates by time and class instances by identity', () => {
    assert.equal(deepEqual(new Date(5), new Date(5)), true);
    assert.equal(deepEqual(new Date(5), new Date(6)), false);
    assert.equal(deepEqual(new Map(), new Map()), false);
  });
});

describe('deepCopy', () => {
  it('copies deeply', () => {
    const original = { a: { b: [1, { c: 2 }] } };
    const copy = deepCopy(original);
    assert.deepEqual(copy, original);
    copy.a.b.push(3);
    assert.equal(original.a.b.length, 2);
  });

  it('copies a frozen (cached) object into a mutable one; Dates, undefined values and other objects too', () => {
    const when = new Date(1_000);
    const original = Object.freeze({
      metadata: Object.freeze({ name: 'a', labels: Object.freeze({ x: '1' }) }),
      spec: Object.freeze({ list: Object.freeze([Object.freeze({ n: 1 }), null, 'x']), gone: undefined }),
      when,
      map: new Map([['k', { v: 1 }]]),
      bare: Object.assign(Object.create(null) as Record<string, unknown>, { z: [1] }),
    });
    const copy = deepCopy(original) as unknown as {
      metadata: { labels: Record<string, string> };
      spec: { list: unknown[]; gone?: undefined };
      when: Date;
      map: Map<string, { v: number }>;
      bare: Record<string, unknown>;
    };
    const { bare: _bare, ...rest } = copy;
    const { bare: _obare, ...orest } = original;
    assert.deepEqual(rest, orest);
    assert.ok(!Object.isFrozen(copy) && !Object.isFrozen(copy.metadata.labels));
    copy.metadata.labels.y = '2';
    (copy.spec.list[0] as { n: number }).n = 2;
    assert.deepEqual(original.metadata.labels, { x: '1' });
    assert.deepEqual(original.spec.list[0], { n: 1 });
    assert.ok('gone' in copy.spec, 'a key whose value is undefined stays, as with structuredClone');
    assert.ok(copy.when instanceof Date && copy.when !== when && copy.when.getTime() === 1_000);
    assert.notEqual(copy.map, original.map);
    assert.deepEqual(copy.map.get('k'), { v: 1 });
    // A null-prototype object becomes a plain one, as with structuredClone.
    assert.equal(Object.getPrototypeOf(copy.bare), Object.prototype);
    assert.deepEqual(copy.bare.z, [1]);
    assert.notEqual(copy.bare.z, original.bare.z);
  });
});

describe('isPlainObject', () => {
  it('accepts only plain objects', () => {
    assert.equal(isPlainObject({}), true);
    assert.equal(isPlainObject(Object.create(null)), true);
    assert.equal(isPlainObject([]), false);
    assert.equal(isPlainObject(null), false);
    assert.equal(isPlainObject(new Date()), false);
  });
});

describe('isSubset', () => {
  const live = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: 'db',
      namespace: 'ns',
      uid: 'u1',
      resourceVersion: '7',
      labels: { app: 'db', extra: 'x' },
    },
    spec: {
      clusterIP: '10.0.0.1',
      type: 'ClusterIP',
      ports: [{ name: 'pg', port: 5432, protocol: 'TCP', targetPort: 5432 }],
    },
  };

  it('ignores fields that live has and desired does not mention', () => {
    const desired = {
      metadata: { name: 'db', labels: { app: 'db' } },
      spec: { ports: [{ name: 'pg', port: 5432 }] },
    };
    assert.equal(isSubset(desired, live), true);
  });

  it('reports a changed value, a missing key and a wrong type', () => {
    assert.equal(isSubset({ spec: { type: 'NodePort' } }, live), false);
    assert.equal(isSubset({ spec: { sessionAffinity: 'None' } }, live), false);
    assert.equal(isSubset({ metadata: { labels: { app: 'db', tier: 'data' } } }, live), false);
    assert.equal(isSubset({ spec: { ports: { name: 'pg' } } }, live), false);
    assert.equal(isSubset({ spec: 'x' }, live), false);
  });

  it('a missing key or undefined in desired matches anything', () => {
    assert.equal(isSubset(undefined, 42), true);
    assert.equal(isSubset({ spec: undefined }, live), true);
    assert.equal(isSubset({}, live), true);
    assert.equal(isSubset({ spec: { type: undefined } }, live), true);
  });

  it('null in desired matches only null or absent', () => {
    assert.equal(isSubset({ spec: { externalName: null } }, live), true);
    assert.equal(isSubset({ spec: { type: null } }, live), false);
    assert.equal(isSubset(null, null), true);
  });

  it('arrays must have the same length, elements compared as subsets in order', () => {
    assert.equal(isSubset([{ a: 1 }], [{ a: 1, b: 2 }]), true);
    assert.equal(isSubset([{ a: 1 }], [{ a: 1 }, { a: 2 }]), false);
    assert.equal(isSubset([{ a: 1 }, { a: 2 }], [{ a: 1 }]), false);
    assert.equal(isSubset([1, 2], [2, 1]), false);
    assert.equal(isSubset([[1, 2]], [[1, 2]]), true);
    assert.equal(isSubset([1], 1), false);
  });

  it('an empty array matches an absent field, but not a non-empty one', () => {
    assert.equal(isSubset({ args: [] }, {}), true);
    assert.equal(isSubset({ args: [] }, { args: null }), true);
    assert.equal(isSubset({ args: [] }, { args: [] }), true);
    assert.equal(isSubset({ args: [] }, { args: ['x'] }), false);
  });

  it('an object, even empty, does not match an absent field', () => {
    assert.equal(isSubset({ emptyDir: {} }, {}), false);
    assert.equal(isSubset({ emptyDir: {} }, { emptyDir: {} }), true);
    assert.equal(isSubset({ emptyDir: {} }, { emptyDir: { medium: 'Memory' } }), true);
  });

  it('leaves numbers and quantity strings alone', () => {
    assert.equal(isSubset({ replicas: 1 }, { replicas: '1' }), false);
    assert.equal(isSubset({ cpu: '1' }, { cpu: 1 }), false);
    assert.equal(isSubset({ cpu: '1000m' }, { cpu: '1' }), false);
    assert.equal(isSubset({ memory: '1024Mi' }, { memory: '1Gi' }), false);
    assert.equal(isSubset({ memory: '1Gi' }, { memory: '1Gi' }), true);
    assert.equal(isSubset({ port: 5432 }, { port: 5432.0 }), true);
  });

  it('zero values do not match absent fields', () => {
    assert.equal(isSubset({ hostNetwork: false }, {}), false);
    assert.equal(isSubset({ replicas: 0 }, {}), false);
    assert.equal(isSubset({ name: '' }, {}), false);
  });

  it('does not see inherited properties of live objects', () => {
    assert.equal(isSubset({ constructor: 'x' }, {}), false);
    assert.equal(isSubset({ toString: null }, {}), true);
  });
});
