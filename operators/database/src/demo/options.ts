/** The demo's command line (pure): flags parsed and checked, each error naming its flag. */
import { parseArgs } from 'node:util';

export const DEMO_USAGE = `Usage: npm run demo -- [flags]   (node operators/database/src/demo/main.ts [flags])

Shows the Database operator working: a PostgreSQL 15 Database with 3 instances on real pods (as root, on
opkit's local cluster with a real node), and the seed's production-db sample (mysql 8.0) on simulated nodes.

Flags:
  --local               always use opkit's local cluster, even when a kubeconfig points at a reachable one
  --kubeconfig PATH     use this cluster (otherwise $KUBECONFIG, ~/.kube/config, else the local cluster)
  --cluster NAME        the local cluster's name (default opkit; npx opkit-controlplane down --name NAME stops it)
  --namespace NS        where the Databases go (default default)
  --timeout SECONDS     how long to wait for each Database to be Running (default 600)
  --simulated           skip the real pods: only the sample on simulated (kwok) nodes
  --in-cluster          build the operator's image (opkit build), load it onto the real node and deploy it
                        with config/default (opkit deploy) instead of running it in this process
  --verbose             the operator's logs (in-process) and every build step
  -h, --help            this text`;

export interface DemoOptions {
  local: boolean;
  kubeconfig: string | undefined;
  cluster: string;
  namespace: string;
  timeoutMs: number;
  simulated: boolean;
  inCluster: boolean;
  verbose: boolean;
  help: boolean;
}

export class DemoUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DemoUsageError';
  }
}

const NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export function parseDemoArgs(argv: string[]): DemoOptions {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        local: { type: 'boolean', default: false },
        kubeconfig: { type: 'string' },
        cluster: { type: 'string', default: 'opkit' },
        namespace: { type: 'string', default: 'default' },
        timeout: { type: 'string', default: '600' },
        simulated: { type: 'boolean', default: false },
        'in-cluster': { type: 'boolean', default: false },
        verbose: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }));
  } catch (err) {
    throw new DemoUsageError((err as Error).message);
  }
  const timeout = String(values.timeout);
  const seconds = Number(timeout);
  if (!/^\d+(\.\d+)?$/.test(timeout) || !(seconds > 0))
    throw new DemoUsageError(`--timeout must be a number of seconds > 0, not "${timeout}"`);
  const namespace = String(values.namespace);
  if (!NAME.test(namespace) || namespace.length > 63)
    throw new DemoUsageError(`--namespace must be a DNS label (a-z, 0-9, -), not "${namespace}"`);
  const cluster = String(values.cluster);
  if (!NAME.test(cluster))
    throw new DemoUsageError(`--cluster must be a name (a-z, 0-9, -), not "${cluster}"`);
  const kubeconfig = values.kubeconfig === undefined ? undefined : String(values.kubeconfig);
  if (values.local === true && kubeconfig !== undefined)
    throw new DemoUsageError('--local and --kubeconfig exclude each other: pick one cluster');
  if (values['in-cluster'] === true && values.simulated === true)
    throw new DemoUsageError(
      '--in-cluster and --simulated exclude each other: the in-cluster operator runs on the real node',
    );
  return {
    local: values.local === true,
    kubeconfig,
    cluster,
    namespace,
    timeoutMs: seconds * 1000,
    simulated: values.simulated === true,
    inCluster: values['in-cluster'] === true,
    verbose: values.verbose === true,
    help: values.help === true,
  };
}
