/** Pod exec: a command in a pod's container through the API server (docs/runtime.md, "Exec"). */
import {
  ContainerNotRunningError,
  type ExecResult,
  loadConfig,
  type Manager,
  NodeUnreachableError,
  newPodExecutor,
  type PodExecutor,
  Pods,
} from '@opkit/runtime';
import { FakeClient, FakePodExecutor } from '@opkit/runtime/testing';

// #region executor
export function executor(mgr: Manager, kubeconfig?: string): PodExecutor {
  // The client's configuration: certificates, tokens, exec plugins, impersonation.
  const config = loadConfig({ kubeconfig });
  // Counted in the manager's rest_client_requests_total, like the client's requests.
  return newPodExecutor(config, { timeoutMs: 30_000, onRequest: mgr.metrics.restClientObserver() });
}
// #endregion executor

// #region exec
/** Promotes a PostgreSQL standby; undefined when it cannot run now (retry later). */
export async function promote(
  exec: PodExecutor,
  namespace: string,
  pod: string,
): Promise<ExecResult | undefined> {
  try {
    const result = await exec.exec(
      { namespace, name: pod },
      { container: 'postgres', command: ['pg_ctl', 'promote', '-D', '/var/lib/postgresql/data'] },
    );
    if (result.exitCode !== 0)
      throw new Error(`pg_ctl promote failed (${result.exitCode}): ${result.stderr}`);
    return result;
  } catch (err) {
    // The pod's container is not running, or its node is unreachable: the command did not run.
    if (err instanceof ContainerNotRunningError || err instanceof NodeUnreachableError) return undefined;
    throw err; // NotFoundError, ForbiddenError (names the RBAC to grant), ExecTimeoutError, ...
  }
}
// #endregion exec

// #region fake
export async function promoteOnFake(): Promise<{ promoted: boolean; commands: string[][] }> {
  // With a client holding the pods, a missing pod or container, or a pod not Running, is refused with the
  // API server's typed errors. Without one, every call goes to the handlers.
  const client = new FakeClient({
    objects: [
      {
        resource: Pods,
        object: {
          metadata: { namespace: 'db', name: 'pg-1' },
          spec: { nodeName: 'node-1', containers: [{ name: 'postgres', image: 'postgres:15' }] },
          status: { phase: 'Running' },
        },
      },
    ],
  });
  const exec = new FakePodExecutor({ client }).on(
    { pod: 'pg-1', command: /^pg_ctl promote/ },
    { stdout: 'server promoting\n' },
  );
  const result = await promote(exec, 'db', 'pg-1');
  return { promoted: result !== undefined, commands: exec.calls.map((c) => [...c.command]) };
}
// #endregion fake
