/**
 * Certificates for a Database's TLS: a per-Database CA (ECDSA P-256, self-signed, 10 years) and server
 * certificates it signs (90 days, the names clients and replicas connect to as DNS subjectAltNames, or IP
 * addresses). Made with @peculiar/x509 on node:crypto's WebCrypto, as the local control plane's PKI is
 * (packages/controlplane/src/pki.ts); no code is shared with it at run time.
 *
 * Generation is the only part that needs randomness and the clock; the decisions (keep, renew, reissue)
 * are pure functions in plan.ts over what inspect.ts reads from the PEM files.
 */
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
export const DAY_MS = 24 * 60 * 60 * 1000;
/** A CA lives long: clients pin it, so it is never replaced while it is valid. */
export const CA_VALIDITY_DAYS = 3650;
/** Server certificates are short-lived and renewed automatically (plan.ts: a third before expiry). */
export const SERVER_VALIDITY_DAYS = 90;
/** notBefore is backdated by this much, for clocks slightly behind the operator's. */
const BACKDATE_MS = 60 * 60 * 1000;

/** A certificate and its private key (PKCS#8), PEM. */
export interface CertificatePem {
  certPem: string;
  keyPem: string;
}

function serial(): string {
  // 16 random bytes, positive (the first bit clear).
  return Buffer.from(webcrypto.getRandomValues(new Uint8Array(16)))
    .toString('hex')
    .replace(/^[89a-f]/, '1');
}

function pem(label: string, der: ArrayBuffer): string {
  const b64 = Buffer.from(der)
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .trim();
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

async function keyPem(key: CryptoKey): Promise<string> {
  return pem('PRIVATE KEY', await webcrypto.subtle.exportKey('pkcs8', key));
}

async function importKeyPem(keyPemText: string): Promise<CryptoKey> {
  const der = Buffer.from(keyPemText.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  return webcrypto.subtle.importKey('pkcs8', der, ALG, true, ['sign']);
}

const generateKeys = () =>
  webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']) as Promise<CryptoKeyPair>;

/** An RFC 4514 attribute value, escaped. */
function rdnValue(value: string): string {
  return value.replace(/([,+"\\<>;=])/g, '\\$1').replace(/^([ #])/, '\\$1');
}

/** A new CA for one Database; `commonName` names it (e.g. `shop/orders`). */
export async function generateCa(commonName: string, now: Date = new Date()): Promise<CertificatePem> {
  const keys = await generateKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${rdnValue(commonName)}, O=opkit-database-operator`,
    notBefore: new Date(now.getTime() - BACKDATE_MS),
    notAfter: new Date(now.getTime() + CA_VALIDITY_DAYS * DAY_MS),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await keyPem(keys.privateKey) };
}

const IP = /^[\d.]+$|:/;

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
  const caCert = new x509.X509Certificate(ca.certPem);
  const caKey = await importKeyPem(ca.keyPem);
  const keys = await generateKeys();
  const notAfter = new Date(
    Math.min(now.getTime() + SERVER_VALIDITY_DAYS * DAY_MS, caCert.notAfter.getTime()),
  );
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${rdnValue(hosts[0] ?? '')}`,
    issuer: caCert.subject,
    notBefore: new Date(now.getTime() - BACKDATE_MS),
    notAfter,
    publicKey: keys.publicKey,
    signingKey: caKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment,
        true,
      ),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
      new x509.SubjectAlternativeNameExtension(
        hosts.map((value) =>
          IP.test(value) ? { type: 'ip' as const, value } : { type: 'dns' as const, value },
        ),
      ),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await keyPem(keys.privateKey) };
}
