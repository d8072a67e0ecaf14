/**
 * The Secrets of a Database: the credentials Secret (created once, never regenerated; only missing keys
 * added), the CA and server certificate (postgres) and `<name>-app`; their ownership follows deletionPolicy.
 */
import {
  AlreadyExistsError,
  ConflictError,
  deepCopy,
  hasOwnerReference,
  isControlledBy,
  type OwnerReference,
  type Secret,
  Secrets,
  setControllerReference,
  withTypeMeta,
} from '@opkit/runtime';
import { Databases } from '../../../api/v1/database.ts';
import { credentialsSecret } from '../desired/index.ts';
import { childNames, DERIVED_SECRET_KEYS } from '../desired/names.ts';
import { engineFor } from '../engines/index.ts';
import { CredentialsMissingError } from '../errors.ts';
import { checkOwnership } from '../ownership.ts';
import type { Run } from '../run.ts';
import { ensureAppSecret, ensureTls, type SecretOwnership, type SecretStore } from '../tls/step.ts';
import { existingDataClaims } from './storage.ts';

const DERIVED: ReadonlySet<string> = new Set(Object.values(DERIVED_SECRET_KEYS));

/**
 * The ownerReferences the Secret should have, or undefined when it has them: under Delete this Database
 * is its controller (it goes with the Database and the data); under Retain nothing that is deleted with
 * the Database references it (it stays with the PVCs). `null` removes them all.
 */
function secretOwners(
  run: Run,
  existing: Secret,
  controlled = run.spec.spec.deletionPolicy === 'Delete',
): OwnerReference[] | null | undefined {
  const refs = existing.metadata.ownerReferences ?? [];
  if (controlled) {
    if (isControlledBy(existing, run.db)) return undefined;
    const copy = { metadata: { namespace: run.ns, ownerReferences: deepCopy(refs) } } as Secret;
    return setControllerReference(run.db, copy, Databases.resource).metadata.ownerReferences ?? [];
  }
  if (!hasOwnerReference(existing, run.db)) return undefined;
  const kept = refs.filter((r) => r.uid !== run.db.metadata.uid);
  return kept.length > 0 ? kept : null;
}

export async function ensureCredentials(run: Run): Promise<void> {
  // The whole Secret (new random passwords and, for postgres, their SCRAM verifiers: PBKDF2, 4096 rounds
  // each) is only built when there is none to keep: most reconciles find it.
  const name = childNames(run.spec).secret;
  const key = { namespace: run.ns, name };
  await run.step('Secret', name, async () => {
    // The cache only shows labelled Secrets (and may lag): a create that finds one already there
    // reads it from the API and checks it before touching it.
    const cached = await run.deps.reader.get(Secrets, key);
    let existing = cached ? withTypeMeta(Secrets, cached) : undefined;
    if (!existing) {
      // Never new passwords for data initialized with the old ones.
      const claims = await existingDataClaims(run);
      if (claims.length > 0) throw new CredentialsMissingError(name, run.ns, run.db, claims);
      const full = credentialsSecret(run.spec);
      const desired = run.spec.spec.deletionPolicy === 'Delete' ? run.own(full) : full;
      try {
        const created = await run.client.create(Secrets, desired, { signal: run.signal });
        run.normal('Created', 'Create', `Created Secret ${name}`, withTypeMeta(Secrets, created));
        run.secretName = name;
        run.credentials = decodeAll(full);
        return;
      } catch (err) {
        if (!(err instanceof AlreadyExistsError)) throw err;
        existing = withTypeMeta(Secrets, await run.client.get(Secrets, key, { signal: run.signal }));
      }
    }
    checkOwnership('Secret', existing, run.db);
    run.secretName = name;
    const owners = secretOwners(run, existing);
    const missing = credentialsSecret(run.spec, existing);
    const add = { ...(missing?.data ?? {}) };
    const addString = { ...(missing?.stringData ?? {}) };
    for (const k of Object.keys(existing.data ?? {})) {
      if (DERIVED.has(k)) continue;
      delete add[k];
      delete addString[k];
    }
    const keys = [...new Set([...Object.keys(add), ...Object.keys(addString)])].sort();
    run.credentials = {
      ...decodeAll(existing),
      ...decodeAll({ data: add, stringData: addString } as Secret),
    };
    if (keys.length === 0 && owners === undefined) return;
    await run.client.patch(
      Secrets,
      key,
      {
        type: 'merge',
        body: {
          metadata: {
            uid: existing.metadata.uid,
            // The list is replaced whole: only on top of the version it was computed from.
            ...(owners !== undefined
              ? { resourceVersion: existing.metadata.resourceVersion, ownerReferences: owners }
              : {}),
          },
          ...(Object.keys(add).length ? { data: add } : {}),
          ...(Object.keys(addString).length ? { stringData: addString } : {}),
        },
      },
      { signal: run.signal },
    );
    const related = withTypeMeta(Secrets, existing);
    // Key names only: never a value.
    const added = keys.filter((k) => !DERIVED.has(k) || !existing.data?.[k]);
    const refreshed = keys.filter((k) => DERIVED.has(k) && existing.data?.[k]);
    if (added.length > 0)
      run.normal('Updated', 'Update', `Added missing keys to Secret ${name}: ${added.join(', ')}`, related);
    if (refreshed.length > 0)
      run.normal(
        'CredentialsChanged',
        'Update',
        `A password changed in Secret ${name}: updated ${refreshed.join(', ')}; the primary applies it`,
        related,
      );
    if (owners !== undefined) {
      run.normal(
        'Updated',
        'Update',
        run.spec.spec.deletionPolicy === 'Delete'
          ? `Secret ${name} is now controlled by the Database: deletionPolicy Delete deletes it with the data`
          : `Secret ${name} is no longer owned by the Database: deletionPolicy Retain keeps it with the data`,
        related,
      );
    }
  });
}

/**
 * The SecretStore of the TLS step: ownership checked, created or merge-patched (RBAC: no update).
 * Where it reads a Secret (see withTlsStore): `cache`, a Secret the cache does not show is taken to be
 * missing, and the create that follows finds out otherwise; `cache-then-api`, the API is asked about one
 * the cache does not show; `api`, the API is asked about each (the cache is behind it).
 */
type SecretSource = 'cache' | 'cache-then-api' | 'api';

function secretStore(run: Run, source: SecretSource): SecretStore {
  return {
    live: async (name) => {
      const cached =
        source === 'api' ? undefined : await run.deps.reader.get(Secrets, { namespace: run.ns, name });
      // The cache hides unlabelled Secrets: the API decides whether there is one (see withTlsStore).
      const live = cached
        ? withTypeMeta(Secrets, cached)
        : source !== 'cache'
          ? await run.fresh(Secrets, name)
          : undefined;
      if (live) checkOwnership('Secret', live, run.db);
      return live;
    },
    put: (desired, existing, ownership) => putSecret(run, desired, existing, ownership),
    normal: (reason, note, related) => run.normal(reason, 'Update', note, related),
    warning: (reason, note, related) => run.warning(reason, 'Update', note, related),
  };
}

/** Creates a Secret, or patches the keys whose value differs and the ownerReferences. Key names only in events. */
async function putSecret(
  run: Run,
  desired: Secret,
  existing: Secret | undefined,
  ownership: SecretOwnership,
): Promise<string[]> {
  const name = desired.metadata.name ?? '';
  const controlled = ownership === 'controller' || run.spec.spec.deletionPolicy === 'Delete';
  if (!existing) {
    const created = await run.client.create(Secrets, controlled ? run.own(desired) : desired, {
      signal: run.signal,
    });
    run.normal('Created', 'Create', `Created Secret ${name}`, withTypeMeta(Secrets, created));
    return Object.keys(desired.data ?? {});
  }
  const data: Record<string, string> = {};
  for (const [k, v] of Object.entries(desired.data ?? {})) if (existing.data?.[k] !== v) data[k] = v;
  const owners = secretOwners(run, existing, controlled);
  const keys = Object.keys(data).sort();
  if (keys.length === 0 && owners === undefined) return [];
  await run.client.patch(
    Secrets,
    { namespace: run.ns, name },
    {
      type: 'merge',
      body: {
        // On top of the version the decision was made on: a concurrent change is a conflict (retried).
        metadata: {
          uid: existing.metadata.uid,
          resourceVersion: existing.metadata.resourceVersion,
          ...(owners !== undefined ? { ownerReferences: owners } : {}),
        },
        ...(keys.length ? { data } : {}),
      },
    },
    { signal: run.signal },
  );
  if (keys.length > 0)
    run.normal(
      'Updated',
      'Update',
      `Updated Secret ${name}: ${keys.join(', ')}`,
      withTypeMeta(Secrets, existing),
    );
  return keys;
}

/**
 * Runs a TLS step on what the cache shows (a new Database's Secrets: no GET that answers 404 before each
 * create). When the API says otherwise, runs it again on what the API says, deciding as if it had asked
 * first: a create that finds a Secret there after all (one the cache hides: not labelled, or not seen
 * yet), or a patch that conflicts (the Secret changed since the version the cache shows: after an API
 * server restart, a watch resumes seconds later). Every step is idempotent.
 */
async function withTlsStore<T>(run: Run, step: (store: SecretStore) => Promise<T>): Promise<T> {
  try {
    return await step(secretStore(run, 'cache'));
  } catch (err) {
    if (err instanceof AlreadyExistsError) return step(secretStore(run, 'cache-then-api'));
    if (err instanceof ConflictError) return step(secretStore(run, 'api'));
    throw err;
  }
}

/** postgres: the CA, the server certificate (tls/step.ts). */
export async function ensureTlsSecrets(run: Run): Promise<void> {
  if (!engineFor(run.spec.spec.engine).tls) return;
  const name = childNames(run.spec).serverSecret;
  run.tlsState = await run.step('Secret', name, () =>
    withTlsStore(run, (store) => ensureTls(store, run.spec, run.deps.now?.() ?? new Date())),
  );
}

/** postgres: `<name>-app`, once the credentials and the CA are known. */
export async function ensureApplicationSecret(run: Run): Promise<void> {
  if (!run.tlsState || !run.credentials) return;
  const { credentials, tlsState } = run;
  await run.step('Secret', childNames(run.spec).appSecret, () =>
    withTlsStore(run, (store) => ensureAppSecret(store, run.spec, credentials, tlsState.caCertPem)),
  );
}

/** A Secret's keys, plain (data is base64; stringData plain). */
function decodeAll(secret: Pick<Secret, 'data' | 'stringData'>): Record<string, string> {
  const out: Record<string, string> = { ...(secret.stringData ?? {}) };
  for (const [k, v] of Object.entries(secret.data ?? {})) out[k] = Buffer.from(v, 'base64').toString('utf8');
  return out;
}
