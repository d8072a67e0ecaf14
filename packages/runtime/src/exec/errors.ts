/**
 * The typed errors of pod exec, and the mapping from what the API server (or the kubelet behind it)
 * answers to them. Pure: used by the WebSocket executor and by the fake.
 *
 * - NotFoundError (the pod does not exist) and ForbiddenError (no RBAC for pods/exec; the message says
 *   what to grant) are the client's errors;
 * - ContainerNotFoundError: the container is not in the pod's spec;
 * - ContainerNotRunningError: the pod has no node yet, is not running, or the container is not running
 *   (waiting, restarting, terminated): retry later;
 * - NodeUnreachableError: the API server could not reach the pod's kubelet (the command did not run);
 * - ServerError: anything else the kubelet answered, e.g. the executable not found in the container;
 * - ExecTimeoutError: no exit status within the timeout (partial output attached);
 * - ConnectionError: the API server could not be reached, or the stream broke before the exit status.
 * An abort rejects with the signal's reason, as every request of the client does.
 */
import { ApiError, BadRequestError, errorFromStatus, ForbiddenError, type Status } from '../client/errors.ts';

/** The container named is not in the pod's spec (the API server's 400). Check the name. */
export class ContainerNotFoundError extends BadRequestError {}

/**
 * The command could not start because the pod or container is not running: no node assigned yet, the
 * container waiting, restarting or terminated. Retrying later may work.
 */
export class ContainerNotRunningError extends ApiError {}

/**
 * The API server could not reach the kubelet of the pod's node (down, partitioned, or a simulated kwok
 * node): the command did not run. The node may be gone; retrying later may work.
 */
export class NodeUnreachableError extends ApiError {}

/** No exit status within `timeoutMs`. The command may still be running in the container. */
export class ExecTimeoutError extends Error {
  /** What the command wrote before the timeout. */
  readonly stdout: string;
  readonly stderr: string;
  constructor(message: string, stdout = '', stderr = '') {
    super(message);
    this.name = 'ExecTimeoutError';
    this.stdout = stdout;
    this.stderr = stderr;
  }
}

/**
 * The RBAC a caller needs to exec, for error messages. A WebSocket exec is authorized as `get` on
 * pods/exec (checked on Kubernetes 1.34: `create` alone is refused); Kubernetes 1.35 also checks
 * `create` (AuthorizePodWebsocketUpgradeCreatePermission), which SPDY clients (kubectl before 1.31) use.
 */
export function execRbacHint(namespace: string): string {
  return (
    `exec needs RBAC verbs "get" and "create" on resource "pods/exec" in namespace "${namespace}": ` +
    'grant them to this user or ServiceAccount with a Role and RoleBinding'
  );
}

/** Messages of the API server and kubelet that mean the pod or container is not running. */
const NOT_RUNNING =
  /does not have a host assigned|container not found|is not running|completed pod|is waiting to start|ContainerCreating|PodInitializing|cannot exec in a (stopped|deleted) state|task [0-9a-f]+ not found/i;
/** Messages of the API server when it cannot reach the pod's kubelet. */
const NODE_UNREACHABLE =
  /error dialing backend|error sending request|dial tcp|connection refused|no route to host|i\/o timeout|connection reset/i;
/** The API server's message for a container name not in the pod's spec. */
const NOT_IN_SPEC = /container .* is not valid for pod/i;

/**
 * The typed error for a failed exec: `status` is the metav1.Status the API server answered (an HTTP
 * error before the upgrade, or the Failure on the error channel), `httpCode` the HTTP status (0 when it
 * came on the error channel).
 */
export function execErrorFromStatus(status: Status, httpCode: number, namespace: string): ApiError {
  const code = status.code ?? httpCode;
  const message = status.message ?? '';
  const full: Status = { kind: 'Status', status: 'Failure', ...status, code: code || 500 };
  if (code === 403) {
    return new ForbiddenError({ ...full, message: `${message || 'forbidden'} (${execRbacHint(namespace)})` });
  }
  if (code === 404) return errorFromStatus(code, full);
  if (NOT_IN_SPEC.test(message)) return new ContainerNotFoundError(full, code);
  if (NOT_RUNNING.test(message)) return new ContainerNotRunningError(full, code);
  if (NODE_UNREACHABLE.test(message)) return new NodeUnreachableError(full, code);
  return errorFromStatus(full.code ?? 500, full);
}

/** How a command ended, from the Status on the error channel. */
export type ExecOutcome = { exitCode: number } | { error: ApiError };

/**
 * Reads the metav1.Status the API server sends on the error channel when the command ends: Success is
 * exit code 0; Failure with reason NonZeroExitCode carries the code in details.causes[reason=ExitCode];
 * any other Failure (the command could not start, the container is gone) is an error.
 */
export function parseExecStatus(text: string, namespace: string): ExecOutcome {
  let status: Status;
  try {
    const parsed: unknown = JSON.parse(text);
    if (!parsed || typeof parsed !== 'object') throw new Error('not an object');
    status = parsed as Status;
  } catch {
    // v1-v3 of the protocol sent plain text; v4 and v5 always send a Status.
    return { error: execErrorFromStatus({ message: text.trim() || 'exec failed' }, 500, namespace) };
  }
  if (status.status === 'Success') return { exitCode: 0 };
  if (status.reason === 'NonZeroExitCode') {
    const cause = status.details?.causes?.find((c) => c.reason === 'ExitCode');
    const exitCode = Number.parseInt(cause?.message ?? '', 10);
    if (Number.isInteger(exitCode)) return { exitCode };
  }
  return { error: execErrorFromStatus(status, 0, namespace) };
}
