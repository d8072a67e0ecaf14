/**
 * Waiting for the manager Deployment after deploy: a pure judgement of the Deployment and its pods
 * (ready, progress, or a failure that waiting will not fix), and the poll loop around it.
 */
import { type Deployment, Deployments, type Pod, Pods, type RestClient } from '@opkit/runtime';
import { CliError } from '../errors.ts';
import type { Io } from '../io.ts';

/** Waiting reasons that do not go away by waiting: say so at once. */
const PULL_FAILURES = new Set(['ErrImageNeverPull', 'ImagePullBackOff', 'ErrImagePull', 'InvalidImageName']);
const CRASH_FAILURES = new Set([
  'CrashLoopBackOff',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
]);

export type Rollout =
  | { state: 'ready'; progress: string }
  | { state: 'progressing'; progress: string }
  | { state: 'failed'; progress: string; reason: string; pod: string; container: string; message: string };

/**
 * `image`: the image being deployed; only pods running it count for failures (the pods of an earlier
 * rollout, e.g. one with an image that could not be pulled, are being replaced).
 */
export function judgeRollout(
  deployment: Deployment | undefined,
  pods: readonly Pod[],
  image?: string,
): Rollout {
  const want = deployment?.spec?.replicas ?? 1;
  const ready = deployment?.status?.readyReplicas ?? 0;
  const updated = deployment?.status?.updatedReplicas ?? 0;
  const phases = pods.map((p) => {
    const waiting = p.status?.containerStatuses?.find((c) => c.state?.waiting?.reason)?.state?.waiting
      ?.reason;
    return `${p.metadata?.name}: ${waiting ?? p.status?.phase ?? 'Pending'}`;
  });
  const progress = `${ready}/${want} ready, ${updated} updated${phases.length ? ` (${phases.join(', ')})` : ''}`;
  for (const pod of pods) {
    for (const c of pod.status?.containerStatuses ?? []) {
      const spec = pod.spec?.containers.find((x) => x.name === c.name);
      if (image !== undefined && spec?.image !== image) continue;
      const w = c.state?.waiting;
      if (w?.reason && (PULL_FAILURES.has(w.reason) || CRASH_FAILURES.has(w.reason))) {
        return {
          state: 'failed',
          progress,
          reason: w.reason,
          pod: pod.metadata?.name ?? '',
          container: c.name,
          message: w.message ?? '',
        };
      }
    }
  }
  const generation = deployment?.metadata?.generation ?? 0;
  const observed = deployment?.status?.observedGeneration ?? -1;
  if (deployment && observed >= generation && ready >= want && updated >= want)
    return { state: 'ready', progress };
  return { state: 'progressing', progress };
}

/** The hint for a failure: what the user does next. */
export function failureHint(r: Extract<Rollout, { state: 'failed' }>, image: string): string {
  if (PULL_FAILURES.has(r.reason))
    return `nothing can be pulled here: build and load the image first (opkit build --image ${image} --load), and keep imagePullPolicy IfNotPresent (a tag other than :latest)`;
  return 'read the container log above, fix the operator, then build, load and deploy again';
}

async function lastLogLines(client: RestClient, ns: string, pod: string, container: string): Promise<string> {
  for (const previous of [true, false]) {
    try {
      const text = await client.transport.request<unknown>({
        method: 'GET',
        path: `/api/v1/namespaces/${ns}/pods/${pod}/log`,
        query: { container, tailLines: '20', ...(previous ? { previous: 'true' } : {}) },
      });
      if (typeof text === 'string' && text.trim()) return text.trimEnd();
    } catch {
      // no previous container yet, or no log: try the current one
    }
  }
  return '(no log)';
}

/** Polls until the Deployment is Ready; throws a CliError naming the reason when it cannot become so. */
export async function waitForRollout(
  client: RestClient,
  opts: { namespace: string; name: string; selector: string; image: string; timeoutMs: number; io: Io },
): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  let shown = '';
  for (;;) {
    const deployment = await client
      .get(Deployments, { namespace: opts.namespace, name: opts.name })
      .catch(() => undefined);
    const pods = (await client.list(Pods, { namespace: opts.namespace, labelSelector: opts.selector })).items;
    const r = judgeRollout(deployment, pods, opts.image);
    if (r.progress !== shown) {
      opts.io.err(`    ${opts.name}: ${r.progress}`);
      shown = r.progress;
    }
    if (r.state === 'ready') return;
    if (r.state === 'failed') {
      const log = CRASH_FAILURES.has(r.reason)
        ? `\nthe last lines of its log:\n${await lastLogLines(client, opts.namespace, r.pod, r.container)}`
        : '';
      throw new CliError(
        `the manager cannot start: pod ${r.pod}, container ${r.container}: ${r.reason}${r.message ? ` (${r.message})` : ''}${log}`,
        failureHint(r, opts.image),
      );
    }
    if (Date.now() > deadline) {
      throw new CliError(
        `the manager Deployment ${opts.namespace}/${opts.name} is not Ready after ${Math.round(opts.timeoutMs / 1000)} s: ${r.progress}`,
        `look at it: kubectl -n ${opts.namespace} describe deployment ${opts.name}; or deploy with --no-wait`,
      );
    }
    await new Promise((res) => setTimeout(res, 1000));
  }
}
