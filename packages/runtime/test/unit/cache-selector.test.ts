import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  fieldMatcher,
  labelMatcher,
  parseLabelSelector,
  SelectorParseError,
} from '../../src/cache/selector.ts';

describe('label selectors', () => {
  const m = (sel: string, labels?: Record<string, string>) => labelMatcher(sel)(labels);
  it('matches equality, inequality, sets, existence and comparisons', () => {
    assert.equal(m('', { a: '1' }), true);
    assert.equal(m('a=1', { a: '1' }), true);
    assert.equal(m('a==1', { a: '2' }), false);
    assert.equal(m('a!=1', {}), true);
    assert.equal(m('a!=1', { a: '1' }), false);
    assert.equal(m('a in (1, 2),b', { a: '2', b: '' }), true);
    assert.equal(m('a in (1,2)', {}), false);
    assert.equal(m('a notin (1,2)', {}), true);
    assert.equal(m('a notin (1,2)', { a: '1' }), false);
    assert.equal(m('!a', { b: '1' }), true);
    assert.equal(m('!a', { a: '1' }), false);
    assert.equal(m('app.kubernetes.io/name=db', { 'app.kubernetes.io/name': 'db' }), true);
    assert.equal(m('n>3', { n: '4' }), true);
    assert.equal(m('n<3', { n: '4' }), false);
    assert.equal(m('a=', { a: '' }), true);
    assert.equal(m('a', undefined), false);
  });
  it('parses into requirements and rejects garbage', () => {
    assert.deepEqual(parseLabelSelector('a=1, b notin (x)'), [
      { key: 'a', op: 'in', values: ['1'] },
      { key: 'b', op: 'notIn', values: ['x'] },
    ]);
    assert.throws(() => parseLabelSelector('a=1,,b'), SelectorParseError);
    assert.throws(() => parseLabelSelector('a in 1'), SelectorParseError);
    assert.throws(() => parseLabelSelector('-a=1'), SelectorParseError);
  });
});

describe('field selectors', () => {
  const obj = { metadata: { name: 'x', namespace: 'ns' }, status: { phase: 'Running' } };
  it('matches dotted paths with = and !=', () => {
    assert.equal(fieldMatcher('metadata.name=x')(obj), true);
    assert.equal(fieldMatcher('metadata.name==x,metadata.namespace!=other')(obj), true);
    assert.equal(fieldMatcher('status.phase=Pending')(obj as never), false);
    assert.equal(fieldMatcher('spec.nodeName=')(obj), true, 'missing fields are empty strings');
    assert.equal(fieldMatcher(undefined)(obj), true);
    assert.throws(() => fieldMatcher('metadata.name'), SelectorParseError);
  });
});
