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

describe('SCRAM verifiers the Secret holds (a restarted operator)', () => {
  const pattern = /^SCRAM-SHA-256\$4096:([A-Za-z0-9+/]{22}==)\$/;
  const keys = (v: string) => v.slice(v.lastIndexOf('$') + 1);

  test("one with this password's salt is kept as it is: no PBKDF2 to check it", () => {
    const right = scramVerifier('pw-a', salt('pw-a', 'uid-10', 'app'));
    // Same salt, other keys: only a verifier taken as stored, not recomputed, can come back.
    const stored = right.replace(keys(right), keys(scramVerifier('other', salt('pw-a', 'uid-10', 'app'))));
    assert.notEqual(stored, right);
    assert.equal(roleVerifier('pw-a', 'uid-10', 'app', stored), stored);
  });

  test('a password changed since (another salt): computed from the new password', () => {
    const old = scramVerifier('pw-old', salt('pw-old', 'uid-11', 'app'));
    const fresh = roleVerifier('pw-new', 'uid-11', 'app', old);
    assert.equal(fresh, scramVerifier('pw-new', salt('pw-new', 'uid-11', 'app')));
    assert.notEqual(pattern.exec(fresh)?.[1], pattern.exec(old)?.[1]);
  });

  test("one not in the operator's format (other iterations, cut short, empty): computed", () => {
    const s = salt('pw-b', 'uid-12', 'app');
    const right = scramVerifier('pw-b', s);
    for (const stored of [scramVerifier('pw-b', s, 10_000), right.slice(0, -4), '']) {
      assert.equal(roleVerifier('pw-b', 'uid-12', 'app', stored), right, JSON.stringify(stored));
    }
  });
});
