import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseQuantity } from '../../src/storage/quantity.ts';

test('parses binary, decimal and exponent quantities', () => {
  assert.equal(parseQuantity('1Gi'), 2 ** 30);
  assert.equal(parseQuantity('10Gi'), 10 * 2 ** 30);
  assert.equal(parseQuantity('500M'), 5e8);
  assert.equal(parseQuantity('1.5Ki'), 1536);
  assert.equal(parseQuantity('100m'), 0.1);
  assert.equal(parseQuantity('1e3'), 1000);
  assert.equal(parseQuantity('42'), 42);
  assert.ok(parseQuantity('2Gi') > parseQuantity('2G'));
});

test('rejects what is not a quantity', () => {
  for (const bad of ['ten gigs', '', 'Gi', '1GB', '1.2.3'])
    assert.throws(() => parseQuantity(bad), /not a Kubernetes quantity/);
});
