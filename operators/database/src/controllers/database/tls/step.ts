/**
 * The reconcile's TLS step for engines with `tls` (postgres): the CA, the server certificate and the
 * application's connection Secret. The decisions are plan.ts's; generation is pki.ts's; reading and
 * writing the Secrets (ownership checked, created or patched, never updated) is the reconciler's, through
 * `SecretStore`.
 */
import type { Secret } from '@opkit/runtime';
import type { DefaultedDatabase } from '../../../api/v1/database.ts';
import { childNames } from '../desired/names.ts';
import {
  appSecret,
  CA_KEYS,
  caFromSecret,
  caSecret,
  SERVER_TLS_KEYS,
  secretValue,
  serverHosts,
  serverSecret,
} from '../desired/tls.ts';
import { generateCa, issueServerCertificate } from './pki.ts';
import { caDecision, inspectCertificate, serverCertificateDecision } from './plan.ts';

/**
 * Who owns a Secret: `data`, like the credentials Secret (nothing under deletionPolicy Retain, the
 * Database under Delete: it lives as long as the data); `controller`, always the Database (derived, made
 * again at will).
 */
export type SecretOwnership = 'data' | 'controller';

export interface SecretStore {
  /** The live Secret under `name` (the cache, else the API), checked to be this Database's. */
  live(name: string): Promise<Secret | undefined>;
  /**
   * Creates `desired`, or patches the keys of its data whose value differs (and the ownerReferences):
   * the names of the keys written.
   */
  put(desired: Secret, existing: Secret | undefined, ownership: SecretOwnership): Promise<string[]>;
  normal(reason: string, note: string, related?: Secret): void;
  warning(reason: string, note: string, related?: Secret): void;
}

export interface TlsState {
  /** The CA's certificate (PEM), for the application Secret. */
  caCertPem: string;
  /** When the server certificate is due for renewal. */
  renewAt?: Date;
}

/** The CA (kept while valid) and the server certificate (renewed or reissued when plan.ts says so). */
export async function ensureTls(store: SecretStore, db: DefaultedDatabase, now: Date): Promise<TlsState> {
  const names = childNames(db);
  const caLive = await store.live(names.caSecret);
  let ca = caFromSecret(caLive);
  const caPlan = caDecision(
    caLive
      ? inspectCertificate(secretValue(caLive, CA_KEYS.cert), secretValue(caLive, CA_KEYS.key))
      : undefined,
    now,
  );
  if (caPlan.action === 'issue' || !ca) {
    ca = await generateCa(`${db.metadata.namespace ?? 'default'}/${db.metadata.name ?? ''}`, now);
    await store.put(caSecret(db, ca), caLive, 'data');
    if (caLive) {
      store.warning(
        'CARegenerated',
        `A new CA in Secret ${names.caSecret}: ${'reason' in caPlan ? caPlan.reason : 'unusable'}. Clients ` +
          `that verify the server with the previous CA must take ca.crt from Secret ${names.appSecret} again`,
        caLive,
      );
    }
  } else {
    // Only the ownerReferences may need to follow the deletion policy.
    await store.put(caSecret(db, ca), caLive, 'data');
  }

  const hosts = serverHosts(db);
  const serverLive = await store.live(names.serverSecret);
  const plan = serverCertificateDecision(
    serverLive
      ? inspectCertificate(
          secretValue(serverLive, SERVER_TLS_KEYS.cert),
          secretValue(serverLive, SERVER_TLS_KEYS.key),
          ca.certPem,
        )
      : undefined,
    hosts,
    now,
  );
  if (plan.action === 'issue') {
    const cert = await issueServerCertificate(ca, hosts, now);
    await store.put(serverSecret(db, cert, ca.certPem), serverLive, 'controller');
    store.normal(
      'CertificateIssued',
      `Issued the server certificate in Secret ${names.serverSecret}: ${plan.reason}`,
    );
    return { caCertPem: ca.certPem };
  }
  const kept = {
    certPem: secretValue(serverLive, SERVER_TLS_KEYS.cert) ?? '',
    keyPem: secretValue(serverLive, SERVER_TLS_KEYS.key) ?? '',
  };
  await store.put(serverSecret(db, kept, ca.certPem), serverLive, 'controller');
  return { caCertPem: ca.certPem, ...(plan.renewAt ? { renewAt: plan.renewAt } : {}) };
}

/** `<name>-app`, from the credentials' plain values and the CA: kept in step with both. */
export async function ensureAppSecret(
  store: SecretStore,
  db: DefaultedDatabase,
  credentials: Readonly<Record<string, string>>,
  caCertPem: string,
): Promise<void> {
  const desired = appSecret(db, credentials, caCertPem);
  const live = await store.live(childNames(db).appSecret);
  await store.put(desired, live, 'controller');
}
