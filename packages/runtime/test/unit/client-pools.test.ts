import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigMaps } from '../../src/api/builtin.ts';
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
