/**
 * The credentials Secret: generated once with random passwords, then only its missing keys are ever
 * added; present keys are never regenerated or overwritten.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, test } from 'node:test';
import type { Secret } from '@opkit/runtime';
import {
  credentialsSecret,
  DERIVED_SECRET_KEYS,
  generatePassword,
  missingPasswordKeys,
  PASSWORD_ALPHABET,
  SECRET_KEYS,
} from '../../src/controllers/database/desired/index.ts';
import { scramVerifier } from '../../src/controllers/database/engines/postgres/scram.ts';
import { counterRandom, database, decoded, PASSWORD_KEYS } from './fixtures.ts';

describe('credentialsSecret', () => {
  for (const engine of ['postgres', 'mysql'] as const) {
    test(`${engine}: a new Secret with every key, labels and no owner references`, () => {
      const s = credentialsSecret(database(engine));
      assert.equal(s.apiVersion, 'v1');
      assert.equal(s.kind, 'Secret');
      assert.equal(s.type, 'Opaque');
      assert.equal(s.metadata.name, 'orders-credentials');
      assert.equal(s.metadata.namespace, 'shop');
      assert.equal(s.metadata.ownerReferences, undefined);
      assert.deepEqual(s.metadata.labels, {
        'app.kubernetes.io/name': engine,
        'app.kubernetes.io/instance': 'orders',
        'app.kubernetes.io/managed-by': 'opkit-database-operator',
        'app.kubernetes.io/component': 'credentials',
      });
      assert.equal(s.stringData, undefined);
      const v = decoded(s);
      const derived = engine === 'postgres' ? Object.values(DERIVED_SECRET_KEYS) : [];
      assert.deepEqual(Object.keys(v).sort(), [...Object.values(SECRET_KEYS), ...derived].sort());
      assert.equal(v[SECRET_KEYS.adminUsername], engine === 'mysql' ? 'root' : 'postgres');
      assert.equal(v[SECRET_KEYS.appUsername], 'app');
      assert.equal(v[SECRET_KEYS.replicationUsername], 'replicator');
      assert.equal(v[SECRET_KEYS.database], 'app');
      assert.equal(v[SECRET_KEYS.host], 'orders.shop.svc.cluster.local');
      assert.equal(v[SECRET_KEYS.port], engine === 'mysql' ? '3306' : '5432');
    });
  }

  test('the spec names the application user and database', () => {
    const v = decoded(
      credentialsSecret(database('postgres', { username: 'shop_owner', databaseName: 'shop' })),
    );
    assert.equal(v[SECRET_KEYS.appUsername], 'shop_owner');
    assert.equal(v[SECRET_KEYS.database], 'shop');
  });

  test('passwords: 32 letters and digits, all different, different every time', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const v = decoded(credentialsSecret(database('postgres')));
      for (const key of PASSWORD_KEYS) {
        const pw = v[key] ?? '';
        assert.equal(pw.length, 32, key);
        assert.match(pw, /^[A-Za-z0-9]{32}$/);
        assert.ok(!seen.has(pw), 'a password repeated');
        seen.add(pw);
      }
    }
  });

  test('passwords come from the injected random source, without modulo bias', () => {
    const random = counterRandom();
    const pw = generatePassword(random, 24);
    assert.ok(random.calls >= 1);
    // Bytes 0..61 map straight to the alphabet, in order.
    assert.equal(pw, PASSWORD_ALPHABET.slice(0, 24));
    // Bytes >= 248 (past the last multiple of 62) are skipped, not folded onto the first letters.
    let i = 0;
    const high = {
      randomBytes: (n: number) => Uint8Array.from({ length: n }, () => (i++ % 2 === 0 ? 255 : 62)),
    };
    assert.equal(generatePassword(high, 8), 'AAAAAAAA');
    // The default source is node:crypto: 1000 characters use most of the alphabet.
    const chars = new Set(generatePassword(undefined, 1000));
    assert.ok(chars.size > 55);
  });

  test('given the existing Secret, nothing is regenerated: undefined when no key is missing', () => {
    const first = credentialsSecret(database('mysql'));
    assert.equal(credentialsSecret(database('mysql'), first), undefined);
  });

  test('given the existing Secret, only the missing keys, never the present ones', () => {
    const first = credentialsSecret(database('postgres'));
    const data = { ...first.data };
    delete data[SECRET_KEYS.appPassword];
    delete data[SECRET_KEYS.host];
    // A present key with a value the operator would not have written stays as it is.
    data[SECRET_KEYS.adminPassword] = Buffer.from('chosen-by-the-user').toString('base64');
    const existing: Secret = { metadata: { name: 'orders-credentials', namespace: 'shop' }, data };
    const patch = credentialsSecret(database('postgres'), existing);
    assert.ok(patch);
    // The new app password comes with its new SCRAM verifier.
    assert.deepEqual(
      Object.keys(patch.data ?? {}).sort(),
      [DERIVED_SECRET_KEYS.appPasswordScram, SECRET_KEYS.appPassword, SECRET_KEYS.host].sort(),
    );
    assert.equal(patch.metadata.name, 'orders-credentials');
    assert.equal(patch.metadata.ownerReferences, undefined);
    assert.equal(decoded(patch)[SECRET_KEYS.appPassword]?.length, 32);
    assert.notEqual(decoded(patch)[SECRET_KEYS.appPassword], decoded(first)[SECRET_KEYS.appPassword]);
  });

  test("postgres: a stored verifier with its password's salt is kept, not computed again to compare", () => {
    const first = credentialsSecret(database('postgres'));
    const user = decoded(first)[SECRET_KEYS.replicationUsername] ?? '';
    // A password this process never derived a verifier for (as after a restart), and its verifier with
    // another server key under the right salt: a check that computed it again would write it back.
    const password = 'set-before-a-restart';
    const salt = createHmac('sha256', password).update(`opkit\0db-uid-1\0${user}`).digest().subarray(0, 16);
    const right = scramVerifier(password, salt);
    const altered = right.replace(/:[A-Za-z0-9+/]{43}=$/, `:${'A'.repeat(43)}=`);
    assert.notEqual(altered, right);
    const b64 = (x: string) => Buffer.from(x).toString('base64');
    const existing: Secret = {
      ...first,
      data: {
        ...first.data,
        [SECRET_KEYS.replicationPassword]: b64(password),
        [DERIVED_SECRET_KEYS.replicationPasswordScram]: b64(altered),
      },
    };
    assert.equal(credentialsSecret(database('postgres'), existing), undefined);
  });

  test('postgres: the SCRAM verifiers follow the passwords, and only change when a password does', () => {
    const first = credentialsSecret(database('postgres'));
    const v = decoded(first);
    assert.match(
      v[DERIVED_SECRET_KEYS.appPasswordScram] ?? '',
      /^SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}:[A-Za-z0-9+/=]{44}$/,
    );
    assert.ok(!(v[DERIVED_SECRET_KEYS.appPasswordScram] ?? '').includes(v[SECRET_KEYS.appPassword] ?? '-'));
    assert.equal(credentialsSecret(database('postgres'), first), undefined, 'stable: nothing to write');
    // The user edits the password: only its verifier is rewritten.
    const edited: Secret = {
      ...first,
      data: {
        ...first.data,
        [SECRET_KEYS.appPassword]: Buffer.from('a-new-password-1234').toString('base64'),
      },
    };
    const patch = credentialsSecret(database('postgres'), edited);
    assert.deepEqual(Object.keys(patch?.data ?? {}), [DERIVED_SECRET_KEYS.appPasswordScram]);
    assert.notEqual(
      decoded(patch)[DERIVED_SECRET_KEYS.appPasswordScram],
      v[DERIVED_SECRET_KEYS.appPasswordScram],
    );
    // MySQL has none.
    assert.equal(
      decoded(credentialsSecret(database('mysql')))[DERIVED_SECRET_KEYS.appPasswordScram],
      undefined,
    );
  });

  test('keys given in stringData (not yet merged by the API server) count as present', () => {
    const existing: Secret = {
      metadata: { name: 'orders-credentials', namespace: 'shop' },
      stringData: { [SECRET_KEYS.adminPassword]: 'x' },
      data: {},
    };
    const patch = credentialsSecret(database('postgres'), existing);
    assert.equal(patch?.data?.[SECRET_KEYS.adminPassword], undefined);
    assert.ok(patch?.data?.[SECRET_KEYS.appPassword]);
  });

  test('missingPasswordKeys', () => {
    assert.deepEqual(missingPasswordKeys(undefined), [...PASSWORD_KEYS]);
    assert.deepEqual(missingPasswordKeys(credentialsSecret(database('mysql'))), []);
  });

  test('undefaulted and defaulted Databases give the same Secret (apart from the passwords)', () => {
    const strip = (s: Secret) => {
      const v = decoded(s);
      for (const k of [...PASSWORD_KEYS, ...Object.values(DERIVED_SECRET_KEYS)]) delete v[k];
      return v;
    };
    const raw = database('postgres');
    assert.deepEqual(
      strip(credentialsSecret(raw)),
      strip(
        credentialsSecret({
          ...raw,
          spec: { ...raw.spec, replicas: 1, databaseName: 'app', username: 'app' },
        }),
      ),
    );
  });
});
