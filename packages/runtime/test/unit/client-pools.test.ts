import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { ConfigMaps } from '../../src/api/builtin.ts';
import { createClient } from '../../src/client/rest-client.ts';

describe('connection pool', () => {
  it('keeps the connections of a burst for the next one (no new connection, no new TLS handshake)', async () => {
    let connections = 0;
    let held: (() => void)[] = [];
    const server = http.createServer((req, res) => {
      // Answer once the whole burst is in flight, so that it needs as many connections as requests.
      held.push(() => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ metadata: { name: req.url?.split('/').pop(), namespace: 'ns' } }));
      });
    });
    server.on('connection', () => connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const client = createClient({
      server: `http://127.0.0.1:${port}`,
      host: `127.0.0.1:${port}`,
      namespace: 'ns',
      authenticate: async () => ({ headers: {} }),
    });
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
      server.closeAllConnections();
      server.close();
    }
  });
});
