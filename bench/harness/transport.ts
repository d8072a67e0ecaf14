/**
 * The client transport alone: HTTP/1.1 vs HTTP/2 against one real kube-apiserver, in one process, modes
 * interleaved round by round. Each round per mode: `--gets` GETs and `--creates` POSTs of ConfigMaps at
 * `--concurrency`, and one watch delivering those creates. Prints this process's CPU (user+system) per
 * request, the API server's and etcd's CPU, and the wall time per round: what the transport itself costs,
 * on both ends, without an operator around it.
 *
 *   node bench/harness/transport.ts --rounds 3 --gets 2000 --creates 500 --concurrency 8
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { start } from '@opkit/controlplane';
import { ConfigMaps, createClient, loadConfig, Namespaces, type TransportMode } from '@opkit/runtime';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    gets: { type: 'string', default: '2000' },
    creates: { type: 'string', default: '500' },
    concurrency: { type: 'string', default: '8' },
    modes: { type: 'string', default: 'http1,http2' },
  },
});
const rounds = Number(values.rounds);
const gets = Number(values.gets);
const creates = Number(values.creates);
const concurrency = Number(values.concurrency);
const modes = values.modes.split(',') as TransportMode[];

async function pool(n: number, fn: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

/** CPU seconds (user+system) of the control plane's processes (kube-apiserver and etcd), from /proc. */
function controlPlaneCpuMs(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // exited
    }
  }
  return ticks * 10; // USER_HZ = 100
}

const cp = await start({ mode: 'apiserver' });
try {
  const rows: string[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const mode of modes) {
      // A config of its own per mode and round: a fresh pool or session, as a starting operator has.
      const client = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), { transport: mode });
      const ns = `t-${mode}-${round}`;
      await client.create(Namespaces, { metadata: { name: ns } });
      await client.create(ConfigMaps, { metadata: { name: 'target', namespace: ns }, data: { k: 'v' } });
      const ac = new AbortController();
      let seen = 0;
      const watching = (async () => {
        for await (const ev of client.watch(ConfigMaps, { namespace: ns, signal: ac.signal })) {
          if (ev.type === 'ADDED') seen++;
        }
      })();
      const cpu0 = process.cpuUsage();
      const server0 = controlPlaneCpuMs(cp.pids());
      const t0 = performance.now();
      await pool(gets, () => client.get(ConfigMaps, { namespace: ns, name: 'target' }));
      await pool(creates, (i) =>
        client.create(ConfigMaps, { metadata: { name: `c${i}`, namespace: ns }, data: { i: String(i) } }),
      );
      while (seen < creates + 1) await new Promise((r) => setTimeout(r, 10));
      const wall = performance.now() - t0;
      const cpu = process.cpuUsage(cpu0);
      const cpuMs = (cpu.user + cpu.system) / 1000;
      const serverMs = controlPlaneCpuMs(cp.pids()) - server0;
      ac.abort();
      await watching;
      client.close();
      const load = (await import('node:os')).loadavg()[0]?.toFixed(1);
      rows.push(
        `| ${round + 1} | ${mode} | ${(cpuMs / (gets + creates)).toFixed(3)} | ${cpuMs.toFixed(0)} | ${serverMs.toFixed(0)} | ${(wall / 1000).toFixed(2)} | ${load} |`,
      );
      process.stderr.write(`${rows.at(-1)}\n`);
    }
  }
  console.log(
    `${gets} GETs + ${creates} creates at concurrency ${concurrency}, one watch, per round and mode\n`,
  );
  console.log(
    '| round | transport | client CPU ms per request | client CPU ms | API server + etcd CPU ms | wall s | load (1 min) |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  for (const r of rows) console.log(r);
} finally {
  await cp.stop();
}
