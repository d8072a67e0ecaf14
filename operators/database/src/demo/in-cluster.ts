/**
 * `--in-cluster`: the operator as a user deploys it (issue 16): its Dockerfile built by `opkit build` (the
 * local builder, onto opkit.local/node:24), loaded onto the local cluster's real node, and config/default
 * deployed by `opkit deploy`, which waits until the manager is Ready. Each step is the CLI a user runs, as
 * a child process, its output shown as it comes.
 */
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { withProgress } from './progress.ts';

const here = dirname(fileURLToPath(import.meta.url));
export const OPERATOR_DIR = join(here, '..', '..');
const OPKIT = join(OPERATOR_DIR, '..', '..', 'packages', 'cli', 'src', 'main.ts');

export const IN_CLUSTER_IMAGE = 'opkit.local/database-operator:demo';
export const MANAGER_NAMESPACE = 'database-operator-system';
export const MANAGER_DEPLOYMENT = 'database-operator-controller-manager';

/** `opkit build` of the operator's own Dockerfile into an OCI archive, run in operators/database. */
export function operatorBuildArgs(image: string, archive: string): string[] {
  return ['build', '--context', '../..', '--file', 'Dockerfile', '--image', image, '--archive', archive];
}

/** The two commands, as a user would type them in operators/database (shown, then run). */
export function inClusterCommands(
  cluster: string,
  kubeconfig: string,
  archive: string,
  timeoutS: number,
): string[][] {
  return [
    [...operatorBuildArgs(IN_CLUSTER_IMAGE, archive), '--load', '--cluster', cluster],
    [
      'deploy',
      '--image',
      IN_CLUSTER_IMAGE,
      '--kubeconfig',
      kubeconfig,
      '--timeout',
      String(Math.ceil(timeoutS)),
    ],
  ];
}

function opkit(args: string[], say: (line: string) => void): Promise<number> {
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [OPKIT, ...args], {
      cwd: OPERATOR_DIR,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines = (chunk: Buffer) => {
      for (const l of chunk.toString().split('\n')) if (l.trim()) say(`  ${l.trimEnd()}`);
    };
    child.stdout.on('data', lines);
    child.stderr.on('data', lines);
    child.on('error', reject);
    child.on('close', (code) => resolve(code ?? 1));
  });
}

export class InClusterError extends Error {
  readonly hint: string;
  constructor(message: string, hint: string) {
    super(message);
    this.name = 'InClusterError';
    this.hint = hint;
  }
}

/** Builds, loads and deploys the operator; resolves once its manager is Ready. */
export async function deployInCluster(
  cluster: string,
  kubeconfig: string,
  timeoutMs: number,
  say: (line: string) => void,
): Promise<void> {
  const archive = join(tmpdir(), `opkit-demo-operator-${process.pid}.oci.tar`);
  try {
    for (const args of inClusterCommands(cluster, kubeconfig, archive, timeoutMs / 1000)) {
      say(`\n$ (cd operators/database && npx opkit ${args.join(' ')})`);
      const code = await withProgress(`running opkit ${args[0]}`, say, () => opkit(args, say));
      if (code !== 0)
        throw new InClusterError(
          `opkit ${args[0]} exited with ${code} (its output is above)`,
          args[0] === 'deploy'
            ? `kubectl --kubeconfig ${kubeconfig} -n ${MANAGER_NAMESPACE} describe pods; ... logs deploy/${MANAGER_DEPLOYMENT}`
            : 'run the same command in operators/database with --verbose, or see operators/database/README.md "Deploying it"',
        );
    }
  } finally {
    rmSync(archive, { force: true });
  }
}
