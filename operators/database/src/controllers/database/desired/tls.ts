/**
 * TLS objects of a PostgreSQL Database (pure builders; the certificates come from tls/pki.ts):
 *   - Secret `<name>-ca` (ca.crt, ca.key): the Database's CA. Owned like the credentials Secret: it lives
 *     as long as the data (clients pin it), so under deletionPolicy Retain nothing owns it.
 *   - Secret `<name>-server` (kubernetes.io/tls: tls.crt, tls.key, ca.crt): the server certificate every
 *     instance serves, for the names below. Controlled by the Database (reissued from the CA at will).
 *   - Secret `<name>-app`: what an application needs to connect (host, port, dbname, user, password,
 *     sslmode, uri, ca.crt), derived from the credentials Secret and the CA, kept in step with them.
 *     A Secret of its own so that an application is given its user's password and not the superuser's
 *     or the replication user's; derived, so there is one place to change a password (`-credentials`).
 */
import type { Secret } from '@opkit/runtime';
import type { DefaultedDatabase } from '../../../api/v1/database.ts';
import type { CertificatePem } from '../tls/pki.ts';
import { DEFAULT_CLUSTER_DOMAIN, endpoints } from './endpoints.ts';
import { commonLabels } from './labels.ts';
import { childNames, podName, SECRET_KEYS } from './names.ts';

export const CA_KEYS = { cert: 'ca.crt', key: 'ca.key' } as const;
/** The keys of a kubernetes.io/tls Secret, and the CA that signed it (cert-manager's layout). */
export const SERVER_TLS_KEYS = { cert: 'tls.crt', key: 'tls.key', ca: 'ca.crt' } as const;
/** Keys of `<name>-app`, libpq's names (PGHOST, PGPORT, ...: `export PG$(KEY)`-friendly). */
export const APP_KEYS = {
  host: 'host',
  port: 'port',
  dbname: 'dbname',
  user: 'user',
  password: 'password',
  sslmode: 'sslmode',
  uri: 'uri',
  ca: 'ca.crt',
} as const;
/** Clients verify the server's certificate and its name against the Database's CA. */
export const APP_SSLMODE = 'verify-full';

/** `svc`, `svc.ns`, `svc.ns.svc`, `svc.ns.svc.<domain>`: every way a name resolves in the cluster. */
function qualified(name: string, ns: string, domain: string): string[] {
  return [name, `${name}.${ns}`, `${name}.${ns}.svc`, `${name}.${ns}.svc.${domain}`];
}

/**
 * The names the server certificate must hold (subjectAltNames): the read-write, read-only and headless
 * Services, and every pod's stable name under the headless Service (`<pod>.<headless>`, which replicas
 * use to reach the primary), each short, namespaced, `.svc` and fully qualified. The read-only Service
 * is always included (it appears when replicas go above 1: no reissue then). The first is the CN.
 */
export function serverHosts(db: DefaultedDatabase, clusterDomain = DEFAULT_CLUSTER_DOMAIN): string[] {
  const names = childNames(db);
  const ns = db.metadata.namespace ?? 'default';
  const out = [
    ...qualified(names.readWrite, ns, clusterDomain),
    ...qualified(names.readOnly, ns, clusterDomain),
    ...qualified(names.headless, ns, clusterDomain),
  ];
  for (let i = 0; i < db.spec.replicas; i++)
    out.push(...qualified(`${podName(db, i)}.${names.headless}`, ns, clusterDomain));
  return out;
}

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');

/** A key's plain value from a Secret (data is base64; stringData, not yet merged, is plain). */
export function secretValue(secret: Secret | undefined, key: string): string | undefined {
  const raw = secret?.data?.[key];
  if (raw !== undefined) return Buffer.from(raw, 'base64').toString('utf8');
  return secret?.stringData?.[key];
}

/** The CA as stored in `<name>-ca`, if both halves are there. */
export function caFromSecret(secret: Secret | undefined): CertificatePem | undefined {
  const certPem = secretValue(secret, CA_KEYS.cert);
  const keyPem = secretValue(secret, CA_KEYS.key);
  return certPem && keyPem ? { certPem, keyPem } : undefined;
}

/** Secret `<name>-ca`: no ownerReferences here (the reconciler sets them by deletionPolicy). */
export function caSecret(db: DefaultedDatabase, ca: CertificatePem): Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: childNames(db).caSecret,
      namespace: db.metadata.namespace,
      labels: commonLabels(db, 'ca'),
    },
    type: 'Opaque',
    data: { [CA_KEYS.cert]: b64(ca.certPem), [CA_KEYS.key]: b64(ca.keyPem) },
  };
}

/** Secret `<name>-server` (kubernetes.io/tls), with the CA's certificate beside it. */
export function serverSecret(db: DefaultedDatabase, server: CertificatePem, caCertPem: string): Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: childNames(db).serverSecret,
      namespace: db.metadata.namespace,
      labels: commonLabels(db, 'server-tls'),
    },
    type: 'kubernetes.io/tls',
    data: {
      [SERVER_TLS_KEYS.cert]: b64(server.certPem),
      [SERVER_TLS_KEYS.key]: b64(server.keyPem),
      [SERVER_TLS_KEYS.ca]: b64(caCertPem),
    },
  };
}

/** `postgresql://user:password@host:port/dbname?sslmode=verify-full` (user and password percent-encoded). */
export function connectionUri(v: {
  user: string;
  password: string;
  host: string;
  port: number | string;
  dbname: string;
}): string {
  const e = encodeURIComponent;
  return `postgresql://${e(v.user)}:${e(v.password)}@${v.host}:${v.port}/${e(v.dbname)}?sslmode=${APP_SSLMODE}`;
}

/**
 * Secret `<name>-app`, from the credentials Secret's plain values and the CA's certificate: the
 * read-write Service's fully qualified name (the name an application in another namespace uses, and one
 * the server certificate holds), the application user, and the CA to verify the server with.
 */
export function appSecret(
  db: DefaultedDatabase,
  credentials: Readonly<Record<string, string>>,
  caCertPem: string,
  clusterDomain = DEFAULT_CLUSTER_DOMAIN,
): Secret {
  const ep = endpoints(db, clusterDomain);
  const user = credentials[SECRET_KEYS.appUsername] ?? db.spec.username;
  const password = credentials[SECRET_KEYS.appPassword] ?? '';
  const dbname = credentials[SECRET_KEYS.database] ?? db.spec.databaseName;
  const values: Record<string, string> = {
    [APP_KEYS.host]: ep.readWrite,
    [APP_KEYS.port]: String(ep.port),
    [APP_KEYS.dbname]: dbname,
    [APP_KEYS.user]: user,
    [APP_KEYS.password]: password,
    [APP_KEYS.sslmode]: APP_SSLMODE,
    [APP_KEYS.uri]: connectionUri({ user, password, host: ep.readWrite, port: ep.port, dbname }),
    [APP_KEYS.ca]: caCertPem,
  };
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: childNames(db).appSecret,
      namespace: db.metadata.namespace,
      labels: commonLabels(db, 'app'),
    },
    type: 'Opaque',
    data: Object.fromEntries(Object.entries(values).map(([k, v]) => [k, b64(v)])),
  };
}
