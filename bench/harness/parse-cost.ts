/**
 * What parsing the Database operator's watched objects costs, as the API server sends them (managedFields
 * included): a control plane, the opkit operator and `--dbs` Databases; then every object it made,
 * repeated to ~`--objects` watch event lines, parsed in this process with and without managedFields cut
 * from the text first (client/managed-fields.ts), the parsed values kept as an informer keeps them.
 * Prints the share of managedFields by kind and the CPU of each variant (median of 7, after a GC).
 *
 *   node --expose-gc bench/harness/parse-cost.ts --objects 11000
 */
import { parseArgs } from 'node:util';
import { start } from '@opkit/controlplane';
import { withoutManagedFields } from '@opkit/runtime';
import { inputs } from './desired.ts';
import { startOperator, waitReady } from './impls.ts';
import { Kube } from './kube.ts';
import { installCrd } from './scenarios.ts';

const { values } = parseArgs({
  options: { dbs: { type: 'string', default: '6' }, objects: { type: 'string', default: '11000' } },
});
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

const PATHS = [
  '/apis/myapp.example.com/v1/namespaces/default/databases',
  '/apis/apps/v1/namespaces/default/statefulsets',
  '/api/v1/namespaces/default/services',
  '/api/v1/namespaces/default/secrets',
  '/api/v1/namespaces/default/configmaps',
  '/apis/policy/v1/namespaces/default/poddisruptionbudgets',
  '/api/v1/namespaces/default/serviceaccounts',
  '/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles',
  '/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings',
  '/apis/coordination.k8s.io/v1/namespaces/default/leases',
];

const lines: string[] = [];
const cp = await start({ mode: 'apiserver' });
try {
  const kube = new Kube(cp.kubeconfig, { maxSockets: 8 });
  await installCrd(kube);
  const op = await startOperator('opkit', { kubeconfigPath: cp.kubeconfigPath, logFile: '/dev/null' });
  await waitReady(op);
  for (const db of inputs(Number(values.dbs), 'default')) await kube.json('POST', PATHS[0]!, db);
  await new Promise((r) => setTimeout(r, 15_000));
  await op.proc.stop();
  console.log('| kind | objects | bytes per object | managedFields share |\n| --- | --- | --- | --- |');
  for (const path of PATHS) {
    const list = await kube.json<{ items: { metadata: { managedFields?: unknown } }[] }>('GET', path);
    let all = 0;
    let cut = 0;
    for (const item of list.items) {
      const line = JSON.stringify({ type: 'ADDED', object: item });
      lines.push(line);
      all += line.length;
      cut += withoutManagedFields(line).length;
    }
    const n = Math.max(1, list.items.length);
    console.log(
      `| ${path.split('/').pop()} | ${list.items.length} | ${(all / n).toFixed(0)} | ${(((all - cut) / Math.max(1, all)) * 100).toFixed(0)} % |`,
    );
  }
} finally {
  await cp.stop();
}

const events: string[] = [];
while (events.length < Number(values.objects)) events.push(...lines);
const bytes = events.reduce((n, l) => n + l.length, 0);
const kept: unknown[] = [];
function measure(name: string, fn: (line: string) => unknown): void {
  const cpu: number[] = [];
  for (let round = 0; round < 7; round++) {
    kept.length = 0;
    gc?.();
    const c0 = process.cpuUsage();
    for (const line of events) kept.push(fn(line));
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
  }
  cpu.sort((a, b) => a - b);
  console.log(`| ${name} | ${cpu[3]!.toFixed(0)} |`);
}
console.log(
  `\n${events.length} event lines, ${(bytes / 1e6).toFixed(1)} MB, node ${process.version} ${process.execArgv.join(' ')}`,
);
console.log('| parse, values kept | CPU (ms) |\n| --- | --- |');
measure('JSON.parse, then delete managedFields (before)', (l) => {
  const ev = JSON.parse(l) as { object: { metadata: { managedFields?: unknown } } };
  delete ev.object.metadata.managedFields;
  return ev;
});
measure('cut managedFields from the text, then JSON.parse', (l) => JSON.parse(withoutManagedFields(l)));
measure('the cut alone', (l) => withoutManagedFields(l).length);
