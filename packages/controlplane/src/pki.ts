/**
 * Generates the control plane's PKI with ECDSA P-256 keys (@opkit/runtime/pki): a CA, the apiserver's
 * serving certificate, an admin client certificate in system:masters, and the service-account key pair.
 * Everything is valid from a day ago for a year.
 */
import { type CertificatePem, createCa, DAY_MS, generateSigningKey, issueLeaf } from '@opkit/runtime/pki';

/** A certificate and its private key, PEM. */
export type KeyPairPem = CertificatePem;

export interface Pki {
  ca: KeyPairPem;
  server: KeyPairPem;
  admin: KeyPairPem;
  serviceAccount: { publicKeyPem: string; privateKeyPem: string };
}

export interface PkiOptions {
  /** Extra names for the serving certificate (IPs or DNS names). */
  hosts?: string[];
  /** The first IP of the service range: the `kubernetes` Service's cluster IP. */
  serviceIP?: string;
}

/** From a day ago (clocks behind ours) for a year. */
function validity(): { notBefore: Date; notAfter: Date } {
  return { notBefore: new Date(Date.now() - DAY_MS), notAfter: new Date(Date.now() + 365 * DAY_MS) };
}

export async function generatePki(opts: PkiOptions = {}): Promise<Pki> {
  const { notBefore, notAfter } = validity();
  const [ca, serviceAccount] = await Promise.all([
    createCa({ subject: 'CN=opkit-local-ca', notBefore, notAfter }),
    generateSigningKey(),
  ]);
  const ips = ['127.0.0.1', opts.serviceIP ?? '10.0.0.1'];
  const dns = [
    'localhost',
    'kubernetes',
    'kubernetes.default',
    'kubernetes.default.svc',
    'kubernetes.default.svc.cluster.local',
  ];
  for (const h of opts.hosts ?? []) (/^[\d.]+$|:/.test(h) ? ips : dns).push(h);
  const [server, admin] = await Promise.all([
    issueLeaf(ca, {
      subject: 'CN=kube-apiserver',
      usage: 'server',
      hosts: [...ips, ...dns],
      notBefore,
      notAfter,
    }),
    issueLeaf(ca, { subject: 'CN=opkit-admin, O=system:masters', usage: 'client', notBefore, notAfter }),
  ]);
  return { ca, server, admin, serviceAccount };
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
  return issueLeaf(ca, { ...opts, ...validity() });
}
