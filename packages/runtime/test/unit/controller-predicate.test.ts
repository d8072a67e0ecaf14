import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject, ObjectMeta } from '../../src/api/object.ts';
import {
  and,
  annotationChanged,
  generationChanged,
  labelChanged,
  labelSelectorPredicate,
  not,
  or,
  type Predicate,
  passesCreate,
  passesDelete,
  passesGeneric,
  passesUpdate,
  predicateFuncs,
  resourceVersionChanged,
} from '../../src/controller/index.ts';

const obj = (meta: ObjectMeta = {}): KubeObject => ({ metadata: { name: 'a', namespace: 'ns', ...meta } });

/** Runs every event kind through a predicate. */
function all(p: Predicate, o: KubeObject, n: KubeObject = o) {
  return {
    create: passesCreate([p], n),
    update: passesUpdate([p], o, n),
    delete: passesDelete([p], n),
    generic: passesGeneric([p], n),
  };
}

describe('predicates', () => {
  it('an empty predicate and an empty list pass everything', () => {
    assert.deepEqual(all({}, obj()), { create: true, update: true, delete: true, generic: true });
    assert.equal(passesUpdate([], obj(), obj()), true);
  });

  it('generationChanged passes updates only when metadata.generation changed', () => {
    const p = generationChanged();
    assert.equal(
      passesUpdate([p], obj({ generation: 1 }), obj({ generation: 1, resourceVersion: '2' })),
      false,
    );
    assert.equal(passesUpdate([p], obj({ generation: 1 }), obj({ generation: 2 })), true);
    assert.equal(passesUpdate([p], obj({ generation: 1 }), obj({})), true);
    assert.equal(passesCreate([p], obj()), true);
    assert.equal(passesDelete([p], obj()), true);
    assert.equal(passesGeneric([p], obj()), true);
  });

  it('labelChanged and annotationChanged compare maps (missing equals empty)', () => {
    const l = labelChanged();
    assert.equal(passesUpdate([l], obj({ labels: { a: '1' } }), obj({ labels: { a: '1' } })), false);
    assert.equal(passesUpdate([l], obj({}), obj({ labels: {} })), false);
    assert.equal(passesUpdate([l], obj({ labels: { a: '1' } }), obj({ labels: { a: '2' } })), true);
    assert.equal(passesUpdate([l], obj({ labels: { a: '1' } }), obj({ labels: { a: '1', b: '' } })), true);
    const a = annotationChanged();
    assert.equal(
      passesUpdate([a], obj({ annotations: { x: 'y' } }), obj({ annotations: { x: 'y' } })),
      false,
    );
    assert.equal(passesUpdate([a], obj({ annotations: { x: 'y' } }), obj({})), true);
    assert.equal(passesCreate([l, a], obj()), true);
  });

  it('resourceVersionChanged drops resyncs', () => {
    const p = resourceVersionChanged();
    assert.equal(passesUpdate([p], obj({ resourceVersion: '5' }), obj({ resourceVersion: '5' })), false);
    assert.equal(passesUpdate([p], obj({ resourceVersion: '5' }), obj({ resourceVersion: '6' })), true);
  });

  it('labelSelectorPredicate matches every event kind, from a LabelSelector or a string', () => {
    const sel = labelSelectorPredicate({
      matchLabels: { app: 'db' },
      matchExpressions: [
        { key: 'tier', operator: 'In', values: ['a', 'b'] },
        { key: 'legacy', operator: 'DoesNotExist' },
      ],
    });
    const yes = obj({ labels: { app: 'db', tier: 'a' } });
    const no = obj({ labels: { app: 'db', tier: 'c' } });
    assert.deepEqual(all(sel, yes), { create: true, update: true, delete: true, generic: true });
    assert.deepEqual(all(sel, no), { create: false, update: false, delete: false, generic: false });
    assert.equal(passesUpdate([sel], no, yes), true, 'update looks at the new object');
    assert.equal(passesCreate([sel], obj({ labels: { app: 'db', tier: 'b', legacy: 'x' } })), false);
    assert.equal(passesCreate([sel], obj()), false);

    const str = labelSelectorPredicate('app=db,tier in (a,b)');
    assert.equal(passesCreate([str], yes), true);
    assert.equal(passesCreate([str], no), false);
    assert.equal(passesCreate([labelSelectorPredicate({})], obj()), true, 'empty selector matches all');
    assert.equal(
      passesCreate(
        [labelSelectorPredicate({ matchExpressions: [{ key: 'x', operator: 'NotIn', values: ['1'] }] })],
        obj(),
      ),
      true,
    );
    assert.throws(() => labelSelectorPredicate({ matchExpressions: [{ key: 'x', operator: 'In' }] }));
    // What the API server rejects: an upper-case prefix, a value with a leading '-'.
    assert.throws(() => labelSelectorPredicate({ matchLabels: { 'Example.com/a': 'x' } }), /prefix/);
    assert.throws(() => labelSelectorPredicate('Example.com/a=x'), /prefix/);
    assert.throws(
      () => labelSelectorPredicate({ matchExpressions: [{ key: 'a', operator: 'In', values: ['-x'] }] }),
      /label value/,
    );
  });

  it('and / or / not combine predicates per event kind', () => {
    const gen = generationChanged();
    const lab = labelChanged();
    const o = obj({ generation: 1, labels: { a: '1' } });
    const genOnly = obj({ generation: 2, labels: { a: '1' } });
    const labOnly = obj({ generation: 1, labels: { a: '2' } });
    assert.equal(passesUpdate([and(gen, lab)], o, genOnly), false);
    assert.equal(passesUpdate([or(gen, lab)], o, genOnly), true);
    assert.equal(passesUpdate([or(gen, lab)], o, labOnly), true);
    assert.equal(passesUpdate([or(gen, lab)], o, o), false);
    assert.equal(passesUpdate([not(gen)], o, o), true);
    assert.equal(passesUpdate([not(gen)], o, genOnly), false);
    // gen has no create filter, so `not(gen)` rejects creates.
    assert.equal(passesCreate([not(gen)], o), false);
    assert.equal(passesCreate([and()], o), true);
    assert.equal(passesCreate([or()], o), false);
    // A list of predicates is an AND.
    assert.equal(passesUpdate([gen, lab], o, genOnly), false);
  });

  it('predicateFuncs applies one filter to every event', () => {
    const p = predicateFuncs((o) => o.metadata.name === 'keep');
    assert.deepEqual(all(p, obj({ name: 'keep' })), {
      create: true,
      update: true,
      delete: true,
      generic: true,
    });
    assert.deepEqual(all(p, obj({ name: 'drop' })), {
      create: false,
      update: false,
      delete: false,
      generic: false,
    });
  });
});
