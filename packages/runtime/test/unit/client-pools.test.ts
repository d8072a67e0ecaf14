import assert from 'node:assert/strict';
import * as https from 'node:https';
import { describe, it } from 'node:test';
import { ConfigMaps } from '../../src/api/builtin.ts';
import { HttpsPoolAgent } from '../../src/client/pools.ts';
import { createClient } from '../../src/client/rest-client.ts';
import { startLocalServer } from './local-http.ts';

describe('connection pool', () => {
  it('keeps the connections of a burst for the next one (no new connection, no new TLS handshake)', async () => {
    let connections = 0;
    let held: (() => void)[] = [];
    const local = await startLocalServer((req, res) => {
      // Answer once the whole burst is in flight, so that it needs as many connections as requests.
      held.push(() => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ metadata: { name: req.url?.split('/').pop(), namespace: 'ns' } }));
      });
    });
    local.server.on('connection', () => connections++);
    const client = createClient(local.config);
    const burst = async (size: number): Promise<void> => {
      const all = Array.from({ length: size }, (_, i) =>
        client.get(ConfigMaps, { namespace: 'ns', name: `c${i}` }),
      );
      while (held.length < size) await new Promise((r) => setTimeout(r, 5));
      for (const answer of held) answer();
      held = [];
      await Promise.all(all);
      await new Promise((r) => setTimeout(r, 20)); // the sockets go back to the pool
    };
    try {
      await burst(40);
      assert.equal(connections, 40);
      await burst(40);
      assert.equal(connections, 40, 'the second burst reused every connection of the first');
    } finally {
      client.transport.close();
      await local.close();
    }
  });
});

describe('HttpsPoolAgent pool key', () => {
  /** A Buffer that counts how often it is turned into text (Node's getName joins it into the key). */
  function countingPem(text: string): { pem: Buffer; decoded: () => number } {
    let n = 0;
    const pem = Buffer.from(text);
    const decode = pem.toString.bind(pem);
    Object.defineProperty(pem, 'toString', {
      value: (...args: Parameters<Buffer['toString']>) => {
        n++;
        return decode(...args);
      },
    });
    return { pem, decoded: () => n };
  }

  it("makes the key once per TLS identity, and the same key as Node's", () => {
    const ours = new HttpsPoolAgent();
    const node = new https.Agent();
    const ca = countingPem('-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n');
    const cert = countingPem('-----BEGIN CERTIFICATE-----\nclient\n-----END CERTIFICATE-----\n');
    const key = countingPem('-----BEGIN PRIVATE KEY-----\nkey\n-----END PRIVATE KEY-----\n');
    // A fresh options object per request, as https.request makes, carrying the same credential objects.
    const options = (): https.RequestOptions => ({
      host: '127.0.0.1',
      port: 6443,
      ca: ca.pem,
      cert: cert.pem,
      key: key.pem,
      method: 'GET',
      path: `/api/v1/namespaces/ns/configmaps/c${Math.random()}`,
    });
    const expected = node.getName(options());
    const decodedByNode = ca.decoded();
    for (let i = 0; i < 100; i++) assert.equal(ours.getName(options()), expected);
    assert.equal(ca.decoded() - decodedByNode, 1, 'the CA was made into text once for 100 requests');
    assert.equal(cert.decoded(), 2, 'once by Node, once by the pool agent');
    assert.equal(key.decoded(), 2);
  });

  it('makes a new key when anything the key is made of changes', () => {
    const ours = new HttpsPoolAgent();
    const node = new https.Agent();
    const base: https.RequestOptions = { host: 'a.example', port: 443, ca: Buffer.from('ca-1') };
    const variants: https.RequestOptions[] = [
      base,
      { ...base, host: 'b.example' },
      { ...base, port: 6443 },
      { ...base, ca: Buffer.from('ca-2') },
      // A CA read again from its file: a new Buffer with the same content, the same pool.
      { ...base, ca: Buffer.from('ca-1') },
      { ...base, cert: Buffer.from('cert'), key: Buffer.from('key') },
      { ...base, rejectUnauthorized: false },
      { ...base, servername: 'api.example' },
      { ...base, family: 6 },
      base,
    ];
    for (const options of variants) assert.equal(ours.getName(options), node.getName(options));
    assert.equal(ours.getName(variants[4]), ours.getName(base));
    assert.notEqual(ours.getName(variants[3]), ours.getName(base));
  });
});
