/**
 * What to do with a Database's CA and server certificate: pure decisions over what the PEM files say
 * (read with node:crypto's X509Certificate, synchronous and deterministic), so they are unit-tested
 * without generating anything.
 *
 *   CA:     kept while it is usable and not expired: clients pin it, so a valid CA is never replaced.
 *           Generated when missing, unreadable, not a CA, not matching its key, or expired.
 *   server: issued when missing, unreadable, not matching its key, not signed by the current CA, not
 *           covering every name it must (names it has in excess are fine: a scale-down reissues
 *           nothing), or when less than a third of its validity remains (renewed well before expiry).
 */
import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';

/** What a certificate and its key say, or why they cannot be used. */
export interface CertificateFacts {
  notBefore: Date;
  notAfter: Date;
  /** subjectAltName DNS names and IP addresses. */
  hosts: string[];
  isCa: boolean;
  /** The private key is the certificate's. */
  keyMatches: boolean;
  /** Signed by the CA it was checked against (server certificates). */
  signedByCa?: boolean;
}

export type Inspection = { facts: CertificateFacts } | { problem: string };

/** The subjectAltName DNS names and IP addresses (node's `DNS:a, IP Address:1.2.3.4` form). */
export function subjectAltNames(cert: X509Certificate): string[] {
  return (cert.subjectAltName ?? '')
    .split(/,\s*/)
    .map((s) => s.trim())
    .filter((s) => s.startsWith('DNS:') || s.startsWith('IP Address:'))
    .map((s) => s.slice(s.indexOf(':') + 1).replace(/^"|"$/g, ''));
}

/**
 * What was read from PEM files already, by a hash of them: every reconcile of a postgres Database
 * inspects its CA and server certificate (parsing both, the CA twice, the keys, a signature check:
 * ~0.3 ms), and they rarely change. Bounded; the oldest entry goes first.
 */
const inspected = new Map<string, Inspection>();
const INSPECTED_MAX = 10_000;

/**
 * Reads a certificate and its key (and checks it against `caPem` when given). Never throws. The same
 * PEM files give the same (shared, frozen) answer: read once.
 */
export function inspectCertificate(
  certPem: string | undefined,
  keyPem: string | undefined,
  caPem?: string,
): Inspection {
  if (!certPem) return { problem: 'no certificate' };
  if (!keyPem) return { problem: 'no private key' };
  const key = createHash('sha256')
    .update(certPem)
    .update('\0')
    .update(keyPem)
    .update(caPem === undefined ? '\u0001' : `\0${caPem}`)
    .digest('base64');
  const known = inspected.get(key);
  if (known) return known;
  const result = Object.freeze(readCertificate(certPem, keyPem, caPem));
  if ('facts' in result) Object.freeze(Object.freeze(result.facts).hosts);
  inspected.set(key, result);
  if (inspected.size > INSPECTED_MAX) {
    const oldest = inspected.keys().next().value;
    if (oldest !== undefined) inspected.delete(oldest);
  }
  return result;
}

function readCertificate(certPem: string, keyPem: string, caPem: string | undefined): Inspection {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(certPem);
  } catch (err) {
    return { problem: `the certificate cannot be read (${(err as Error).message})` };
  }
  let keyMatches = false;
  try {
    keyMatches = cert.checkPrivateKey(createPrivateKey(keyPem));
  } catch (err) {
    return { problem: `the private key cannot be read (${(err as Error).message})` };
  }
  const facts: CertificateFacts = {
    notBefore: new Date(cert.validFrom),
    notAfter: new Date(cert.validTo),
    hosts: subjectAltNames(cert),
    isCa: cert.ca,
    keyMatches,
  };
  if (caPem !== undefined) {
    try {
      const ca = new X509Certificate(caPem);
      facts.signedByCa = cert.checkIssued(ca) && cert.verify(ca.publicKey);
    } catch {
      facts.signedByCa = false;
    }
  }
  return { facts };
}

export type CertificateDecision =
  | { action: 'keep' /** when the server certificate is due for renewal */; renewAt?: Date }
  | { action: 'issue'; reason: string };

/** The CA: kept while usable and not expired. */
export function caDecision(inspection: Inspection | undefined, now: Date): CertificateDecision {
  if (!inspection) return { action: 'issue', reason: 'there is no CA yet' };
  if ('problem' in inspection)
    return { action: 'issue', reason: `the CA is unusable: ${inspection.problem}` };
  const f = inspection.facts;
  if (!f.isCa) return { action: 'issue', reason: 'the CA certificate is not a CA' };
  if (!f.keyMatches) return { action: 'issue', reason: 'the CA key does not match its certificate' };
  if (f.notAfter.getTime() <= now.getTime())
    return { action: 'issue', reason: `the CA expired on ${f.notAfter.toISOString()}` };
  return { action: 'keep' };
}

/** The server certificate: renewed when a third of its validity remains, reissued when it does not fit. */
export function serverCertificateDecision(
  inspection: Inspection | undefined,
  hosts: readonly string[],
  now: Date,
): CertificateDecision {
  if (!inspection) return { action: 'issue', reason: 'there is no server certificate yet' };
  if ('problem' in inspection)
    return { action: 'issue', reason: `the server certificate is unusable: ${inspection.problem}` };
  const f = inspection.facts;
  if (!f.keyMatches) return { action: 'issue', reason: 'the server key does not match its certificate' };
  if (f.signedByCa === false)
    return { action: 'issue', reason: 'the server certificate is not signed by the current CA' };
  const have = new Set(f.hosts);
  const missing = hosts.filter((h) => !have.has(h));
  if (missing.length > 0)
    return { action: 'issue', reason: `the server certificate lacks the names ${missing.join(', ')}` };
  const validity = f.notAfter.getTime() - f.notBefore.getTime();
  const renewAt = new Date(f.notAfter.getTime() - validity / 3);
  if (now.getTime() >= renewAt.getTime())
    return {
      action: 'issue',
      reason: `the server certificate expires on ${f.notAfter.toISOString()} (renewed a third of its validity before)`,
    };
  return { action: 'keep', renewAt };
}
