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
  CustomResourceDefinitions,
  createClient,
  createLogger,
  createOrUpdate,
  Deployments,
  loadConfig,
  Namespaces,
  NotFoundError,
  type RestClient,
} from '@opkit/runtime';
import { parse } from 'yaml';
import { type Database, Databases, ROLE_LABEL } from '../api/v1/database.ts';
import { runOperator } from '../main.ts';
import {
  configuredCluster,
  type DemoCluster,
  ensureImageOnNodes,
  localCluster,
  realNodes,
  type Say,
} from './cluster.ts';
import { printerTable } from './format.ts';
import { deployInCluster, IN_CLUSTER_IMAGE, MANAGER_DEPLOYMENT, MANAGER_NAMESPACE } from './in-cluster.ts';
import { DEMO_USAGE, DemoUsageError, parseDemoArgs } from './options.ts';
import { kubectlFor, onSimulatedNodes, PG_DEMO_NAME, postgresDatabase } from './postgres.ts';
import { DemoFailure, showPostgres, type Target, waitRunning } from './steps.ts';

const here = dirname(fileURLToPath(import.meta.url));
export const SAMPLE = join(here, '..', '..', 'config', 'samples', 'myapp_v1_database.yaml');

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

    // Read again: currentPrimary can come a moment after Running.
    const seedDb = await client.get(Databases.resource, { namespace, name: sampleName });
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
