/** Where clients connect: the DNS names of the read-write and read-only Services. */
import type { Database, DefaultedDatabase } from '../../../api/v1/database.ts';
import { engineFor } from '../engines/index.ts';
import { withDefaults } from './defaults.ts';
import { childNames } from './names.ts';

export interface Endpoints {
  /** `<name>.<ns>.svc.<domain>`: the primary. */
  readWrite: string;
  /** `<name>-ro.<ns>.svc.<domain>`: the replicas; only with replicas > 1. */
  readOnly?: string;
  port: number;
}

export const DEFAULT_CLUSTER_DOMAIN = 'cluster.local';

export function endpoints(
  db: Database | DefaultedDatabase,
  clusterDomain = DEFAULT_CLUSTER_DOMAIN,
): Endpoints {
  const d = withDefaults(db);
  const names = childNames(d);
  const ns = d.metadata.namespace ?? 'default';
  const host = (service: string) => `${service}.${ns}.svc.${clusterDomain}`;
  const out: Endpoints = { readWrite: host(names.readWrite), port: engineFor(d.spec.engine).port };
  if (d.spec.replicas > 1) out.readOnly = host(names.readOnly);
  return out;
}
