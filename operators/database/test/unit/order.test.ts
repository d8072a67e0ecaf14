/**
 * The operator orders names and label keys as Go's sort.Strings does (by code unit), never with
 * `localeCompare`: that opens ICU's collator, about 3 MiB of resident memory for the process's life.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { selectorString } from '../../src/controllers/database/desired/labels.ts';
import { compareStrings } from '../../src/controllers/database/order.ts';
import { database } from './fixtures.ts';

describe('order', () => {
  test('compareStrings orders by code unit: upper case before lower, punctuation by its code', () => {
    const sorted = ['b', 'a', 'B', 'db-10', 'db-2', 'db.1', 'db/1', 'db-1'].sort(compareStrings);
    assert.deepEqual(sorted, ['B', 'a', 'b', 'db-1', 'db-10', 'db-2', 'db.1', 'db/1']);
    assert.equal(compareStrings('x', 'x'), 0);
  });

  test('status.selector lists the keys in the API server order (as labels.SelectorFromSet)', () => {
    assert.equal(
      selectorString(database('postgres')),
      'app.kubernetes.io/instance=orders,app.kubernetes.io/managed-by=opkit-database-operator,app.kubernetes.io/name=postgres',
    );
  });

  test('no source file of the operator calls localeCompare (the ICU collator)', () => {
    const src = join(import.meta.dirname, '../../src');
    const offenders = (readdirSync(src, { recursive: true }) as string[])
      .filter((f) => f.endsWith('.ts'))
      .filter((f) => /\.localeCompare\(/.test(readFileSync(join(src, f), 'utf8')));
    assert.deepEqual(offenders, []);
  });
});
