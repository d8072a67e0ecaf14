/**
 * Certificates with ECDSA P-256 keys: a self-signed CA and the leaf certificates it signs, PEM in and out.
 * `import { createCa, issueLeaf } from '@opkit/runtime/pki'` (a subpath: nothing else of the runtime loads).
 * The certificate is written in DER here (der.ts, name.ts) and signed, and the keys made, by node:crypto
 * (OpenSSL): a certificate costs a key generation and a signature, about a tenth of what @peculiar/x509's
 * ASN.1 schemas on WebCrypto cost (a third of the Database operator's busy time at 1000 Databases). The
 * certificates are the same as those it made (same fields, extensions and string types).
 *
 * What certificates to make (names, validities, when to renew) is the caller's: the local control plane's
 * PKI (@opkit/controlplane) and a Database's TLS (the Database operator) both build on this.
 */
import {
  createHash,
  createPrivateKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  sign,
  X509Certificate,
} from 'node:crypto';
import {
  bitString,
  boolean,
  children,
  explicit,
  ipBytes,
  octetString,
  oid,
  readElement,
  sequence,
  smallInteger,
  time,
  tlv,
  unsignedInteger,
} from './der.ts';
import { encodeName } from './name.ts';

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

const OID = {
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  basicConstraints: '2.5.29.19',
  keyUsage: '2.5.29.15',
  extKeyUsage: '2.5.29.37',
  subjectKeyIdentifier: '2.5.29.14',
  authorityKeyIdentifier: '2.5.29.35',
  subjectAltName: '2.5.29.17',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
} as const;

/** keyUsage bits, as BIT STRINGs: keyCertSign and cRLSign (CA); digitalSignature and keyEncipherment. */
const CA_KEY_USAGE = bitString(Buffer.from([0x06]), 1);
const LEAF_KEY_USAGE = bitString(Buffer.from([0xa0]), 5);

function serial(): Buffer {
  // 16 random bytes, positive: a first hex digit of 8-f becomes 1 (as before: the first bit clear).
  const bytes = randomBytes(16);
  if ((bytes[0] ?? 0) >= 0x80) bytes[0] = 0x10 | ((bytes[0] ?? 0) & 0x0f);
  return unsignedInteger(bytes);
}

function pem(label: string, der: Uint8Array, trailingNewline = true): string {
  const b64 = Buffer.from(der)
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .trim();
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----${trailingNewline ? '\n' : ''}`;
}

function derOfPem(text: string): Buffer {
  return Buffer.from(text.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
}

const generateKeys = () => generateKeyPairSync('ec', { namedCurve: 'P-256' });

const privateKeyPem = (key: KeyObject): string => key.export({ type: 'pkcs8', format: 'pem' }).toString();

function extension(id: string, critical: boolean, value: Uint8Array): Buffer {
  return sequence(oid(id), ...(critical ? [boolean(true)] : []), octetString(value));
}

/** The subjectPublicKey's bits (the EC point) of a DER SubjectPublicKeyInfo. */
function publicKeyBits(spki: Buffer): Buffer {
  const [, bits] = children(readElement(spki));
  if (bits?.tag !== 0x03) throw new Error('SubjectPublicKeyInfo without a public key');
  return bits.content.subarray(1);
}

/** RFC 5280 4.2.1.2 method 1: the SHA-1 of the public key's bits. */
function keyIdentifier(spki: Buffer): Buffer {
  return createHash('sha1').update(publicKeyBits(spki)).digest();
}

/** Builds the TBSCertificate, signs it with `signingKey` (ECDSA SHA-256), and returns the PEM. */
function certificate(fields: {
  issuer: Buffer;
  subject: Buffer;
  notBefore: Date;
  notAfter: Date;
  spki: Buffer;
  extensions: Buffer[];
  signingKey: KeyObject;
}): string {
  const algorithm = sequence(oid(OID.ecdsaWithSha256));
  const tbs = sequence(
    explicit(0, smallInteger(2)),
    serial(),
    algorithm,
    fields.issuer,
    sequence(time(fields.notBefore), time(fields.notAfter)),
    fields.subject,
    fields.spki,
    explicit(3, sequence(...fields.extensions)),
  );
  const signature = sign('sha256', tbs, fields.signingKey);
  return pem('CERTIFICATE', sequence(tbs, algorithm, bitString(signature)), false);
}

/** What a CA certificate gives the leaves it signs: its subject (as encoded) and key identifier. */
function issuerOf(caCertPem: string): { subject: Buffer; keyId: Buffer; notAfter: Date } {
  const der = derOfPem(caCertPem);
  const [tbs] = children(readElement(der));
  if (!tbs) throw new Error('the CA certificate cannot be read: no TBSCertificate');
  const fields = children(tbs);
  const at = fields[0]?.tag === 0xa0 ? 1 : 0;
  const subject = fields[at + 4];
  const spki = fields[at + 5];
  if (!subject || !spki) throw new Error('the CA certificate cannot be read: no subject or public key');
  let keyId: Buffer | undefined;
  const exts = fields.find((f) => f.tag === 0xa3);
  if (exts) {
    const [list] = children(exts);
    for (const ext of list ? children(list) : []) {
      const parts = children(ext);
      if (parts[0]?.raw.equals(oid(OID.subjectKeyIdentifier))) {
        const value = parts[parts.length - 1];
        if (value) keyId = readElement(value.content).content;
      }
    }
  }
  return {
    subject: subject.raw,
    keyId: keyId ?? keyIdentifier(spki.raw),
    notAfter: new X509Certificate(der).validToDate,
  };
}

/** A new ECDSA P-256 key pair, PEM. */
export async function generateSigningKey(): Promise<SigningKeyPem> {
  const keys = generateKeys();
  return {
    publicKeyPem: keys.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    privateKeyPem: privateKeyPem(keys.privateKey),
  };
}

/** A new self-signed CA: CA:TRUE (critical), keyCertSign and cRLSign, its subject key identifier. */
export async function createCa(opts: CaOptions): Promise<CertificatePem> {
  const keys = generateKeys();
  const spki = keys.publicKey.export({ type: 'spki', format: 'der' });
  const name = encodeName(opts.subject);
  const constraints = sequence(
    boolean(true),
    ...(opts.pathLength !== undefined ? [smallInteger(opts.pathLength)] : []),
  );
  const certPem = certificate({
    issuer: name,
    subject: name,
    notBefore: opts.notBefore,
    notAfter: opts.notAfter,
    spki,
    extensions: [
      extension(OID.basicConstraints, true, constraints),
      extension(OID.keyUsage, true, CA_KEY_USAGE),
      extension(OID.subjectKeyIdentifier, false, octetString(keyIdentifier(spki))),
    ],
    signingKey: keys.privateKey,
  });
  return { certPem, keyPem: privateKeyPem(keys.privateKey) };
}

/**
 * A leaf certificate signed by `ca` with a new key: CA:FALSE, digitalSignature and keyEncipherment, the
 * usage asked for, the CA's key identifier, the hosts as subjectAltNames (IP addresses or DNS names).
 */
export async function issueLeaf(ca: CertificatePem, opts: LeafOptions): Promise<CertificatePem> {
  const issuer = issuerOf(ca.certPem);
  const caKey = createPrivateKey(ca.keyPem);
  const keys = generateKeys();
  const hosts = opts.hosts ?? [];
  const names = hosts.map((value) =>
    IP.test(value) ? tlv(0x87, ipBytes(value)) : tlv(0x82, Buffer.from(value, 'latin1')),
  );
  const certPem = certificate({
    issuer: issuer.subject,
    subject: encodeName(opts.subject),
    notBefore: opts.notBefore,
    notAfter: new Date(Math.min(opts.notAfter.getTime(), issuer.notAfter.getTime())),
    spki: keys.publicKey.export({ type: 'spki', format: 'der' }),
    extensions: [
      extension(OID.basicConstraints, true, sequence()),
      extension(OID.keyUsage, true, LEAF_KEY_USAGE),
      extension(
        OID.extKeyUsage,
        false,
        sequence(oid(opts.usage === 'client' ? OID.clientAuth : OID.serverAuth)),
      ),
      extension(OID.authorityKeyIdentifier, false, sequence(tlv(0x80, issuer.keyId))),
      ...(names.length > 0 ? [extension(OID.subjectAltName, false, sequence(...names))] : []),
    ],
    signingKey: caKey,
  });
  return { certPem, keyPem: privateKeyPem(keys.privateKey) };
}

const IP = /^[\d.]+$|:/;

/** An RFC 4514 attribute value, escaped (for a subject built from user input). */
export function rdnValue(value: string): string {
  return value.replace(/([,+"\\<>;=])/g, '\\$1').replace(/^([ #])/, '\\$1');
}
