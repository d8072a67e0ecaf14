/**
 * The ConfigMap mirror as a binary:
 *
 *   node examples/configmap-mirror/main.ts --kubeconfig <path> [--source default] [--target mirror]
 *
 * Serves /healthz and /readyz on --health-probe-bind-address and /metrics on --metrics-bind-address,
 * logs JSON lines to stdout, and shuts down gracefully on SIGTERM or Ctrl-C (a second one exits at
 * once). With --leader-elect only the replica holding the Lease reconciles.
 */
import { parseArgs } from 'node:util';
import { createLogger } from '@opkit/runtime';
import { CONTROLLER_NAME, createMirrorManager } from './controller.ts';

const USAGE = `Usage: node examples/configmap-mirror/main.ts [flags]

Mirrors ConfigMaps labelled opkit.dev/mirror=true from one namespace into another.

  --kubeconfig <path>                  kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)
  --context <name>                     kubeconfig context (default: its current-context)
  --source <namespace>                 namespace to mirror from (default: default)
  --target <namespace>                 namespace to mirror into; must exist (default: mirror)
  --health-probe-bind-address <addr>   /healthz and /readyz (default: :8081; 0 disables)
  --metrics-bind-address <addr>        /metrics (default: :8080; 0 disables)
  --leader-elect                       elect a leader through a Lease, for running several replicas
  --leader-election-namespace <ns>     namespace of the Lease (default: the kubeconfig's namespace)
  --max-concurrent-reconciles <n>      keys reconciled in parallel (default: 1)
  -h, --help                           show this help
`;

const { values: flags } = parseArgs({
  options: {
    kubeconfig: { type: 'string' },
    context: { type: 'string' },
    source: { type: 'string', default: 'default' },
    target: { type: 'string', default: 'mirror' },
    'health-probe-bind-address': { type: 'string', default: ':8081' },
    'metrics-bind-address': { type: 'string', default: ':8080' },
    'leader-elect': { type: 'boolean', default: false },
    'leader-election-namespace': { type: 'string' },
    'max-concurrent-reconciles': { type: 'string', default: '1' },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});

if (flags.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}

const log = createLogger({ name: CONTROLLER_NAME });
try {
  const mgr = await createMirrorManager({
    ...(flags.kubeconfig ? { kubeconfig: flags.kubeconfig } : {}),
    ...(flags.context ? { context: flags.context } : {}),
    sourceNamespace: flags.source,
    targetNamespace: flags.target,
    maxConcurrentReconciles: Number.parseInt(flags['max-concurrent-reconciles'], 10),
    healthProbeBindAddress: flags['health-probe-bind-address'],
    metricsBindAddress: flags['metrics-bind-address'],
    ...(flags['leader-elect']
      ? {
          leaderElection: {
            id: 'configmap-mirror.opkit.dev',
            ...(flags['leader-election-namespace'] ? { namespace: flags['leader-election-namespace'] } : {}),
          },
        }
      : {}),
    logger: log,
  });
  // Runs until SIGTERM/SIGINT (the manager installs the handlers when no signal is passed).
  const run = mgr.start();
  void mgr.elected.then(() =>
    log.info(
      {
        source: flags.source,
        target: flags.target,
        healthProbeAddress: mgr.healthProbeAddress,
        metricsAddress: mgr.metricsAddress,
      },
      'configmap-mirror is running',
    ),
  );
  await run;
} catch (err) {
  log.fatal({ err }, 'configmap-mirror failed');
  process.exitCode = 1;
}
