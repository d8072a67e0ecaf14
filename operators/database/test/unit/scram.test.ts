/**
 * The SCRAM-SHA-256 verifiers the operator stores: PostgreSQL's pg_authid format, a salt derived from the
 * password, the Database and the role, and the same answer from memory as computed (never a stale one).
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, test } from 'node:test';
import { roleVerifier, scramVerifier } from '../../src/controllers/database/engines/postgres/scram.ts';

const salt = (password: string, db: string, role: string) =>
  createHmac('sha256', password).update(`opkit\0${db}\0${role}`).digest().subarray(0, 16);

describe('SCRAM verifiers', () => {
  test("pg_authid's format, 4096 iterations, the derived salt", () => {
    const v = roleVerifier('s3cret', 'uid-1', 'app');
    assert.match(v, /^SCRAM-SHA-256\$4096:[A-Za-z0-9+/]{22}==\$[A-Za-z0-9+/]{43}=:[A-Za-z0-9+/]{43}=$/);
    assert.equal(v, scramVerifier('s3cret', salt('s3cret', 'uid-1', 'app')));
  });

  test('asked again: the same verifier; a changed password, Database or role: a new one, never the remembered one', () => {
    const first = roleVerifier('s3cret', 'uid-2', 'app');
    assert.equal(roleVerifier('s3cret', 'uid-2', 'app'), first);
    const changed = roleVerifier('s3cret!', 'uid-2', 'app');
    assert.notEqual(changed, first);
    assert.equal(changed, scramVerifier('s3cret!', salt('s3cret!', 'uid-2', 'app')));
    assert.notEqual(roleVerifier('s3cret', 'uid-3', 'app'), first);
    assert.notEqual(roleVerifier('s3cret', 'uid-2', 'replicator'), first);
    assert.equal(roleVerifier('s3cret', 'uid-2', 'app'), first, 'back to the first password: its verifier');
  });
});
