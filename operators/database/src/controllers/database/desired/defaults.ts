/** The builders work on the defaulted spec: a Database read from the API server already is. */
import {
  type Database,
  Databases,
  DEFAULT_PRIMARY_LEASE_SECONDS,
  type DefaultedDatabase,
} from '../../../api/v1/database.ts';

/** A copy with the schema defaults applied (a no-op on what the API server returns). */
export function withDefaults(db: Database | DefaultedDatabase): DefaultedDatabase {
  return Databases.applyDefaults(db as Database);
}

/** spec.primaryLeaseSeconds or its default (postgres: the primary lease, desired/lease.ts). */
export function primaryLeaseSeconds(db: Database | DefaultedDatabase): number {
  return db.spec.primaryLeaseSeconds ?? DEFAULT_PRIMARY_LEASE_SECONDS;
}
