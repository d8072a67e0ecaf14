/**
 * Certificates for a Database's TLS: a per-Database CA (ECDSA P-256, self-signed, 10 years) and server
 * certificates it signs (90 days, the names clients and replicas connect to as DNS subjectAltNames, or IP
 * addresses). Made with the runtime's PKI (@opkit/runtime/pki), as the local control plane's is; this file
 * holds the Database's own choices: names, validities, the backdating.
 *
 * Generation is the only part that needs randomness and the clock; the decisions (keep, renew, reissue)
 * are pure functions in plan.ts over what its inspectCertificate reads from the PEM files.
 */
import { type CertificatePem, createCa, DAY_MS, issueLeaf, rdnValue } from '@opkit/runtime/pki';

export { type CertificatePem, DAY_MS };
/** A CA lives long: clients pin it, so it is never replaced while it is valid. */
export const CA_VALIDITY_DAYS = 3650;
/** Server certificates are short-lived and renewed automatically (plan.ts: a third before expiry). */
export const SERVER_VALIDITY_DAYS = 90;
/** notBefore is backdated by this much, for clocks slightly behind the operator's. */
const BACKDATE_MS = 60 * 60 * 1000;

/** A new CA for one Database; `commonName` names it (e.g. `shop/orders`). */
export async function generateCa(commonName: string, now: Date = new Date()): Promise<CertificatePem> {
  return createCa({
    subject: `CN=${rdnValue(commonName)}, O=opkit-database-operator`,
    notBefore: new Date(now.getTime() - BACKDATE_MS),
    notAfter: new Date(now.getTime() + CA_VALIDITY_DAYS * DAY_MS),
    pathLength: 0,
  });
}

/**
 * A server certificate signed by `ca` for `hosts` (DNS names, or IP addresses), valid
 * SERVER_VALIDITY_DAYS but never past the CA's own expiry. The first host is the common name.
 */
export async function issueServerCertificate(
  ca: CertificatePem,
  hosts: readonly string[],
  now: Date = new Date(),
): Promise<CertificatePem> {
  if (hosts.length === 0) throw new Error('a server certificate needs at least one host name');
  return issueLeaf(ca, {
    subject: `CN=${rdnValue(hosts[0] ?? '')}`,
    usage: 'server',
    hosts,
    notBefore: new Date(now.getTime() - BACKDATE_MS),
    notAfter: new Date(now.getTime() + SERVER_VALIDITY_DAYS * DAY_MS),
  });
}
