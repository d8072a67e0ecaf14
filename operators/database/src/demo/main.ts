/**
 * The demo (the README's main command, `npm run demo`):
 *   1. uses the configured cluster when one is reachable ($KUBECONFIG or ~/.kube/config), otherwise
 *      brings up opkit's local cluster (etcd, kube-apiserver, controllers, kwok nodes) in the background;
 *   2. installs the Database CRD;
 *   3. runs the operator in this process;
 *   4. applies config/samples/myapp_v1_database.yaml (production-db: mysql 8.0, 10Gi, 3 replicas);
 *   5. prints a line per status change until the Database is Running, then `kubectl get db`.
 * Exits 0 once Running; 1 with the last status and where to look when it is not Running in time.
 *
 *   node operators/database/src/demo/main.ts [--local] [--kubeconfig PATH] [--namespace NS] [--timeout 300] [--verbose]
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { clusterUp } from '@opkit/controlplane';
import {
  type Condition,
  CustomResourceDefinitions,
  createClient,
  createLogger,
  createOrUpdate,
  loadConfig,
  Namespaces,
  NotFoundError,
  type RestClient,
  sleep,
} from '@opkit/runtime';
import { parse } from 'yaml';
import { type Database, Databases } from '../api/v1/database.ts';
import { describeStatus } from '../controllers/database/status.ts';
import { runOperator } from '../main.ts';

const here = dirname(fileURLToPath(import.meta.url));
export const SAMPLE = join(here, '..', '..', 'config', 'samples', 'myapp_v1_database.yaml');

const say = (line: string) => process.stdout.write(`${line}\n`);

/** A kubeconfig that points at a reachable API server, or undefined. */
async function configuredCluster(explicit: string | undefined): Promise<string | undefined> {
  const candidates = explicit
    ? [explicit]
    : process.env.KUBECONFIG
      ? [process.env.KUBECONFIG]
      : [join(homedir(), '.kube', 'config')];
  for (const file of candidates) {
    if (!file.split(':').some((f) => existsSync(f))) continue;
    try {
      const config = loadConfig({ kubeconfig: file.split(':')[0] ?? file });
      const client = createClient(config, { timeoutMs: 5000 });
      try {
        await client.discover('v1', { signal: AbortSignal.timeout(5000) });
        return file.split(':')[0];
      } finally {
        client.close();
      }
    } catch (err) {
      if (explicit) throw err;
      say(`(the configured cluster in ${file} is not reachable: ${(err as Error).message})`);
    }
  }
  return undefined;
}

function conditionsOf(db: Database | undefined): Condition[] {
  return (db?.status?.conditions as Condition[] | undefined) ?? [];
}

function hasKubectl(): boolean {
  return spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;
}

function age(created: string | undefined): string {
  if (!created) return '<unknown>';
  const s = Math.max(0, Math.round((Date.now() - Date.parse(created)) / 1000));
  return s < 120 ? `${s}s` : s < 7200 ? `${Math.floor(s / 60)}m` : `${Math.floor(s / 3600)}h`;
}

/** The CRD's printer columns, formatted like kubectl. */
export function printerTable(list: { items: Database[] }): string {
  const rows = [
    ['NAME', 'ENGINE', 'VERSION', 'REPLICAS', 'READY', 'PHASE', 'AGE'],
    ...list.items.map((d) => [
      d.metadata.name ?? '',
      d.spec.engine,
      d.spec.version,
      String(d.spec.replicas ?? 1),
      String(d.status?.readyReplicas ?? ''),
      d.status?.phase ?? '',
      age(d.metadata.creationTimestamp),
    ]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd((widths[i] ?? 0) + 3))
        .join('')
        .trimEnd(),
    )
    .join('\n');
}

export async function demo(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      local: { type: 'boolean', default: false },
      kubeconfig: { type: 'string' },
      namespace: { type: 'string', default: 'default' },
      timeout: { type: 'string', default: '300' },
      verbose: { type: 'boolean', default: false },
    },
  });
  const namespace = values.namespace;
  const timeoutMs = Number(values.timeout) * 1000;

  // 1. A cluster.
  let kubeconfig = values.local ? undefined : await configuredCluster(values.kubeconfig);
  if (kubeconfig) say(`Using the configured cluster (${kubeconfig}).`);
  else {
    say(
      'No reachable cluster configured: starting the local opkit cluster (first run builds it; see below).',
    );
    const state = await clusterUp({ log: (l) => say(`  ${l}`) });
    kubeconfig = state.kubeconfigPath;
    say(`Local cluster at ${state.server} (kubeconfig ${kubeconfig}).`);
  }
  const client: RestClient = createClient(loadConfig({ kubeconfig }), { fieldManager: 'database-demo' });

  // 2. The CRD.
  const crd = await createOrUpdate(client, CustomResourceDefinitions, Databases.crd());
  say(`CRD ${Databases.crdName}: ${crd.operation}`);
  await client.waitForServed(Databases.resource, { timeoutMs: 60_000 });

  // 3. The operator, in this process.
  const stop = new AbortController();
  const logger = createLogger({ name: 'database-operator', level: values.verbose ? 'info' : 'warn' });
  const operator = runOperator({ kubeconfig, signal: stop.signal, logger, leaderElect: false });
  operator.catch((err) => say(`operator failed: ${(err as Error).message}`));
  say('Operator running in this process.');

  let code = 1;
  try {
    // 4. The sample.
    try {
      await client.get(Namespaces, { name: namespace });
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      await client.create(Namespaces, { metadata: { name: namespace } });
    }
    const sample = parse(readFileSync(SAMPLE, 'utf8')) as Database;
    sample.metadata.namespace = namespace;
    const applied = await createOrUpdate(client, Databases.resource, sample);
    const name = sample.metadata.name ?? '';
    say(`\nDatabase ${namespace}/${name} (${SAMPLE.slice(SAMPLE.indexOf('config/'))}): ${applied.operation}`);
    say(`  spec: ${JSON.stringify(sample.spec)}\n`);

    // 5. Live status.
    const started = Date.now();
    let last = '';
    let db: Database | undefined;
    for (;;) {
      db = await client.get(Databases.resource, { namespace, name });
      const line = describeStatus(db.status, db.spec.replicas ?? 1);
      if (line !== last) {
        const t = ((Date.now() - started) / 1000).toFixed(1).padStart(5);
        say(`[${t}s] ${line}`);
        const interesting = conditionsOf(db).filter((c) =>
          c.type === 'Ready' ? c.status !== 'True' : c.status === 'True',
        );
        for (const c of interesting) say(`          ${c.type}=${c.status} ${c.reason}: ${c.message}`);
        last = line;
      }
      if (db.status?.phase === 'Running' && db.status.observedGeneration === db.metadata.generation) break;
      if (Date.now() - started > timeoutMs) {
        say(
          `\nerror: ${namespace}/${name} is not Running after ${values.timeout}s (last: ${last || 'no status'}).`,
        );
        say(`  kubectl --kubeconfig ${kubeconfig} describe db ${name} -n ${namespace}`);
        say(
          `  kubectl --kubeconfig ${kubeconfig} get events -n ${namespace} --sort-by=.metadata.creationTimestamp`,
        );
        return 1;
      }
      await sleep(300);
    }

    // 6. What kubectl shows (or the same columns, when kubectl is not installed).
    if (hasKubectl()) {
      const kubectl = (...args: string[]) =>
        execFileSync('kubectl', ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8' });
      say(`\n$ kubectl get db -n ${namespace}`);
      say(kubectl('get', 'db', '-n', namespace).trimEnd());
      say(
        `\n$ kubectl get statefulset,pods,svc,pvc,secret -n ${namespace} -l app.kubernetes.io/instance=${name} -L myapp.example.com/role`,
      );
      say(
        kubectl(
          'get',
          'statefulset,pods,svc,pvc,secret',
          '-n',
          namespace,
          '-l',
          `app.kubernetes.io/instance=${name}`,
          '-L',
          'myapp.example.com/role',
        ).trimEnd(),
      );
    } else {
      say(`\n(kubectl is not installed; the printer columns of \`kubectl get db -n ${namespace}\`:)`);
      say(printerTable(await client.list(Databases.resource, { namespace })));
    }
    const endpoints = db.status?.endpoints;
    say(
      `\n${name} is Running: primary ${db.status?.currentPrimary ?? '-'}, read-write ${endpoints?.readWrite ?? '-'}:${endpoints?.port ?? '-'}` +
        `${endpoints?.readOnly ? `, read-only ${endpoints.readOnly}` : ''}, credentials in Secret ${db.status?.secretName ?? '-'}.`,
    );
    say(`\nThe cluster keeps running. Try: kubectl --kubeconfig ${kubeconfig} get db -w`);
    say(`Run the operator against it: node operators/database/src/main.ts --kubeconfig ${kubeconfig}`);
    say('Stop the local cluster: npx opkit-controlplane down');
    code = 0;
  } finally {
    stop.abort();
    await operator.catch(() => {});
    client.close();
  }
  return code;
}

if (import.meta.main) {
  demo(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`demo failed: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
