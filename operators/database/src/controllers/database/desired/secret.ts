/**
 * The credentials Secret `<name>-credentials`: generated ONCE, with cryptographically random passwords,
 * and never regenerated. The database applies passwords from the environment only when it initializes
 * its data directory, so a new password in the Secret would not change the database's: it would only
 * lock every client out. Given the existing Secret, the builder returns only the keys it lacks (a patch
 * to merge, e.g. with createOrUpdate), or undefined when nothing is missing; present keys are never
 * touched, whatever their value. Never apply it with server-side apply: omitting keys the manager
 * applied before would remove them.
 */
import { randomBytes } from 'node:crypto';
import type { Secret } from '@opkit/runtime';
import type { Database, DefaultedDatabase } from '../../../api/v1/database.ts';
import { engineFor } from '../engines/index.ts';
import { withDefaults } from './defaults.ts';
import { endpoints } from './endpoints.ts';
import { commonLabels } from './labels.ts';
import { childNames, DERIVED_SECRET_KEYS, PASSWORD_KEYS, SECRET_KEYS, type SecretKey } from './names.ts';

/** Where random bytes come from: node:crypto by default, a fixed source in tests. */
export interface RandomSource {
  randomBytes(size: number): Uint8Array;
}

export const cryptoRandom: RandomSource = { randomBytes };

export const PASSWORD_LENGTH = 32;
/** Letters and digits: safe in SQL literals, shell words, URLs and option files alike. */
export const PASSWORD_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/**
 * A random password of `length` characters from PASSWORD_ALPHABET, without modulo bias (bytes past the
 * largest multiple of 62 are drawn again): 32 characters carry about 190 bits.
 */
export function generatePassword(random: RandomSource = cryptoRandom, length = PASSWORD_LENGTH): string {
  const n = PASSWORD_ALPHABET.length;
  const limit = 256 - (256 % n);
  let out = '';
  while (out.length < length) {
    for (const b of random.randomBytes(length * 2)) {
      if (b >= limit) continue;
      out += PASSWORD_ALPHABET[b % n];
      if (out.length === length) break;
    }
  }
  return out;
}

/** The plain (not base64) values the Secret should hold, passwords freshly generated. */
function wantedValues(db: DefaultedDatabase, random: RandomSource): Record<SecretKey, () => string> {
  const engine = engineFor(db.spec.engine);
  const ep = endpoints(db);
  return {
    [SECRET_KEYS.adminUsername]: () => engine.adminUsername,
    [SECRET_KEYS.adminPassword]: () => generatePassword(random),
    [SECRET_KEYS.appUsername]: () => db.spec.username,
    [SECRET_KEYS.appPassword]: () => generatePassword(random),
    [SECRET_KEYS.replicationUsername]: () => engine.replicationUsername,
    [SECRET_KEYS.replicationPassword]: () => generatePassword(random),
    [SECRET_KEYS.database]: () => db.spec.databaseName,
    [SECRET_KEYS.host]: () => ep.readWrite,
    [SECRET_KEYS.port]: () => String(ep.port),
  };
}

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');

/** A key's plain value (data is base64; stringData, not yet merged by the API server, is plain). */
function decode(secret: Secret, key: string): string {
  const raw = secret.data?.[key];
  return raw !== undefined ? Buffer.from(raw, 'base64').toString('utf8') : (secret.stringData?.[key] ?? '');
}

/** Whether the Secret holds the key (in data, or in stringData not yet merged by the API server). */
function has(secret: Secret, key: string): boolean {
  return secret.data?.[key] !== undefined || secret.stringData?.[key] !== undefined;
}

/**
 * Without `existing`: the whole Secret (type Opaque, `data` base64, labels, no ownerReferences).
 * With `existing`: a Secret carrying only the missing keys and the derived keys whose value is out of
 * date (DERIVED_SECRET_KEYS: a password changed), or undefined when there are none.
 */
export function credentialsSecret(
  db: Database | DefaultedDatabase,
  existing?: undefined,
  random?: RandomSource,
): Secret;
export function credentialsSecret(
  db: Database | DefaultedDatabase,
  existing: Secret | undefined,
  random?: RandomSource,
): Secret | undefined;
export function credentialsSecret(
  db: Database | DefaultedDatabase,
  existing?: Secret,
  random: RandomSource = cryptoRandom,
): Secret | undefined {
  const d = withDefaults(db);
  const names = childNames(d);
  const wanted = wantedValues(d, random);
  const data: Record<string, string> = {};
  const plain: Record<string, string> = {};
  for (const [key, value] of Object.entries(wanted)) {
    if (existing && has(existing, key)) {
      plain[key] = decode(existing, key);
      continue;
    }
    plain[key] = value();
    data[key] = b64(plain[key]);
  }
  // Derived keys (postgres: SCRAM verifiers) follow the values they derive from; `stored`: those the
  // Secret holds, decoded once, for the engine and for the comparison.
  const stored: Record<string, string> = {};
  for (const key of Object.values(DERIVED_SECRET_KEYS)) {
    if (existing && has(existing, key)) stored[key] = decode(existing, key);
  }
  const derived = engineFor(d.spec.engine).derivedSecretData?.(d, plain, stored) ?? {};
  for (const [key, value] of Object.entries(derived)) {
    if (stored[key] !== value) data[key] = b64(value);
  }
  if (existing) {
    if (Object.keys(data).length === 0) return undefined;
    return {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: existing.metadata.name ?? names.secret, namespace: d.metadata.namespace },
      data,
    };
  }
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: names.secret, namespace: d.metadata.namespace, labels: commonLabels(d, 'credentials') },
    type: 'Opaque',
    data,
  };
}

/** The password keys a Secret lacks (for status messages). */
export function missingPasswordKeys(secret: Secret | undefined): string[] {
  return PASSWORD_KEYS.filter((k) => !secret || !has(secret, k));
}
