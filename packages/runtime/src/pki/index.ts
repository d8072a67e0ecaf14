/**
 * Certificates with ECDSA P-256 keys (@peculiar/x509 on node:crypto's WebCrypto): a self-signed CA and
 * the leaf certificates it signs, PEM in and out. `import { createCa, issueLeaf } from '@opkit/runtime/pki'`
 * (a subpath: importing it registers node:crypto as x509's provider, nothing else of the runtime loads).
 *
 * What certificates to make (names, validities, when to renew) is the caller's: the local control plane's
 * PKI (@opkit/controlplane) and a Database's TLS (the Database operator) both build on this.
 */
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
export const DAY_MS = 24 * 60 * 60 * 1000;

/** A certificate and its private key (PKCS#8), PEM. */
export interface CertificatePem {
  certPem: string;
  keyPem: string;
}

/** A key pair without a certificate (e.g. a service-account signing key), PEM: SPKI and PKCS#8. */
export interface SigningKeyPem {
  publicKeyPem: string;
  privateKeyPem: string;
}

export interface CaOptions {
  /** The subject, RFC 4514 (escape values with rdnValue), e.g. `CN=opkit-local-ca`. */
  subject: string;
  notBefore: Date;
  notAfter: Date;
  /** basicConstraints pathLenConstraint: 0 lets the CA sign leaves only; unset: no limit. */
  pathLength?: number;
}

export interface LeafOptions {
  /** The subject, RFC 4514, e.g. `CN=system:node:real-0, O=system:nodes`. */
  subject: string;
  /** The extended key usage: serverAuth or clientAuth. */
  usage: 'server' | 'client';
  /** subjectAltNames: IP addresses and DNS names, in this order; none: no subjectAltName extension. */
  hosts?: readonly string[];
  notBefore: Date;
  /** Never past the CA's own expiry (a chain is not valid longer than its CA): the earlier of the two. */
  notAfter: Date;
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

async function privateKeyPem(key: CryptoKey): Promise<string> {
  return pem('PRIVATE KEY', await webcrypto.subtle.exportKey('pkcs8', key));
}

async function importKeyPem(keyPemText: string): Promise<CryptoKey> {
  const der = Buffer.from(keyPemText.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  return webcrypto.subtle.importKey('pkcs8', der, ALG, true, ['sign']);
}

const generateKeys = () =>
  webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']) as Promise<CryptoKeyPair>;

const IP = /^[\d.]+$|:/;

/** An RFC 4514 attribute value, escaped (for a subject built from user input). */
export function rdnValue(value: string): string {
  return value.replace(/([,+"\\<>;=])/g, '\\$1').replace(/^([ #])/, '\\$1');
}

/** A new ECDSA P-256 key pair, PEM. */
export async function generateSigningKey(): Promise<SigningKeyPem> {
  const keys = await generateKeys();
  return {
    publicKeyPem: pem('PUBLIC KEY', await webcrypto.subtle.exportKey('spki', keys.publicKey)),
    privateKeyPem: await privateKeyPem(keys.privateKey),
  };
}

/** A new self-signed CA: CA:TRUE (critical), keyCertSign and cRLSign, its subject key identifier. */
export async function createCa(opts: CaOptions): Promise<CertificatePem> {
  const keys = await generateKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: opts.subject,
    notBefore: opts.notBefore,
    notAfter: opts.notAfter,
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, opts.pathLength, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await privateKeyPem(keys.privateKey) };
}

/**
 * A leaf certificate signed by `ca` with a new key: CA:FALSE, digitalSignature and keyEncipherment, the
 * usage asked for, the CA's key identifier, the hosts as subjectAltNames (IP addresses or DNS names).
 */
export async function issueLeaf(ca: CertificatePem, opts: LeafOptions): Promise<CertificatePem> {
  const caCert = new x509.X509Certificate(ca.certPem);
  const caKey = await importKeyPem(ca.keyPem);
  const keys = await generateKeys();
  const hosts = opts.hosts ?? [];
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: opts.subject,
    issuer: caCert.subject,
    notBefore: opts.notBefore,
    notAfter: new Date(Math.min(opts.notAfter.getTime(), caCert.notAfter.getTime())),
    publicKey: keys.publicKey,
    signingKey: caKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment,
        true,
      ),
      new x509.ExtendedKeyUsageExtension([
        opts.usage === 'client' ? x509.ExtendedKeyUsage.clientAuth : x509.ExtendedKeyUsage.serverAuth,
      ]),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
      ...(hosts.length > 0
        ? [
            new x509.SubjectAlternativeNameExtension(
              hosts.map((value) =>
                IP.test(value) ? { type: 'ip' as const, value } : { type: 'dns' as const, value },
              ),
            ),
          ]
        : []),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await privateKeyPem(keys.privateKey) };
}
