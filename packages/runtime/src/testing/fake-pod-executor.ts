/**
 * FakePodExecutor: a PodExecutor for unit tests. Commands are answered by handlers registered per pod,
 * container and command; every call is recorded. Given a client (a FakeClient), it refuses what the API
 * server and kubelet refuse, with the same typed errors: a missing pod (NotFoundError), a container not
 * in the pod's spec (ContainerNotFoundError), no container named when the pod has several
 * (BadRequestError), a pod without a node, not Running, or whose container is not running
 * (ContainerNotRunningError).
 */
import { type Pod, Pods } from '../api/builtin.ts';
import type { Status } from '../client/errors.ts';
import type { Client } from '../client/types.ts';
import { ContainerNotFoundError, ContainerNotRunningError, ExecTimeoutError } from '../exec/errors.ts';
import type { ExecOptions, ExecResult, ExecTarget, PodExecutor } from '../exec/types.ts';
import { abortReason } from '../util/abort.ts';
import { badRequestError } from './errors.ts';

/** One exec the fake received. */
export interface ExecCall {
  namespace: string;
  name: string;
  /** As asked; with a client, the one the API server would pick when the pod has a single container. */
  container?: string;
  command: readonly string[];
  /** stdin as UTF-8 text, when some was sent. */
  stdin?: string;
}

/** Which calls a handler answers; every field given must match. */
export interface ExecMatcher {
  namespace?: string;
  pod?: string | RegExp;
  container?: string;
  /** The exact argv, a RegExp tested against the argv joined by spaces, or a predicate. */
  command?: readonly string[] | RegExp | ((command: readonly string[]) => boolean);
}

/** What a matching call returns: a result (missing fields: "" and exit code 0), or a function of the call. */
export type ExecHandler =
  | Partial<ExecResult>
  | ((call: ExecCall, signal: AbortSignal) => Partial<ExecResult> | Promise<Partial<ExecResult>>);

export interface FakePodExecutorOptions {
  /** When given, pods are looked up in it and refused as the API server would. */
  client?: Client;
  /** The namespace of keys without one. Default "default". */
  defaultNamespace?: string;
}

export class FakePodExecutor implements PodExecutor {
  /** Every call, in order (refused ones too). */
  readonly calls: ExecCall[] = [];
  readonly #client: Client | undefined;
  readonly #defaultNamespace: string;
  readonly #handlers: { matcher: ExecMatcher; handler: ExecHandler }[] = [];

  constructor(opts: FakePodExecutorOptions = {}) {
    this.#client = opts.client;
    this.#defaultNamespace = opts.defaultNamespace ?? 'default';
  }

  /** Answers the calls `matcher` matches with `handler`; a later handler wins over an earlier one. */
  on(matcher: ExecMatcher, handler: ExecHandler): this {
    this.#handlers.unshift({ matcher, handler });
    return this;
  }

  async exec(key: ExecTarget, opts: ExecOptions): Promise<ExecResult> {
    if (!Array.isArray(opts.command) || opts.command.length === 0) {
      throw new TypeError(
        'exec: opts.command must be a non-empty array of strings, e.g. ["sh", "-c", "..."]',
      );
    }
    const namespace = key.namespace || this.#defaultNamespace;
    const call: ExecCall = { namespace, name: key.name, command: [...opts.command] };
    if (opts.container) call.container = opts.container;
    if (opts.stdin !== undefined) {
      call.stdin = typeof opts.stdin === 'string' ? opts.stdin : Buffer.from(opts.stdin).toString('utf8');
    }
    this.calls.push(call);
    if (opts.signal?.aborted) throw abortReason(opts.signal);
    if (this.#client) {
      const pod = await this.#client.get(Pods, { namespace, name: key.name }, { signal: opts.signal });
      call.container = refusal(pod, key.name, opts.container);
    }
    const entry = this.#handlers.find((h) => matches(h.matcher, call));
    if (!entry) {
      throw new Error(
        `FakePodExecutor: no handler for ${JSON.stringify(call.command)} in pod ${namespace}/${key.name}` +
          `${call.container ? ` container ${call.container}` : ''}: register one with on()`,
      );
    }
    const { handler } = entry;
    const answer = typeof handler === 'function' ? run(handler, call, opts) : Promise.resolve(handler);
    const out = await answer;
    const result: ExecResult = {
      stdout: out.stdout ?? '',
      stderr: out.stderr ?? '',
      exitCode: out.exitCode ?? 0,
    };
    if (out.truncated) result.truncated = { ...out.truncated };
    return result;
  }
}

/** Runs a handler bounded by the call's signal and timeout, as the real executor is. */
async function run(
  handler: Exclude<ExecHandler, Partial<ExecResult>>,
  call: ExecCall,
  opts: ExecOptions,
): Promise<Partial<ExecResult>> {
  const controller = new AbortController();
  const onAbort = (): void => controller.abort(abortReason(opts.signal as AbortSignal));
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  const timer =
    opts.timeoutMs && opts.timeoutMs > 0
      ? setTimeout(
          () =>
            controller.abort(
              new ExecTimeoutError(
                `exec of ${JSON.stringify(call.command.join(' '))} in pod ${call.namespace}/${call.name}: ` +
                  `no exit status after ${opts.timeoutMs}ms`,
              ),
            ),
          opts.timeoutMs,
        )
      : undefined;
  try {
    return await new Promise<Partial<ExecResult>>((resolve, reject) => {
      controller.signal.addEventListener('abort', () => reject(abortReason(controller.signal)), {
        once: true,
      });
      Promise.resolve(handler(call, controller.signal)).then(resolve, reject);
    });
  } finally {
    if (timer) clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
  }
}

function matches(m: ExecMatcher, call: ExecCall): boolean {
  if (m.namespace !== undefined && m.namespace !== call.namespace) return false;
  if (m.pod !== undefined && !(typeof m.pod === 'string' ? m.pod === call.name : m.pod.test(call.name))) {
    return false;
  }
  if (m.container !== undefined && m.container !== call.container) return false;
  const { command } = m;
  if (command === undefined) return true;
  if (typeof command === 'function') return command(call.command);
  if (command instanceof RegExp) return command.test(call.command.join(' '));
  return command.length === call.command.length && command.every((arg, i) => arg === call.command[i]);
}

/**
 * Throws what the API server (or the kubelet) answers for an exec into `pod` that cannot run; returns
 * the container the exec runs in otherwise. Messages are the API server's and the kubelet's.
 */
function refusal(pod: Pod, name: string, container: string | undefined): string {
  const containers = pod.spec?.containers ?? [];
  let target = container;
  if (!target) {
    if (containers.length === 1) target = containers[0]?.name;
    else {
      const names = containers.map((c) => c.name).join(' ');
      throw badRequestError(`a container name must be specified for pod ${name}, choose one of: [${names}]`);
    }
  } else if (!containers.some((c) => c.name === target)) {
    throw new ContainerNotFoundError(
      failure(400, 'BadRequest', `container ${target} is not valid for pod ${name}`),
    );
  }
  const chosen = target ?? '';
  if (!pod.spec?.nodeName) {
    throw new ContainerNotRunningError(
      failure(400, 'BadRequest', `pod ${name} does not have a host assigned`),
    );
  }
  const state = pod.status?.containerStatuses?.find((s) => s.name === chosen)?.state;
  if (pod.status?.phase !== 'Running' || (state !== undefined && !state.running)) {
    throw new ContainerNotRunningError(
      failure(
        500,
        'InternalError',
        `Internal error occurred: unable to upgrade connection: container not found ("${chosen}")`,
      ),
    );
  }
  return chosen;
}

function failure(code: number, reason: string, message: string): Status {
  return { kind: 'Status', status: 'Failure', code, reason, message };
}
