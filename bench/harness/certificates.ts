/**
 * Certificates and keys compared by meaning, not bytes (for the equivalence check): every implementation
 * generates its own keys, serials and signatures, so two runs never hold the same PEM. What must agree is
 * what a client relies on: a CA is a CA (self-signed, its subject, key type, validity); a server
 * certificate is signed by the CA of that Database's `-ca` Secret and holds the same names
 * (subjectAltNames), key type, usages and validity; a private key is the key of its certificate; a copy
 * of a CA's certificate elsewhere (`ca.crt` of `-server` and `-app`) is that CA's, by name.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import type { KubeObject } from './kube.ts';

const CERT = /^-----BEGIN CERTIFICATE-----/;
const KEY = /^-----BEGIN (EC |RSA )?PRIVATE KEY-----/;
const HOUR_MS = 60 * 60 * 1000;

/** The CAs of a namespace: every Secret that holds a CA certificate and its key (ca.crt, ca.key). */
export interface CaIndex {
  /** Secret name -> its CA certificate. */
  cas: Map<string, X509Certificate>;
}

function decoded(secret: KubeObject): Record<string, string> {
  const data = (secret.data ?? {}) as Record<string, string>;
  return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]));
}

function parse(pem: string): X509Certificate | undefined {
  try {
    return new X509Certificate(pem);
  } catch {
    return undefined;
  }
}

export function isPem(value: string): boolean {
  return CERT.test(value) || KEY.test(value);
}

export function caIndex(secrets: readonly KubeObject[]): CaIndex {
  const cas = new Map<string, X509Certificate>();
  for (const s of secrets) {
    const d = decoded(s);
    const cert = d['ca.crt'] && d['ca.key'] ? parse(d['ca.crt']) : undefined;
    if (cert?.ca) cas.set(s.metadata.name, cert);
  }
  return { cas };
}

function keyType(k: { asymmetricKeyType?: string; asymmetricKeyDetails?: { namedCurve?: string } }) {
  return [k.asymmetricKeyType, k.asymmetricKeyDetails?.namedCurve].filter(Boolean).join(' ');
}

/** The CA among `cas` (Secret name) or this Secret's own certificates (key name) that signed `cert`. */
function issuer(cert: X509Certificate, own: Record<string, X509Certificate>, index?: CaIndex): string {
  for (const [name, ca] of index?.cas ?? []) {
    if (cert.checkIssued(ca) && cert.verify(ca.publicKey)) return `the CA of Secret ${name}`;
  }
  for (const [key, ca] of Object.entries(own)) {
    if (ca !== cert && ca.ca && cert.checkIssued(ca) && cert.verify(ca.publicKey))
      return `${key} of this Secret`;
  }
  return 'no CA of this namespace';
}

/**
 * The PEM values of a Secret (decoded data), described: certificates by what they say and who signed
 * them, keys by the certificate they belong to. Other values are left out of the result.
 */
export function describePem(
  secretName: string,
  values: Record<string, string>,
  index?: CaIndex,
): Record<string, string> {
  const certs: Record<string, X509Certificate> = {};
  for (const [k, v] of Object.entries(values)) {
    const c = CERT.test(v) ? parse(v) : undefined;
    if (c) certs[k] = c;
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(values)) {
    if (!isPem(v)) continue;
    if (KEY.test(v)) {
      try {
        const key = createPrivateKey(v);
        const of = Object.entries(certs).find(([, c]) => c.checkPrivateKey(key))?.[0];
        out[k] = `<${keyType(key)} private key of ${of ?? 'no certificate of this Secret'}>`;
      } catch (err) {
        out[k] = `<unreadable private key: ${(err as Error).message}>`;
      }
      continue;
    }
    const cert = certs[k];
    if (!cert) {
      out[k] = '<unreadable certificate>';
      continue;
    }
    // A copy of a CA kept elsewhere is that CA, by name.
    const copyOf = [...(index?.cas ?? [])].find(
      ([name, ca]) => name !== secretName && ca.raw.equals(cert.raw),
    );
    if (copyOf) {
      out[k] = `<certificate of the CA of Secret ${copyOf[0]}>`;
      continue;
    }
    const hours = (Date.parse(cert.validTo) - Date.parse(cert.validFrom)) / HOUR_MS;
    const selfSigned = cert.checkIssued(cert) && cert.verify(cert.publicKey);
    const parts = [
      cert.ca ? 'CA certificate' : 'certificate',
      `subject ${cert.subject.replaceAll('\n', ', ')}`,
      `${keyType(cert.publicKey)} key`,
      `valid ${hours} h`,
      selfSigned ? 'self-signed' : `issued by ${issuer(cert, certs, index)}`,
      ...(cert.subjectAltName ? [`names ${cert.subjectAltName}`] : []),
      ...(cert.keyUsage?.length ? [`extended usages ${cert.keyUsage.join(' ')}`] : []),
    ];
    out[k] = `<${parts.join('; ')}>`;
  }
  return out;
}
