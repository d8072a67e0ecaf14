/**
 * SCRAM-SHA-256 verifiers, computed by the operator (RFC 5802 / RFC 7677, PostgreSQL's pg_authid
 * format), so that a password change reaches the database as `ALTER ROLE ... PASSWORD '<verifier>'`:
 * the plain text never goes into a SQL statement, so never into the server's statement log.
 *
 * The salt is derived (HMAC of the Database's uid and the role name, keyed by the password), so the same
 * password gives the same verifier on every reconcile: the Secret only changes when a password does.
 * It is unique per Database and role, which is what a salt is for.
 */
import { createHash, createHmac, pbkdf2Sync } from 'node:crypto';

export const SCRAM_ITERATIONS = 4096;

export function scramVerifier(password: string, salt: Buffer, iterations = SCRAM_ITERATIONS): string {
  // PostgreSQL applies SASLprep; NFKC is its effect on the passwords the operator generates (ASCII).
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

/**
 * Verifiers computed, by their salt: the salt is an HMAC keyed by the password over the Database and the
 * role, so it stands for all three without holding the password. Every reconcile checks the Secret's
 * verifiers against its passwords; without this, each check ran PBKDF2's 4096 rounds again (the largest
 * share of the operator's CPU in bench/ at N=1000). Bounded: the oldest entry goes first.
 */
const computed = new Map<string, string>();
const COMPUTED_LIMIT = 16_384;

/** A verifier as the operator writes it (its iterations, a 16-byte salt, two SHA-256 keys); group 1: the salt. */
const STORED = new RegExp(
  `^SCRAM-SHA-256\\$${SCRAM_ITERATIONS}:([A-Za-z0-9+/]{22}==)\\$[A-Za-z0-9+/]{43}=:[A-Za-z0-9+/]{43}=$`,
);

/**
 * The verifier the operator stores for a role of a Database (deterministic, see above).
 *
 * `stored`: the verifier the Secret holds. If its salt is this password's (an HMAC keyed by the password,
 * so another password has another salt), the operator wrote it from this password and it is kept as it
 * is: a restarted operator, whose memory above is empty, checks each Database's verifiers with one HMAC
 * instead of PBKDF2's 4096 rounds (about 1 ms of the main thread each; 2 s for 1000 Databases).
 */
export function roleVerifier(password: string, databaseId: string, role: string, stored?: string): string {
  const salt = createHmac('sha256', password)
    .update(`opkit\0${databaseId}\0${role}`)
    .digest()
    .subarray(0, 16);
  const key = salt.toString('base64');
  const known = computed.get(key);
  if (known !== undefined) return known;
  const verifier =
    stored !== undefined && STORED.exec(stored)?.[1] === key ? stored : scramVerifier(password, salt);
  if (computed.size >= COMPUTED_LIMIT) computed.delete(computed.keys().next().value as string);
  computed.set(key, verifier);
  return verifier;
}
