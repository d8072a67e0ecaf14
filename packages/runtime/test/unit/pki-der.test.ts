/**
 * The PKI's own DER (der.ts, name.ts): subjects encoded as the certificates made before with
 * @peculiar/x509 were (string types, order, escapes), times, IP addresses, and a CA made by that earlier
 * code still signing leaves (its subject copied byte for byte, its key identifier as the authority's).
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { describe, test } from 'node:test';
import { children, ipBytes, readElement, time } from '../../src/pki/der.ts';
import { createCa, DAY_MS, issueLeaf, rdnValue } from '../../src/pki/index.ts';
import { encodeName, parseName } from '../../src/pki/name.ts';

/** A test CA (`CN=shop/orders, O=opkit-database-operator`, 2026-2036) made by the PKI before it wrote DER itself. */
const PECULIAR_CA = {
  certPem: [
    '-----BEGIN CERTIFICATE-----',
    'MIIBszCCAVmgAwIBAgIQcIB0+YNZHAbwjRLv+cxBPjAKBggqhkjOPQQDAjA4MRQw',
    'EgYDVQQDEwtzaG9wL29yZGVyczEgMB4GA1UEChMXb3BraXQtZGF0YWJhc2Utb3Bl',
    'cmF0b3IwHhcNMjYwMTAxMDAwMDAwWhcNMzYwMTAxMDAwMDAwWjA4MRQwEgYDVQQD',
    'EwtzaG9wL29yZGVyczEgMB4GA1UEChMXb3BraXQtZGF0YWJhc2Utb3BlcmF0b3Iw',
    'WTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAQUBNA3vJFEPpp6eDrRwhvH7ytH4EiZ',
    'DdIMo/ehYEVACRY9Ncw73qvuudbLJa2W//GkvTpLOUeEtKJChak+/duco0UwQzAS',
    'BgNVHRMBAf8ECDAGAQH/AgEAMA4GA1UdDwEB/wQEAwIBBjAdBgNVHQ4EFgQUay8v',
    'ITJUuS+3B6fhI66pdBZ6vOkwCgYIKoZIzj0EAwIDSAAwRQIhAKlrITnf1SUEssoi',
    'Wms/U57Hh+wr0HWwF1KSf12GEOvgAiBwuAR3fuRu3omz6jaz+c6ucBCsMz2L0wuv',
    'ktJQaqhZhw==',
    '-----END CERTIFICATE-----',
  ].join('\n'),
  keyPem: [
    '-----BEGIN PRIVATE KEY-----',
    'MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg14PkWqi8MocshniF',
    'szmF+faCaqtia80bxIc8HQRLZsmhRANCAAQUBNA3vJFEPpp6eDrRwhvH7ytH4EiZ',
    'DdIMo/ehYEVACRY9Ncw73qvuudbLJa2W//GkvTpLOUeEtKJChak+/duc',
    '-----END PRIVATE KEY-----',
  ].join('\n'),
};

/** Tag and text of each attribute value of a DER Name, in order. */
function attributes(name: Buffer): [number, string][] {
  return children(readElement(name)).flatMap((rdn) =>
    children(rdn).map((attr) => {
      const value = children(attr)[1];
      return [value?.tag ?? 0, value?.content.toString('utf8') ?? ''] as [number, string];
    }),
  );
}

/** The TBSCertificate's fields of a PEM certificate. */
function tbsFields(pem: string) {
  const der = Buffer.from(pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  const [tbs] = children(readElement(der));
  assert.ok(tbs);
  return children(tbs);
}

describe('pki DER', () => {
  test('subjects: in the order written, PrintableString when possible, else UTF8String; escapes undone', () => {
    assert.deepEqual(attributes(encodeName('CN=system:node:real-0, O=system:nodes')), [
      [0x13, 'system:node:real-0'],
      [0x13, 'system:nodes'],
    ]);
    assert.deepEqual(attributes(encodeName('CN=my_db')), [[0x0c, 'my_db']]);
    assert.deepEqual(parseName(`CN=${rdnValue('a,O=evil+x')}`), [[{ type: 'CN', value: 'a,O=evil+x' }]]);
    assert.deepEqual(parseName('CN=a+O=b, OU=c'), [
      [
        { type: 'CN', value: 'a' },
        { type: 'O', value: 'b' },
      ],
      [{ type: 'OU', value: 'c' }],
    ]);
    assert.throws(() => encodeName('XX=a'), /unknown attribute type XX/);
  });

  test('times: UTCTime before 2050, GeneralizedTime from 2050', () => {
    assert.equal(time(new Date('2036-01-02T03:04:05Z')).subarray(2).toString(), '360102030405Z');
    assert.equal(time(new Date('2036-01-02T03:04:05Z'))[0], 0x17);
    const late = time(new Date('2051-01-02T03:04:05Z'));
    assert.equal(late[0], 0x18);
    assert.equal(late.subarray(2).toString(), '20510102030405Z');
  });

  test('IP addresses: 4 bytes, or 16 with :: and an IPv4 tail', () => {
    assert.equal(ipBytes('10.0.0.1').toString('hex'), '0a000001');
    assert.equal(ipBytes('::1').toString('hex'), `${'0'.repeat(30)}01`);
    assert.equal(ipBytes('fd00:10::5').toString('hex'), 'fd000010000000000000000000000005');
    assert.equal(ipBytes('::ffff:10.0.0.1').toString('hex'), '00000000000000000000ffff0a000001');
    assert.throws(() => ipBytes('orders'), /not an IP address/);
  });

  test('a CA and a leaf: the extensions of before; the leaf names the CA by its subject and key identifier', async () => {
    const now = new Date('2026-01-01T00:00:00Z');
    const ca = await createCa({
      subject: 'CN=shop/orders, O=opkit-database-operator',
      notBefore: now,
      notAfter: new Date(now.getTime() + 3650 * DAY_MS),
      pathLength: 0,
    });
    const leaf = await issueLeaf(ca, {
      subject: 'CN=orders',
      usage: 'server',
      hosts: ['orders'],
      notBefore: now,
      notAfter: new Date(now.getTime() + 90 * DAY_MS),
    });
    const text = (pem: string) => new X509Certificate(pem).toLegacyObject();
    const c = new X509Certificate(ca.certPem);
    const l = new X509Certificate(leaf.certPem);
    assert.equal(c.subject, 'CN=shop/orders\nO=opkit-database-operator');
    assert.equal(l.issuer, c.subject);
    assert.ok(l.checkIssued(c) && l.verify(c.publicKey));
    assert.equal(
      tbsFields(leaf.certPem)[3]?.raw.toString('hex'),
      tbsFields(ca.certPem)[5]?.raw.toString('hex'),
    );
    assert.ok(text(ca.certPem).ca);
    assert.equal(l.subjectAltName, 'DNS:orders');
  });

  test('a CA made before (by @peculiar/x509) signs leaves that name it exactly', async () => {
    const now = new Date('2026-06-01T00:00:00Z');
    const leaf = await issueLeaf(PECULIAR_CA, {
      subject: 'CN=orders',
      usage: 'server',
      hosts: ['orders', '10.0.0.1'],
      notBefore: now,
      notAfter: new Date('2040-01-01T00:00:00Z'),
    });
    const c = new X509Certificate(PECULIAR_CA.certPem);
    const l = new X509Certificate(leaf.certPem);
    assert.ok(l.checkIssued(c) && l.verify(c.publicKey));
    assert.equal(
      tbsFields(leaf.certPem)[3]?.raw.toString('hex'),
      tbsFields(PECULIAR_CA.certPem)[5]?.raw.toString('hex'),
    );
    assert.equal(l.validTo, c.validTo, 'never past the CA');
    // The authority key identifier is the CA's subject key identifier (6B2F2F21...).
    const ext = tbsFields(leaf.certPem).find((f) => f.tag === 0xa3);
    assert.ok(ext?.raw.toString('hex').includes('80146b2f2f213254b92fb707a7e123aea974167abce9'));
  });
});
