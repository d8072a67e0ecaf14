/**
 * The control plane's PKI (pki.ts on @opkit/runtime/pki): the names the apiserver serves, the admin in
 * system:masters, the service-account key pair, and a node's certificate from the same CA.
 */
import assert from 'node:assert/strict';
import { createPrivateKey, createPublicKey, sign, verify, X509Certificate } from 'node:crypto';
import { before, describe, test } from 'node:test';
import { generatePki, issueCertificate, type Pki } from '../../src/pki.ts';

describe('control plane pki', () => {
  let pki: Pki;
  before(async () => {
    pki = await generatePki({ serviceIP: '10.96.0.1', hosts: ['192.168.7.2', 'api.local'] });
  });

  test('the serving certificate: the kubernetes Service names and IPs, the extra hosts, signed by the CA', () => {
    const ca = new X509Certificate(pki.ca.certPem);
    const server = new X509Certificate(pki.server.certPem);
    assert.equal(ca.ca, true);
    assert.ok(server.checkIssued(ca) && server.verify(ca.publicKey));
    for (const h of [
      'localhost',
      'kubernetes.default.svc',
      'kubernetes.default.svc.cluster.local',
      'api.local',
    ])
      assert.equal(server.checkHost(h), h, h);
    for (const ip of ['127.0.0.1', '10.96.0.1', '192.168.7.2']) assert.equal(server.checkIP(ip), ip, ip);
    assert.deepEqual(server.keyUsage, ['1.3.6.1.5.5.7.3.1']);
  });

  test('the admin: a client certificate in system:masters', () => {
    const admin = new X509Certificate(pki.admin.certPem);
    assert.match(admin.subject, /CN=opkit-admin/);
    assert.match(admin.subject, /O=system:masters/);
    assert.deepEqual(admin.keyUsage, ['1.3.6.1.5.5.7.3.2']);
    assert.ok(admin.checkIssued(new X509Certificate(pki.ca.certPem)));
  });

  test('the service-account key pair signs and verifies', () => {
    const data = Buffer.from('token');
    const sig = sign('sha256', data, createPrivateKey(pki.serviceAccount.privateKeyPem));
    assert.ok(verify('sha256', data, createPublicKey(pki.serviceAccount.publicKeyPem), sig));
  });

  test("a node's kubelet certificate from the same CA: serving its IP, valid a year", async () => {
    const kubelet = await issueCertificate(pki.ca, {
      subject: 'CN=system:node:real-0, O=system:nodes',
      usage: 'server',
      hosts: ['10.200.0.2', 'real-0'],
    });
    const cert = new X509Certificate(kubelet.certPem);
    assert.ok(cert.checkIssued(new X509Certificate(pki.ca.certPem)));
    assert.equal(cert.checkIP('10.200.0.2'), '10.200.0.2');
    assert.equal(cert.checkHost('real-0'), 'real-0');
    const days = (new Date(cert.validTo).getTime() - Date.now()) / 86_400_000;
    assert.ok(days > 363 && days <= 365, `valid ${days} days`);
  });
});
