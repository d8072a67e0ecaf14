/**
 * Renders opkit's desired-state builders (operators/database/src/controllers/database/desired) into
 * templates.json for the two peers, for every (engine, version, replicas) the benchmark uses:
 *
 *   node bench/operators/gen-templates.ts
 *
 * Why: the engine modules are hundreds of lines of configuration files, scripts and probes. The peers
 * are there to compare the operator machinery (informers/caches, queues, create-or-update, status), so
 * they take the engine content from the same source instead of a hand translation that could drift:
 * they substitute the Database's name and namespace, compute the config hash over the rendered
 * ConfigMap, generate the passwords, set the controller reference and then do the reconcile their way.
 * The harness's equivalence check verifies that the objects come out identical.
 */

import { spawnSync } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type Database,
  Databases,
  type DefaultedDatabase,
} from '../../operators/database/src/api/v1/database.ts';
import {
  configMap,
  credentialsSecret,
  endpoints,
  headlessService,
  instanceRole,
  instanceRoleBinding,
  instanceServiceAccount,
  podDisruptionBudget,
  primaryDisruptionBudget,
  primaryLease,
  readOnlyService,
  readWriteService,
  statefulSet,
  usesPrimaryLease,
} from '../../operators/database/src/controllers/database/desired/index.ts';
import { selectorString } from '../../operators/database/src/controllers/database/desired/labels.ts';
import {
  CLUSTER_KEYS,
  DERIVED_SECRET_KEYS,
  PASSWORD_KEYS,
  SECRET_KEYS,
} from '../../operators/database/src/controllers/database/desired/names.ts';
import {
  PASSWORD_ALPHABET,
  PASSWORD_LENGTH,
} from '../../operators/database/src/controllers/database/desired/secret.ts';
import {
  APP_KEYS,
  appSecret,
  caSecret,
  serverHosts,
  serverSecret,
} from '../../operators/database/src/controllers/database/desired/tls.ts';
import { engineFor } from '../../operators/database/src/controllers/database/engines/index.ts';
import {
  roleVerifier,
  SCRAM_ITERATIONS,
} from '../../operators/database/src/controllers/database/engines/postgres/scram.ts';
import { configHash as opkitConfigHash } from '../../operators/database/src/controllers/database/reconcile.ts';
import {
  generateCa,
  issueServerCertificate,
} from '../../operators/database/src/controllers/database/tls/pki.ts';
import { WORKLOAD_STORAGE, WORKLOAD_VERSIONS } from '../harness/desired.ts';

/**
 * Placeholders as long as the workload's names (db-NNNNN in namespace default): some rendered files
 * align columns on the name, so a substitution must not change lengths. The peers refuse other lengths.
 */
export const PLACEHOLDERS = {
  name: 'zzdbnmzz',
  namespace: 'zznszzz',
  configHash: 'zzconfighashzz',
  password: 'zzpasswordzz',
};

/** The CA's subject as the peers write it (common name first, then the organization), checked below. */
const CA_ORGANIZATION = 'opkit-database-operator';

/**
 * postgres: what the peers need to make the TLS Secrets as opkit's TLS step does (tls/step.ts, pki.ts):
 * the three Secrets without their certificate values, the names the server certificate holds, and the
 * CA's subject and the validities, measured from certificates opkit's pki.ts generates (not copied
 * constants: a change there fails here).
 */
async function tlsTemplate(db: DefaultedDatabase, plain: Record<string, string>) {
  const now = new Date(Math.floor(Date.now() / 1000) * 1000);
  const hosts = serverHosts(db);
  const ca = await generateCa(`${db.metadata.namespace}/${db.metadata.name}`, now);
  const server = await issueServerCertificate(ca, hosts, now);
  const caCert = new X509Certificate(ca.certPem);
  const serverCert = new X509Certificate(server.certPem);
  const caSubject = `CN=${db.metadata.namespace}/${db.metadata.name}\nO=${CA_ORGANIZATION}`;
  if (caCert.subject !== caSubject) {
    throw new Error(`opkit's CA subject is now ${JSON.stringify(caCert.subject)}: update both peers`);
  }
  if (serverCert.subject !== `CN=${hosts[0]}`) {
    throw new Error(`opkit's server certificate subject is now ${serverCert.subject}: update both peers`);
  }
  const seconds = (d: string) => (Date.parse(d) - now.getTime()) / 1000;
  const strip = (secret: ReturnType<typeof caSecret>) => {
    const { data: _, ...rest } = secret;
    return rest;
  };
  const empty = { certPem: '', keyPem: '' };
  const app = appSecret(db, { ...plain, [SECRET_KEYS.appPassword]: PLACEHOLDERS.password }, '');
  const appData = Object.fromEntries(
    Object.entries(app.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
  );
  return {
    caCommonName: `${db.metadata.namespace}/${db.metadata.name}`,
    caOrganization: CA_ORGANIZATION,
    /** notBefore = now - backdate; notAfter = now + validity (the server's never past the CA's). */
    backdateSeconds: -seconds(caCert.validFrom),
    caValiditySeconds: seconds(caCert.validTo),
    serverValiditySeconds: seconds(serverCert.validTo),
    serverHosts: hosts,
    /** `-ca`: owned like the credentials (only under deletionPolicy Delete); the others always. */
    caSecret: strip(caSecret(db, empty)),
    serverSecret: strip(serverSecret(db, empty, '')),
    /** `-app` in plain values: the password (also in the uri, as PLACEHOLDERS.password) and ca.crt filled in. */
    appSecret: { ...strip(app), stringData: appData },
    appPasswordKey: SECRET_KEYS.appPassword,
    appKeys: { password: APP_KEYS.password, ca: APP_KEYS.ca, uri: APP_KEYS.uri },
  };
}

/** ConfigMap keys left out of the config hash (opkit's cluster record, not configuration). */
export const UNHASHED_KEYS: readonly string[] = Object.values(CLUSTER_KEYS);

/**
 * The Secret keys the peers derive from a password (postgres: SCRAM verifiers, salt derived from the
 * Database's uid and the role, keyed by the password, as opkit's scram.ts), with the keys they derive from.
 */
export const DERIVED_KEYS = [
  {
    key: DERIVED_SECRET_KEYS.appPasswordScram,
    usernameKey: SECRET_KEYS.appUsername,
    passwordKey: SECRET_KEYS.appPassword,
  },
  {
    key: DERIVED_SECRET_KEYS.replicationPasswordScram,
    usernameKey: SECRET_KEYS.replicationUsername,
    passwordKey: SECRET_KEYS.replicationPassword,
  },
] as const;

/** The config hash as the peers compute it; checked against opkit's own below. */
export function peerConfigHash(data: Record<string, string>): string {
  const h = createHash('sha256');
  for (const key of Object.keys(data).sort()) {
    if (!UNHASHED_KEYS.includes(key)) h.update(`${key}\0${data[key]}\0`);
  }
  return h.digest('hex').slice(0, 32);
}

export async function generateTemplates(): Promise<string> {
  const templates: Record<string, unknown> = {};
  for (const engine of ['mysql', 'postgres'] as const) {
    for (const replicas of [1, 2, 3]) {
      const version = WORKLOAD_VERSIONS[engine];
      const db = Databases.applyDefaults({
        apiVersion: 'myapp.example.com/v1',
        kind: 'Database',
        metadata: { name: PLACEHOLDERS.name, namespace: PLACEHOLDERS.namespace },
        spec: { engine, version, storage: WORKLOAD_STORAGE, replicas },
      } as Database) as DefaultedDatabase;
      const secret = credentialsSecret(db)!;
      // Plain values (stringData), so that the name in the host value can be substituted.
      const plain: Record<string, string> = {};
      for (const [k, v] of Object.entries(secret.data ?? {}))
        plain[k] = Buffer.from(v, 'base64').toString('utf8');
      // The verifiers opkit derived (no uid here: the namespace/name stands in) must be what the peers
      // compute for the same inputs; in the template they are left empty, computed by the peers.
      const id = `${PLACEHOLDERS.namespace}/${PLACEHOLDERS.name}`;
      const derivedKeys = DERIVED_KEYS.filter((d) => d.key in plain);
      for (const d of derivedKeys) {
        const user = plain[d.usernameKey] ?? '';
        if (plain[d.key] !== roleVerifier(plain[d.passwordKey] ?? '', id, user)) {
          throw new Error(
            `opkit's ${d.key} is no longer roleVerifier(${d.passwordKey}, uid, ${d.usernameKey}): update both peers`,
          );
        }
        plain[d.key] = '';
      }
      const known = new Set<string>([...Object.values(SECRET_KEYS), ...derivedKeys.map((d) => d.key)]);
      const unknown = Object.keys(plain).filter((k) => !known.has(k));
      if (unknown.length > 0) throw new Error(`Secret keys the peers do not know: ${unknown.join(', ')}`);
      for (const k of PASSWORD_KEYS) plain[k] = '';
      delete secret.data;
      secret.stringData = plain;
      const cm = configMap(db);
      if (peerConfigHash(cm.data ?? {}) !== opkitConfigHash(cm)) {
        throw new Error(
          "opkit's configHash is no longer the peers' (sha256 of key\\0value\\0, 32 hex): update both peers",
        );
      }
      const sts = statefulSet(db, { configHash: PLACEHOLDERS.configHash });
      const children = [
        secret,
        cm,
        headlessService(db),
        readWriteService(db),
        readOnlyService(db),
        sts,
        podDisruptionBudget(db),
        primaryDisruptionBudget(db),
        // The primary lease (postgres): created once, never updated by the peers (on kwok nobody renews
        // it and nothing fails over; opkit writes its holder only when the primary changes).
        ...(usesPrimaryLease(db)
          ? [instanceServiceAccount(db), instanceRole(db), instanceRoleBinding(db), primaryLease(db)]
          : []),
      ].filter((c) => c !== undefined);
      templates[`${engine}/${version}/${replicas}`] = {
        children,
        passwordKeys: [...PASSWORD_KEYS],
        derivedKeys,
        scramIterations: SCRAM_ITERATIONS,
        unhashedKeys: UNHASHED_KEYS,
        // The engine keeps a cluster record (postgres): status.targetPrimary (<name>-0 until recorded
        // otherwise; the peers read no instance reports) and the role labels follow it.
        clusterRecord: engineFor(engine).observe !== undefined,
        passwordLength: PASSWORD_LENGTH,
        passwordAlphabet: PASSWORD_ALPHABET,
        endpoints: endpoints(db),
        selector: selectorString(db),
        secretName: secret.metadata.name,
        statefulSetName: sts.metadata.name,
        ...(engineFor(engine).tls ? { tls: await tlsTemplate(db, plain) } : {}),
      };
    }
  }
  const out = join(import.meta.dirname, 'controller-runtime', 'templates.json');
  // Written in biome's formatting (so `biome check` passes) and only when it changed (the Go build is
  // keyed by its sources' hash, templates.json included).
  const tmp = `${out}.tmp.json`;
  writeFileSync(tmp, `${JSON.stringify({ placeholders: PLACEHOLDERS, templates }, null, 2)}\n`);
  spawnSync(
    join(import.meta.dirname, '..', '..', 'node_modules', '.bin', 'biome'),
    ['format', '--write', tmp],
    {
      stdio: 'ignore',
    },
  );
  const formatted = readFileSync(tmp, 'utf8');
  rmSync(tmp);
  let old = '';
  try {
    old = readFileSync(out, 'utf8');
  } catch {}
  if (formatted !== old) writeFileSync(out, formatted);
  return out;
}

if (import.meta.main) console.log(`wrote ${await generateTemplates()}`);
