import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigMaps } from '../../src/api/builtin.ts';
import {
  canonicalLabelSelector,
  fieldMatcher,
  labelMatcher,
  parseFieldSelector,
  parseLabelSelector,
  SelectorParseError,
} from '../../src/cache/selector.ts';
import { BadRequestError } from '../../src/client/errors.ts';
import { FakeClient } from '../../src/testing/fake-client.ts';

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
  it('validates keys and values like the API server (labels.Parse)', () => {
    const rejected = [
      'Example.com/a=1', // a prefix is a lower-case DNS subdomain
      'example.com/=1',
      '/a=1',
      'a/b/c=1',
      `${'x'.repeat(64)}=1`, // names and values are at most 63 characters
      `a=${'x'.repeat(64)}`,
      `${'x'.repeat(254)}/a=1`, // a prefix is at most 253
      'a=-x',
      'a>-1', // Gt/Lt values are label values too
      'a>x',
      'a>9223372036854775808', // beyond int64
      'a>',
      '!a=1',
      'a in (x',
      'a in (x))',
      'a b',
      'a,',
      ',a',
      'a=1 b=2',
    ];
    for (const sel of rejected) assert.throws(() => parseLabelSelector(sel), SelectorParseError, sel);
    const accepted = [
      'example.com/a=1',
      `${'x'.repeat(63)}=${'y'.repeat(63)}`,
      'A_b.C-d=E_f.G-h',
      'a in ()', // the empty value, as labels.Parse reads it
      'a in (,x)',
      'in=notin', // keywords are identifiers where a key or value is expected
      'a in(x)',
      ' a = 1 , b ',
      'a>007',
      'a<9223372036854775807',
    ];
    for (const sel of accepted) assert.doesNotThrow(() => parseLabelSelector(sel), sel);
    assert.equal(m('a in ()', { a: '' }), true);
    assert.equal(m('a>007', { a: '8' }), true);
  });
  it('is the parser of the fake client too: it answers 400 where the API server does', async () => {
    const fake = new FakeClient();
    await assert.rejects(fake.list(ConfigMaps, { labelSelector: 'Example.com/a=1' }), BadRequestError);
    await assert.rejects(fake.list(ConfigMaps, { labelSelector: 'a>-1' }), BadRequestError);
    assert.equal((await fake.list(ConfigMaps, { labelSelector: 'example.com/a=1' })).items.length, 0);
  });
  it('has one canonical form per set of requirements', () => {
    assert.equal(canonicalLabelSelector('b, a==1'), canonicalLabelSelector('a in (1),b'));
    assert.equal(canonicalLabelSelector('a in (y,x)'), canonicalLabelSelector('a in (x, y, x)'));
    assert.notEqual(canonicalLabelSelector('a=1'), canonicalLabelSelector('a!=1'));
    assert.equal(canonicalLabelSelector(' '), '');
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
  it('parses like the API server (fields.ParseSelector): escapes, nothing trimmed, empty terms skipped', () => {
    assert.deepEqual(parseFieldSelector('metadata.name=a\\,b\\=c\\\\,,metadata.namespace!=x'), [
      { path: ['metadata', 'name'], op: '=', value: 'a,b=c\\' },
      { path: ['metadata', 'namespace'], op: '!=', value: 'x' },
    ]);
    assert.deepEqual(parseFieldSelector('status.phase=='), [
      { path: ['status', 'phase'], op: '=', value: '' },
    ]);
    for (const sel of ['a=b=c', 'a=b\\', 'a=b\\x', '=x', 'metadata.name = x', ' ', 'a']) {
      assert.throws(() => parseFieldSelector(sel), SelectorParseError, sel);
    }
    assert.equal(fieldMatcher('metadata.name=x\\,y')({ metadata: { name: 'x,y' } }), true);
  });
});
