/** The public types of pod exec: what to run, what came back, who runs it. */

export interface ExecOptions {
  /** The container to run in. Optional when the pod has exactly one container (the API server picks it). */
  container?: string;
  /** The program and its arguments, e.g. ['pg_ctl', 'promote', '-D', '/data']. No shell unless you run one. */
  command: readonly string[];
  /**
   * Sent to the command's stdin, which is then closed (EOF). Without it the command gets no stdin.
   * A string is sent as UTF-8.
   */
  stdin?: string | Uint8Array;
  /** Aborting it closes the connection; exec rejects with the signal's reason. */
  signal?: AbortSignal;
  /**
   * Milliseconds until the exec gives up (connecting included) and rejects with ExecTimeoutError; 0
   * waits forever. Defaults to the executor's timeout (60 s). The command itself may go on running in the
   * container: Kubernetes does not kill it when the connection closes.
   */
  timeoutMs?: number;
}

export interface ExecResult {
  /** The command's stdout, decoded as UTF-8 (at most `maxOutputBytes` bytes of it). */
  stdout: string;
  stderr: string;
  /** 0 on success; the command's exit code otherwise. */
  exitCode: number;
  /** Present when a stream produced more than `maxOutputBytes`: the rest was read and dropped. */
  truncated?: { stdout: boolean; stderr: boolean };
}

/** The pod to exec into; the namespace defaults to the configuration's (or "default" for the fake). */
export interface ExecTarget {
  namespace?: string;
  name: string;
}

/**
 * Runs commands in pods' containers, through the API server (the pods/exec subresource): the commands
 * run as the container's user, with the container's filesystem, environment and network.
 * RBAC: `get` and `create` on `pods/exec` in the pod's namespace (a WebSocket exec is authorized as `get`;
 * Kubernetes 1.35 also checks `create`).
 */
export interface PodExecutor {
  exec(key: ExecTarget, opts: ExecOptions): Promise<ExecResult>;
}
