/** The builders work on the defaulted spec: a Database read from the API server already is. */
import {
  type Database,
  Databases,
  DEFAULT_PRIMARY_LEASE_SECONDS,
  type DefaultedDatabase,
} from '../../../api/v1/database.ts';

/** The Databases withDefaults returned: the builders of one reconcile share one, never copied again. */
const defaulted = new WeakSet<object>();

/**
 * A copy with the schema defaults applied (a no-op on what the API server returns); given a Database it
 * returned before, that Database itself (a reconcile's builders each ask for it: one copy, not eleven).
 * The builders only read it.
 */
export function withDefaults(db: Database | DefaultedDatabase): DefaultedDatabase {
  if (defaulted.has(db)) return db as DefaultedDatabase;
  const d = Databases.applyDefaults(db as Database);
  defaulted.add(d);
  return d;
}

/** spec.primaryLeaseSeconds or its default (postgres: the primary lease, desired/lease.ts). */
export function primaryLeaseSeconds(db: Database | DefaultedDatabase): number {
  return db.spec.primaryLeaseSeconds ?? DEFAULT_PRIMARY_LEASE_SECONDS;
}
