/**
 * The informers' start-up path alone, in one process, without an API server: a local HTTP server streams
 * the initial events of `--kinds` watches (sendInitialEvents, `--objects` each, objects shaped like the
 * Database operator's children, managedFields included as the API server sends them), and one Reflector
 * per kind takes them in through the real client (transport, NDJSON decoder, watcher). Prints the wall
 * time and this process's CPU (user+system) until every reflector has synced, median of `--rounds`.
 * The server's part is one pre-rendered buffer per watch written at once: most of the CPU is the client's.
 *
 *   node bench/harness/watch-pipeline.ts --kinds 11 --objects 1000 --rounds 7
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { ConfigMaps, createClient, Reflector, type RestConfig } from '@opkit/runtime';

const { values } = parseArgs({
  options: {
    kinds: { type: 'string', default: '11' },
    objects: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '7' },
  },
});
const kinds = Number(values.kinds);
const objects = Number(values.objects);
const rounds = Number(values.rounds);

function object(kind: number, i: number): unknown {
  const name = `db-${i}-k${kind}`;
  return {
    kind: 'ConfigMap',
    apiVersion: 'v1',
    metadata: {
      name,
      namespace: 'default',
      uid: `0000${kind}-1111-2222-3333-${String(i).padStart(12, '0')}`,
      resourceVersion: String(100_000 + kind * objects + i),
      creationTimestamp: '2026-12-06T05:00:00Z',
      labels: {
        'app.kubernetes.io/name': 'database',
        'app.kubernetes.io/instance': `db-${i}`,
        'app.kubernetes.io/managed-by': 'database-operator',
      },
      annotations: { 'myapp.example.com/config-hash': 'a'.repeat(64) },
      ownerReferences: [
        {
          apiVersion: 'myapp.example.com/v1',
          kind: 'Database',
          name: `db-${i}`,
          uid: `aaaa${kind}-1111-2222-3333-${String(i).padStart(12, '0')}`,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
      managedFields: [
        {
          manager: 'database-operator',
          operation: 'Apply',
          apiVersion: 'v1',
          time: '2026-12-06T05:00:00Z',
          fieldsType: 'FieldsV1',
          fieldsV1: {
            'f:data': { 'f:postgresql.conf': {}, 'f:pg_hba.conf': {} },
            'f:metadata': {
              'f:labels': { 'f:app.kubernetes.io/name': {}, 'f:app.kubernetes.io/instance': {} },
              'f:ownerReferences': { [`k:{"uid":"aaaa${kind}"}`]: {} },
            },
          },
        },
      ],
    },
    data: {
      'postgresql.conf': `listen_addresses = '*'\nport = 5432\nmax_connections = 100\n${'# setting\n'.repeat(40)}`,
      'pg_hba.conf': 'hostssl all all 0.0.0.0/0 scram-sha-256\n'.repeat(4),
    },
  };
}

const bodies = Array.from({ length: kinds }, (_, k) => {
  const lines = Array.from({ length: objects }, (_, i) =>
    JSON.stringify({ type: 'ADDED', object: object(k, i) }),
  );
  lines.push(
    JSON.stringify({
      type: 'BOOKMARK',
      object: {
        kind: 'ConfigMap',
        apiVersion: 'v1',
        metadata: { resourceVersion: '999999', annotations: { 'k8s.io/initial-events-end': 'true' } },
      },
    }),
  );
  return Buffer.from(`${lines.join('\n')}\n`);
});
let next = 0;
const server = http.createServer((req, res) => {
  res.writeHead(200, { 'Content-Type': 'application/json' });
  if (!req.url?.includes('sendInitialEvents=true')) return; // later watches: held open, quiet
  res.write(bodies[next++ % kinds]);
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address() as AddressInfo;
const config: RestConfig = {
  server: `http://127.0.0.1:${port}`,
  host: `127.0.0.1:${port}`,
  namespace: 'default',
  authenticate: async () => ({ headers: {} }),
};

const results: { wallMs: number; cpuMs: number }[] = [];
for (let round = 0; round < rounds; round++) {
  const client = createClient(config);
  const ctrl = new AbortController();
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const reflectors = Array.from(
    { length: kinds },
    () => new Reflector(client, ConfigMaps, { watchList: true, watchTimeoutSeconds: 300 }),
  );
  const runs = reflectors.map((r) => r.run(ctrl.signal));
  await Promise.all(reflectors.map((r) => r.waitForSync()));
  const c1 = process.cpuUsage(c0);
  const wallMs = performance.now() - t0;
  const held = reflectors.reduce((n, r) => n + r.store.list().length, 0);
  if (held !== kinds * objects) throw new Error(`stored ${held}, expected ${kinds * objects}`);
  ctrl.abort();
  await Promise.allSettled(runs);
  client.close?.();
  results.push({ wallMs, cpuMs: (c1.user + c1.system) / 1000 });
  process.stderr.write(
    `round ${round + 1}: ${wallMs.toFixed(0)} ms wall, ${((c1.user + c1.system) / 1000).toFixed(0)} ms CPU\n`,
  );
  globalThis.gc?.();
}
server.closeAllConnections();
server.close();
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(
  `${kinds} watches x ${objects} objects: median ${median(results.map((r) => r.wallMs)).toFixed(0)} ms wall, ` +
    `${median(results.map((r) => r.cpuMs)).toFixed(0)} ms CPU (${rounds} rounds, node ${process.version})`,
);
