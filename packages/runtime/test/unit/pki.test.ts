/**
 * @opkit/runtime/pki: the CA and the leaf certificates it signs (the control plane's PKI and a Database's
 * TLS build on them), read back with node:crypto's X509Certificate.
 */
import assert from 'node:assert/strict';
import { createPrivateKey, createPublicKey, sign, verify, X509Certificate } from 'node:crypto';
import { before, describe, test } from 'node:test';
import {
  type CertificatePem,
  createCa,
  DAY_MS,
  generateSigningKey,
  issueLeaf,
  rdnValue,
} from '../../src/pki/index.ts';

const NOW = new Date('2026-01-01T00:00:00Z');
const at = (days: number) => new Date(NOW.getTime() + days * DAY_MS);
const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';

describe('pki', () => {
  let ca: CertificatePem;
  before(async () => {
    ca = await createCa({ subject: 'CN=test-ca, O=opkit', notBefore: at(-1), notAfter: at(365) });
  });

  test('a CA: self-signed, CA:TRUE, the validity asked for, its key matches', () => {
    const cert = new X509Certificate(ca.certPem);
    assert.equal(cert.ca, true);
    assert.ok(cert.checkIssued(cert) && cert.verify(cert.publicKey));
    assert.match(cert.subject, /CN=test-ca/);
    assert.equal(new Date(cert.validFrom).getTime(), at(-1).getTime());
    assert.equal(new Date(cert.validTo).getTime(), at(365).getTime());
    assert.ok(cert.checkPrivateKey(createPrivateKey(ca.keyPem)));
  });

  test('a server leaf: signed by the CA, CA:FALSE, serverAuth, IPs and DNS names as subjectAltNames', async () => {
    const leaf = await issueLeaf(ca, {
      subject: 'CN=api',
      usage: 'server',
      hosts: ['127.0.0.1', 'localhost', 'api.example.svc', '::1'],
      notBefore: at(-1),
      notAfter: at(30),
    });
    const cert = new X509Certificate(leaf.certPem);
    const caCert = new X509Certificate(ca.certPem);
    assert.equal(cert.ca, false);
    assert.ok(cert.checkIssued(caCert) && cert.verify(caCert.publicKey));
    assert.deepEqual(cert.keyUsage, [SERVER_AUTH]);
    assert.equal(cert.checkHost('api.example.svc'), 'api.example.svc');
    assert.equal(cert.checkHost('other.example.svc'), undefined);
    assert.equal(cert.checkIP('127.0.0.1'), '127.0.0.1');
    assert.equal(cert.checkIP('::1'), '::1');
    assert.equal(cert.checkIP('10.0.0.1'), undefined);
    assert.ok(cert.checkPrivateKey(createPrivateKey(leaf.keyPem)));
    assert.equal(new Date(cert.validTo).getTime(), at(30).getTime());
  });

  test('a client leaf: clientAuth, the subject as given, no subjectAltName without hosts', async () => {
    const leaf = await issueLeaf(ca, {
      subject: 'CN=opkit-admin, O=system:masters',
      usage: 'client',
      notBefore: at(-1),
      notAfter: at(30),
    });
    const cert = new X509Certificate(leaf.certPem);
    assert.deepEqual(cert.keyUsage, [CLIENT_AUTH]);
    assert.match(cert.subject, /O=system:masters/);
    assert.equal(cert.subjectAltName, undefined);
  });

  test('a leaf is never valid past its CA', async () => {
    const leaf = await issueLeaf(ca, {
      subject: 'CN=x',
      usage: 'server',
      notBefore: NOW,
      notAfter: at(1000),
    });
    assert.equal(new X509Certificate(leaf.certPem).validTo, new X509Certificate(ca.certPem).validTo);
  });

  test('rdnValue escapes what would change the subject', async () => {
    assert.equal(rdnValue('shop/orders'), 'shop/orders');
    const c = await createCa({ subject: `CN=${rdnValue('a,O=evil')}`, notBefore: NOW, notAfter: at(1) });
    assert.doesNotMatch(new X509Certificate(c.certPem).subject, /^O=evil$/m);
  });

  test('a signing key pair: what the private key signs, the public key verifies', async () => {
    const pair = await generateSigningKey();
    const data = Buffer.from('token');
    const signature = sign('sha256', data, createPrivateKey(pair.privateKeyPem));
    assert.ok(verify('sha256', data, createPublicKey(pair.publicKeyPem), signature));
  });
});
