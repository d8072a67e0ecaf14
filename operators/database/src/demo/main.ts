/**
 * The demo (the README's main command, `npm run demo`):
 *   1. uses the configured cluster when one is reachable ($KUBECONFIG or ~/.kube/config), otherwise opkit's
 *      local cluster: 3 simulated (kwok) nodes and, as root, 1 real node (containerd, kubelet);
 *   2. with a real node: the image opkit.local/postgres:15 on it (built on first use, minutes);
 *   3. the operator: in this process, or (--in-cluster) built into an image, loaded and deployed;
 *   4. a PostgreSQL 15 Database with 3 instances on the real node, and the seed's sample (production-db,
 *      mysql 8.0) on the simulated nodes;
 *   5. a line per status change until both are Running, the per-instance replication status, then a row
 *      written through the read-write Service and read back through the read-only one.
 * Exits 0 when all of it worked; 1 with what to look at when not; 2 on a bad flag.
 * Without a real node (not root, a host without containerd, --simulated) it says why and runs the simulated part.
 *
 *   node operators/database/src/demo/main.ts --help
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { POSTGRES_IMAGE, runningCluster } from '@opkit/controlplane';
import {
  type Condition,
  CustomResourceDefinitions,
  createClient,
  createLogger,
  createOrUpdate,
  Deployments,
  loadConfig,
  Namespaces,
  NotFoundError,
  type RestClient,
  sleep,
} from '@opkit/runtime';
import { parse } from 'yaml';
import { type Database, Databases, ROLE_LABEL } from '../api/v1/database.ts';
import { describeStatus } from '../controllers/database/status.ts';
import { runOperator } from '../main.ts';
import {
  configuredCluster,
  type DemoCluster,
  ensureImageOnNodes,
  localCluster,
  realNodes,
  type Say,
} from './cluster.ts';
import { instanceTable, podProgress, printerTable, stamp } from './format.ts';
import { deployInCluster, IN_CLUSTER_IMAGE, MANAGER_DEPLOYMENT, MANAGER_NAMESPACE } from './in-cluster.ts';
import { DEMO_USAGE, DemoUsageError, parseDemoArgs } from './options.ts';
import {
  databasePods,
  instanceRows,
  kubectlFor,
  onSimulatedNodes,
  PG_DEMO_NAME,
  postgresDatabase,
  rowCheck,
} from './postgres.ts';

const here = dirname(fileURLToPath(import.meta.url));
export const SAMPLE = join(here, '..', '..', 'config', 'samples', 'myapp_v1_database.yaml');

/** A Database the demo waits for, and whether its pods run for real. */
interface Target {
  name: string;
  real: boolean;
}

class DemoFailure extends Error {
  readonly hints: string[];
  constructor(message: string, hints: string[]) {
    super(message);
    this.name = 'DemoFailure';
    this.hints = hints;
  }
}

function conditionsOf(db: Database | undefined): Condition[] {
  return (db?.status?.conditions as Condition[] | undefined) ?? [];
}

export async function demo(
  argv: string[],
  say: Say = (l) => process.stdout.write(`${l}\n`),
): Promise<number> {
  let opts: ReturnType<typeof parseDemoArgs>;
  try {
    opts = parseDemoArgs(argv);
  } catch (err) {
    if (!(err instanceof DemoUsageError)) throw err;
    say(`error: ${err.message}\n\n${DEMO_USAGE}`);
    return 2;
  }
  if (opts.help) {
    say(DEMO_USAGE);
    return 0;
  }
  const { namespace, timeoutMs } = opts;

  // 1. A cluster.
  const configured = opts.local ? undefined : await configuredCluster(opts.kubeconfig, say);
  let cluster: DemoCluster;
  if (configured) {
    say(`Using the configured cluster (${configured}).`);
    const local = runningCluster(opts.cluster);
    cluster = {
      kubeconfig: configured,
      ...(local?.kubeconfigPath === configured ? { localName: opts.cluster } : {}),
    };
  } else {
    if (!opts.local) say('No reachable cluster configured: using the local opkit cluster.');
    cluster = await localCluster(opts.cluster, opts.simulated, say);
  }
  const { kubeconfig } = cluster;
  say(`kubeconfig: ${kubeconfig}`);
  const client: RestClient = createClient(loadConfig({ kubeconfig }), { fieldManager: 'database-demo' });
  const stop = new AbortController();
  let operator: Promise<void> | undefined;
  try {
    // 2. Real nodes, and the PostgreSQL image on them.
    // The simulated sample is pinned to the kwok nodes whenever the cluster has a real node (--simulated too).
    const nodes = await realNodes(client);
    const mixed = nodes.length > 0;
    const real = mixed && !opts.simulated;
    if (real) {
      say(
        `Real node: ${nodes.map((n) => n.metadata.name).join(', ')} (containerd + runc: pods there run real processes).`,
      );
      await ensureImageOnNodes(cluster, nodes, POSTGRES_IMAGE, say);
    } else if (!opts.simulated && !cluster.noRealNodes) {
      say('This cluster has no real node (none labelled opkit.dev/node=real): only the simulated part runs.');
      if (cluster.localName)
        say(
          `  The local cluster "${cluster.localName}" was started without one: stop it (npx opkit-controlplane down` +
            `${cluster.localName === 'opkit' ? '' : ` --name ${cluster.localName}`}) and run the demo again as root.`,
        );
    }
    if (opts.inCluster && !(real && cluster.localName))
      throw new DemoFailure(
        "--in-cluster needs opkit's local cluster with a real node (the image is loaded onto it)",
        [
          real
            ? 'run with --local (the operator image can only be loaded into the local cluster)'
            : 'run as root, with the local cluster started by the demo (stop one without a real node first)',
          'or build and push the image yourself, then: npx opkit deploy --image <image> (operators/database/README.md "Deploying it")',
        ],
      );

    // 3. The operator.
    if (opts.inCluster) {
      say(
        `\nThe operator in the cluster: image ${IN_CLUSTER_IMAGE}, config/default (first run builds opkit.local/node:24, minutes).`,
      );
      await deployInCluster(cluster.localName ?? opts.cluster, kubeconfig, timeoutMs, say);
      await client.waitForServed(Databases.resource, { timeoutMs: 60_000 });
      say(`Operator running in the cluster: deployment ${MANAGER_NAMESPACE}/${MANAGER_DEPLOYMENT}.`);
    } else {
      const crd = await createOrUpdate(client, CustomResourceDefinitions, Databases.crd());
      say(`CRD ${Databases.crdName}: ${crd.operation}`);
      await client.waitForServed(Databases.resource, { timeoutMs: 60_000 });
      const deployed = await client
        .get(Deployments, { namespace: MANAGER_NAMESPACE, name: MANAGER_DEPLOYMENT })
        .catch((err: unknown) => {
          if (err instanceof NotFoundError) return undefined;
          throw err;
        });
      if (deployed && (deployed.status?.readyReplicas ?? 0) > 0) {
        say(
          `The operator already runs in the cluster (${MANAGER_NAMESPACE}/${MANAGER_DEPLOYMENT}, from --in-cluster): using it, ` +
            'not starting a second one in this process.',
        );
      } else {
        const logger = createLogger({ name: 'database-operator', level: opts.verbose ? 'info' : 'warn' });
        operator = runOperator({ kubeconfig, signal: stop.signal, logger, leaderElect: false });
        operator.catch((err) => say(`operator failed: ${(err as Error).message}`));
        say('Operator running in this process.');
      }
    }

    // 4. The Databases.
    try {
      await client.get(Namespaces, { name: namespace });
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      await client.create(Namespaces, { metadata: { name: namespace } });
    }
    const targets: Target[] = [];
    if (real) {
      const pg = postgresDatabase(namespace, POSTGRES_IMAGE);
      const applied = await createOrUpdate(client, Databases.resource, pg);
      say(
        `\nDatabase ${namespace}/${PG_DEMO_NAME}: ${applied.operation}. REAL: PostgreSQL 15 servers in containers on the real node.`,
      );
      say(`  spec: ${JSON.stringify(pg.spec)}`);
      targets.push({ name: PG_DEMO_NAME, real: true });
    }
    const seed = parse(readFileSync(SAMPLE, 'utf8')) as Database;
    seed.metadata.namespace = namespace;
    const sample = onSimulatedNodes(seed, mixed);
    const applied = await createOrUpdate(client, Databases.resource, sample);
    const sampleName = sample.metadata.name ?? '';
    say(
      `\nDatabase ${namespace}/${sampleName} (${SAMPLE.slice(SAMPLE.indexOf('config/'))}): ${applied.operation}.`,
    );
    say(
      "  SIMULATED: its pods go to kwok nodes, which only pretend to run containers (Running and Ready by kwok's rules):" +
        ' no MySQL server can be installed on these machines (Debian has only MariaDB; no registry for the official image).',
    );
    if (real)
      say('  (pinned to the kwok nodes: nodeSelector type=kwok and a toleration of opkit.dev/simulated)');
    say(`  spec: ${JSON.stringify(sample.spec)}`);
    targets.push({ name: sampleName, real: false });

    // 5. Live status, until both are Running.
    say('');
    const dbs = await waitRunning(client, namespace, targets, timeoutMs, say, kubeconfig);

    // 6. What kubectl shows (or the same columns without kubectl).
    const kubectl = kubectlFor(kubeconfig);
    if (kubectl) {
      const show = (...args: string[]) => {
        say(`\n$ kubectl ${args.join(' ')}`);
        say(execFileSync('kubectl', ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8' }).trimEnd());
      };
      show('get', 'db', '-n', namespace);
      show(
        'get',
        'pods',
        '-n',
        namespace,
        '-o',
        'wide',
        '-l',
        'app.kubernetes.io/managed-by=opkit-database-operator',
        '-L',
        ROLE_LABEL,
      );
    } else {
      say(`\n(kubectl is not installed; the printer columns of \`kubectl get db -n ${namespace}\`:)`);
      say(printerTable(await client.list(Databases.resource, { namespace })));
    }

    // 7. The real part: streaming, and a row through both Services.
    const pg = dbs.get(PG_DEMO_NAME);
    if (pg) await showPostgres(client, pg, kubeconfig, timeoutMs, say);

    const seedDb = dbs.get(sampleName);
    const endpoints = seedDb?.status?.endpoints;
    say(
      `\n${sampleName} is Running (simulated): primary ${seedDb?.status?.currentPrimary ?? '-'}, read-write ${endpoints?.readWrite ?? '-'}:${endpoints?.port ?? '-'}` +
        `${endpoints?.readOnly ? `, read-only ${endpoints.readOnly}` : ''}, credentials in Secret ${seedDb?.status?.secretName ?? '-'}.`,
    );
    if (!real)
      say(
        '\nOnly the simulated part ran: no pod executed a container. With a real node (as root) the demo runs PostgreSQL 15 for real.',
      );
    say(`\nThe cluster keeps running. Try: kubectl --kubeconfig ${kubeconfig} get db -n ${namespace} -w`);
    if (!operator)
      say(
        `The operator keeps running in it: kubectl --kubeconfig ${kubeconfig} -n ${MANAGER_NAMESPACE} logs deploy/${MANAGER_DEPLOYMENT}`,
      );
    else say(`Run the operator against it: node operators/database/src/main.ts --kubeconfig ${kubeconfig}`);
    if (cluster.localName)
      say(
        `Stop the local cluster: npx opkit-controlplane down${cluster.localName === 'opkit' ? '' : ` --name ${cluster.localName}`}`,
      );
    return 0;
  } catch (err) {
    if (!(err instanceof DemoFailure)) throw err;
    say(`\nerror: ${err.message}`);
    for (const h of err.hints) say(`  ${h}`);
    return 1;
  } finally {
    stop.abort();
    await operator?.catch(() => {});
    client.close();
  }
}

/** Prints a line per status change (and, for real pods, per pod change) until every target is Running. */
async function waitRunning(
  client: RestClient,
  namespace: string,
  targets: Target[],
  timeoutMs: number,
  say: Say,
  kubeconfig: string,
): Promise<Map<string, Database>> {
  const started = Date.now();
  // Never silent for long: a line at least every 30 s while nothing changes.
  let said = started;
  const print = say;
  say = (line) => {
    said = Date.now();
    print(line);
  };
  const last = new Map<string, string>();
  const lastPods = new Map<string, string>();
  const done = new Map<string, Database>();
  const width = Math.max(...targets.map((t) => t.name.length));
  for (;;) {
    for (const t of targets) {
      if (done.has(t.name)) continue;
      const db = await client.get(Databases.resource, { namespace, name: t.name });
      const line = describeStatus(db.status, db.spec.replicas ?? 1);
      if (line !== last.get(t.name)) {
        say(`${stamp(started)} ${t.name.padEnd(width)} ${line}`);
        for (const c of conditionsOf(db).filter((c) =>
          c.type === 'Ready' ? c.status !== 'True' : c.status === 'True',
        ))
          say(`${' '.repeat(9 + width)} ${c.type}=${c.status} ${c.reason}: ${c.message}`);
        last.set(t.name, line);
      }
      if (t.real) {
        const pods = podProgress(await databasePods(client, namespace, t.name));
        if (pods !== lastPods.get(t.name)) {
          say(`${stamp(started)} ${t.name.padEnd(width)}   pods: ${pods}`);
          lastPods.set(t.name, pods);
        }
      }
      if (db.status?.phase === 'Running' && db.status.observedGeneration === db.metadata.generation)
        done.set(t.name, db);
    }
    if (done.size === targets.length) return done;
    if (Date.now() - said >= 30_000)
      say(
        `${stamp(started)} ... still waiting for ${targets
          .filter((t) => !done.has(t.name))
          .map((t) => t.name)
          .join(', ')}`,
      );
    if (Date.now() - started > timeoutMs) {
      const waiting = targets.filter((t) => !done.has(t.name));
      throw new DemoFailure(
        `not Running after ${Math.round(timeoutMs / 1000)} s: ${waiting.map((t) => `${namespace}/${t.name} (last: ${last.get(t.name) || 'no status'})`).join('; ')}`,
        [
          ...waiting.map((t) => `kubectl --kubeconfig ${kubeconfig} describe db ${t.name} -n ${namespace}`),
          `kubectl --kubeconfig ${kubeconfig} get pods -n ${namespace} -o wide; kubectl --kubeconfig ${kubeconfig} logs -n ${namespace} <pod> --all-containers`,
          `kubectl --kubeconfig ${kubeconfig} get events -n ${namespace} --sort-by=.metadata.creationTimestamp`,
          'a longer --timeout (seconds) if the machine is busy',
        ],
      );
    }
    await sleep(500);
  }
}

/** The per-instance table, then the row written through the read-write Service and read through the read-only one. */
async function showPostgres(
  client: RestClient,
  db: Database,
  kubeconfig: string,
  timeoutMs: number,
  say: Say,
): Promise<void> {
  const name = db.metadata.name ?? '';
  const namespace = db.metadata.namespace ?? 'default';
  say(
    `\n${name}: Running ${db.status?.readyReplicas}/${db.spec.replicas}, primary ${db.status?.currentPrimary ?? '-'}, system identifier ${db.status?.systemIdentifier ?? '-'}`,
  );
  const { rows, note } = await instanceRows(client, db, kubectlFor(kubeconfig));
  say(instanceTable(rows));
  if (note) say(`(${note})`);

  const ro = `${name}-ro`;
  say(
    `\nA row written through the read-write Service ${name}, read back through the read-only Service ${ro}`,
  );
  say(
    `  (a psql pod on ${POSTGRES_IMAGE}, the application user's password as env from Secret ${db.status?.secretName ?? `${name}-credentials`}):`,
  );
  const text = `hello from the demo at ${new Date().toISOString()}`;
  let check: Awaited<ReturnType<typeof rowCheck>>;
  try {
    check = await rowCheck(client, db, POSTGRES_IMAGE, text, Math.min(timeoutMs, 300_000));
  } catch (err) {
    const hint = (err as { hint?: string }).hint;
    throw new DemoFailure((err as Error).message, hint ? [hint] : []);
  }
  const pods = await databasePods(client, namespace, name);
  const who = (ip: string | undefined) =>
    pods.find((p) => p.status?.podIP === ip)?.metadata.name ?? ip ?? '-';
  const { written, read } = check;
  if (!written || !read || read.note !== text)
    throw new DemoFailure(
      `the psql pod did not report the row written and read back: ${JSON.stringify(check)}`,
      [`kubectl --kubeconfig ${kubeconfig} get pods -n ${namespace}`],
    );
  say(
    `  written: id ${written.id} through ${name}, answered by ${who(written.server)} (${written.recovery ? 'in recovery!' : 'the primary'})` +
      `${written.tries > 1 ? ` after ${written.tries} tries` : ''}`,
  );
  say(
    `  read:    "${read.note}" through ${ro}, answered by ${who(read.server)} (${read.recovery ? 'a replica, in recovery' : 'not in recovery!'})` +
      `${read.tries > 1 ? ` after ${read.tries} tries` : ''}`,
  );
  if (written.recovery || !read.recovery)
    throw new DemoFailure(
      'the Services did not reach the roles they select (read-write: the primary; read-only: a replica)',
      [`kubectl --kubeconfig ${kubeconfig} get pods,endpoints -n ${namespace} -L ${ROLE_LABEL}`],
    );
}

if (import.meta.main) {
  demo(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      const hint = (err as { hint?: unknown }).hint;
      process.stderr.write(`demo failed: ${err instanceof Error ? err.message : String(err)}\n`);
      if (typeof hint === 'string') process.stderr.write(`  ${hint}\n`);
      process.exit(1);
    },
  );
}
