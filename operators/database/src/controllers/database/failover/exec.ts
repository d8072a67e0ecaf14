/**
 * Running a command in a pod's container through the API's pods/exec: how the operator acts on the
 * instances (no network path to the superuser is needed; works in and out of cluster). The interface is
 * @opkit/runtime's PodExecutor (newPodExecutor, FakePodExecutor in its testing module); declared here
 * structurally so the controller depends on the shape only.
 */
export interface ExecOptions {
  container?: string;
  command: readonly string[];
  stdin?: string | Uint8Array;
  signal?: AbortSignal;
  timeoutMs?: number;
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export interface PodExecutor {
  exec(key: { namespace?: string; name: string }, opts: ExecOptions): Promise<ExecResult>;
}
