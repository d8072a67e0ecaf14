/**
 * Where PostgreSQL's things are in its pod: the port, the uid and users, the files the ConfigMap holds,
 * the mounts (credentials, TLS, the passfile), the official image's name and data layout per major, and
 * the paths the configuration is rendered with (the pod's, or a test's).
 */
import { CONFIG_DIR } from '../../desired/names.ts';
import type { DataLayout } from '../types.ts';

export const POSTGRES_PORT = 5432;
export const POSTGRES_UID = 999;
export const POSTGRES_ADMIN_USER = 'postgres';
export const POSTGRES_REPLICATION_USER = 'replicator';
/** The image's socket directory (psql's compiled-in default on Debian). */
export const POSTGRES_SOCKET_DIR = '/var/run/postgresql';
/** Seconds the pod gets to stop; the preStop fast shutdown waits a little less. */
export const POSTGRES_TERMINATION_GRACE = 60;

export const POSTGRES_FILES = {
  conf: 'postgresql.conf',
  hba: 'pg_hba.conf',
  instance: 'instance.sh',
  health: 'health.sh',
  credentials: 'credentials.sh',
  lease: 'lease.sh',
} as const;
/** The projected volume of the instance ServiceAccount's token (the credentials sidecar only). */
export const POSTGRES_LEASE_TOKEN_VOLUME = 'lease-token';
/** Lifetime of the projected token (the kubelet rotates it at 80%). */
export const LEASE_TOKEN_SECONDS = 3600;
/** Where the credentials sidecar mounts the Secret (its verifiers and the replication password). */
export const POSTGRES_CREDENTIALS_DIR = '/etc/opkit-credentials';
/** The in-memory volume of the replication passfile (never on the data volume). */
export const POSTGRES_RUN_DIR = '/run/opkit';
export const POSTGRES_PASSFILE = `${POSTGRES_RUN_DIR}/pgpass`;
/**
 * Where the server certificate Secret (`<name>-server`: tls.crt, tls.key, ca.crt) is mounted. The
 * kubelet makes the files root:<fsGroup 999> 0640 (defaultMode 0640, the pod's fsGroup), which
 * PostgreSQL accepts for a key owned by root (0600 if owned by the server's uid); it updates them in
 * place when the certificate is renewed, and the credentials sidecar reloads the server.
 */
export const POSTGRES_TLS_DIR = '/etc/opkit-tls';
export const POSTGRES_TLS_FILES = { cert: 'tls.crt', key: 'tls.key', ca: 'ca.crt' } as const;

/** The major version of a spec.version ('16' -> 16, '16.4' -> 16). */
export function postgresMajor(version: string): number {
  const major = Number.parseInt(version, 10);
  if (!Number.isInteger(major) || major <= 0) throw new Error(`not a postgres version: ${version}`);
  return major;
}

/** The official image for a version: postgres:<major>, which follows the latest minor release. */
export function postgresImage(version: string): string {
  return `postgres:${postgresMajor(version)}`;
}

/**
 * The data layout of the official image. Up to 17 the image declares /var/lib/postgresql/data; the data
 * goes in a subdirectory of the mount (PGDATA=/var/lib/postgresql/data/pgdata). From 18 on the image
 * keeps data in /var/lib/postgresql/<major>/docker (pg_ctlcluster style, so `pg_upgrade --link` works
 * across majors on one volume) and expects the mount at /var/lib/postgresql; it refuses to start when
 * /var/lib/postgresql/data is a mount.
 */
export function postgresLayout(version: string): DataLayout {
  const major = postgresMajor(version);
  if (major >= 18)
    return { mountPath: '/var/lib/postgresql', dataDir: `/var/lib/postgresql/${major}/docker` };
  return { mountPath: '/var/lib/postgresql/data', dataDir: '/var/lib/postgresql/data/pgdata' };
}

/** Where the server listens and finds its files: the pod's values, or a test's. */
export interface PostgresPaths {
  port: number;
  /** Directory holding pg_hba.conf (the ConfigMap mount). */
  configDir: string;
  socketDir: string;
  listenAddresses: string;
  /** Directory holding tls.crt, tls.key and ca.crt (the server certificate Secret's mount). */
  tlsDir: string;
}

export const POD_PATHS: PostgresPaths = {
  port: POSTGRES_PORT,
  configDir: CONFIG_DIR,
  socketDir: POSTGRES_SOCKET_DIR,
  listenAddresses: '*',
  tlsDir: POSTGRES_TLS_DIR,
};
