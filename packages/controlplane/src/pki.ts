/**
 * Generates the control plane's PKI with ECDSA P-256 keys: a CA, the apiserver's serving
 * certificate, an admin client certificate in system:masters, and the service-account key pair.
 */
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY = 24 * 60 * 60 * 1000;

export interface KeyPairPem {
  certPem: string;
  keyPem: string;
}

export interface Pki {
  ca: KeyPairPem;
  server: KeyPairPem;
  admin: KeyPairPem;
  serviceAccount: { publicKeyPem: string; privateKeyPem: string };
}

function serial(): string {
  return Buffer.from(webcrypto.getRandomValues(new Uint8Array(16)))
    .toString('hex')
    .replace(/^[89a-f]/, '1');
}

async function keyPem(key: CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  return `-----BEGIN PRIVATE KEY-----\n${der
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .trim()}\n-----END PRIVATE KEY-----\n`;
}

async function publicPem(key: CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('spki', key));
  return `-----BEGIN PUBLIC KEY-----\n${der
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .trim()}\n-----END PUBLIC KEY-----\n`;
}

const generate = () => webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']) as Promise<CryptoKeyPair>;

export interface PkiOptions {
  /** Extra names for the serving certificate (IPs or DNS names). */
  hosts?: string[];
  /** The first IP of the service range: the `kubernetes` Service's cluster IP. */
  serviceIP?: string;
}

export async function generatePki(opts: PkiOptions = {}): Promise<Pki> {
  const notBefore = new Date(Date.now() - DAY);
  const notAfter = new Date(Date.now() + 365 * DAY);
  const [caKeys, serverKeys, adminKeys, saKeys] = await Promise.all([
    generate(),
    generate(),
    generate(),
    generate(),
  ]);

  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: 'CN=opkit-local-ca',
    notBefore,
    notAfter,
    keys: caKeys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });

  const leaf = async (keys: CryptoKeyPair, name: string, usage: string, san?: x509.JsonGeneralNames) =>
    x509.X509CertificateGenerator.create({
      serialNumber: serial(),
      subject: name,
      issuer: caCert.subject,
      notBefore,
      notAfter,
      publicKey: keys.publicKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: ALG,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(
          x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment,
          true,
        ),
        new x509.ExtendedKeyUsageExtension([usage]),
        await x509.AuthorityKeyIdentifierExtension.create(caCert),
        ...(san ? [new x509.SubjectAlternativeNameExtension(san)] : []),
      ],
    });

  const ips = ['127.0.0.1', opts.serviceIP ?? '10.0.0.1'];
  const dns = [
    'localhost',
    'kubernetes',
    'kubernetes.default',
    'kubernetes.default.svc',
    'kubernetes.default.svc.cluster.local',
  ];
  for (const h of opts.hosts ?? []) (/^[\d.]+$|:/.test(h) ? ips : dns).push(h);
  const serverCert = await leaf(serverKeys, 'CN=kube-apiserver', x509.ExtendedKeyUsage.serverAuth, [
    ...ips.map((value) => ({ type: 'ip' as const, value })),
    ...dns.map((value) => ({ type: 'dns' as const, value })),
  ]);
  const adminCert = await leaf(
    adminKeys,
    'CN=opkit-admin, O=system:masters',
    x509.ExtendedKeyUsage.clientAuth,
  );

  return {
    ca: { certPem: caCert.toString('pem'), keyPem: await keyPem(caKeys.privateKey) },
    server: { certPem: serverCert.toString('pem'), keyPem: await keyPem(serverKeys.privateKey) },
    admin: { certPem: adminCert.toString('pem'), keyPem: await keyPem(adminKeys.privateKey) },
    serviceAccount: {
      publicKeyPem: await publicPem(saKeys.publicKey),
      privateKeyPem: await keyPem(saKeys.privateKey),
    },
  };
}

async function importKeyPem(pem: string): Promise<CryptoKey> {
  const der = Buffer.from(pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  return webcrypto.subtle.importKey('pkcs8', der, ALG, true, ['sign']);
}

export interface IssueOptions {
  /** e.g. 'CN=system:node:real-0, O=system:nodes' */
  subject: string;
  usage: 'client' | 'server';
  /** IPs and DNS names (serving certificates). */
  hosts?: string[];
}

/** A leaf certificate signed by an existing CA (a node's kubelet, kube-proxy, the apiserver's kubelet client). */
export async function issueCertificate(ca: KeyPairPem, opts: IssueOptions): Promise<KeyPairPem> {
  const caCert = new x509.X509Certificate(ca.certPem);
  const caKey = await importKeyPem(ca.keyPem);
  const keys = await generate();
  const hosts = opts.hosts ?? [];
  const san = hosts.map((value) =>
    /^[\d.]+$|:/.test(value) ? { type: 'ip' as const, value } : { type: 'dns' as const, value },
  );
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: opts.subject,
    issuer: caCert.subject,
    notBefore: new Date(Date.now() - DAY),
    notAfter: new Date(Date.now() + 365 * DAY),
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
      ...(san.length ? [new x509.SubjectAlternativeNameExtension(san)] : []),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await keyPem(keys.privateKey) };
}
