/**
 * Shared set-up for the Database operator's integration tests: a real cluster (etcd, kube-apiserver,
 * controller-manager, scheduler, kwok nodes, the volume provisioner), the CRD installed from the generated
 * YAML, and the operator running in-process (or as a child process, see restart.test.ts).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ControlPlane, type StartOptions, start } from '@opkit/controlplane';
import {
  type Client,
  type CustomResourceDefinition,
  CustomResourceDefinitions,
  createClient,
  createLogger,
  type DeleteOptions,
  type Event,
  Events,
  type KubeObject,
  type ListOptions,
  type Logger,
  loadConfig,
  Namespaces,
  type Node,
  Nodes,
  type ObjectKey,
  type ObjectList,
  type Patch,
  Pods,
  type Resource,
  type RestClient,
  StatefulSets,
  type WatchEvent,
  type WatchOptions,
  type WriteOptions,
} from '@opkit/runtime';
import { eventually as pollUntil } from '@opkit/runtime/testing';
import { parse } from 'yaml';
import { staleOutputs } from '../../scripts/generate.ts';
import { type Database, Databases } from '../../src/api/v1/database.ts';
import { runOperator } from '../../src/main.ts';

const here = dirname(fileURLToPath(import.meta.url));
export const OPERATOR_DIR = join(here, '..', '..');
export const CRD_YAML = join(OPERATOR_DIR, 'config', 'crd', 'bases', 'myapp.example.com_databases.yaml');
export const SAMPLE_YAML = join(OPERATOR_DIR, 'config', 'samples', 'myapp_v1_database.yaml');

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `fn` until it returns a truthy value; fails with `what` (and the last value seen) after timeoutMs. */
/** Polls until `fn` returns something truthy (60 s, every 100 ms by default); see runtime's eventually. */
export async function eventually<T>(
  what: string,
  fn: () => Promise<T | undefined | false | null> | T | undefined | false | null,
  timeoutMs = 60_000,
  intervalMs = 100,
): Promise<T> {
  return pollUntil(what, async () => (await fn()) || undefined, { timeoutMs, intervalMs });
}

export interface Cluster {
  cp: ControlPlane;
  client: RestClient;
  kubeconfig: string;
  stop(): Promise<void>;
}

/**
 * A cluster-mode control plane with the Database CRD installed (from the generated YAML): 3 kwok nodes by
 * default, or the given start options (real nodes: `{ nodes: 1, realNodes: 1, images: [POSTGRES_IMAGE] }`).
 */
export async function startCluster(
  opts: Pick<StartOptions, 'nodes' | 'realNodes' | 'images'> = { nodes: 3 },
): Promise<Cluster> {
  assert.deepEqual(
    await staleOutputs(),
    [],
    'generated manifests are out of date: run npm run generate -w operators/database',
  );
  const yaml = readFileSync(CRD_YAML, 'utf8');
  const cp = await start({ mode: 'cluster', ...opts });
  const client = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), { fieldManager: 'test' });
  try {
    await installCrd(client, yaml);
  } catch (err) {
    client.close();
    await cp.stop();
    throw err;
  }
  return {
    cp,
    client,
    kubeconfig: cp.kubeconfigPath,
    async stop() {
      client.close();
      await cp.stop();
    },
  };
}

async function installCrd(client: RestClient, yaml: string): Promise<void> {
  const docs = yaml
    .split(/^---$/m)
    .map((d) => parse(d) as CustomResourceDefinition | null)
    .filter((d): d is CustomResourceDefinition => d !== null);
  for (const crd of docs) await client.create(CustomResourceDefinitions, crd);
  await client.waitForServed(Databases.resource, { timeoutMs: 60_000 });
}

export async function createNamespace(client: Client, name: string): Promise<void> {
  await client.create(Namespaces, { metadata: { name } });
}

/** The issue's sample (config/samples), in `namespace`, with `name` and spec overrides. */
export function sample(namespace: string, name?: string, spec: Partial<Database['spec']> = {}): Database {
  const db = parse(readFileSync(SAMPLE_YAML, 'utf8')) as Database;
  db.metadata.namespace = namespace;
  if (name) db.metadata.name = name;
  db.spec = { ...db.spec, ...spec };
  return db;
}

export function testLogger(name: string): Logger {
  return createLogger({ name, level: (process.env.OPKIT_TEST_LOG_LEVEL as 'info' | undefined) ?? 'silent' });
}

/** Runs the operator in this process until stop(). */
export function startOperator(
  cluster: Cluster,
  opts: {
    client?: Client;
    name?: string;
    namespace?: string;
    /** --replication-poll-interval in ms (the operator's default: 30 s). */
    replicationPollMs?: number;
    /** Serve /metrics on a free loopback port (metricsAddress resolves to it). */
    metrics?: boolean;
  } = {},
): { stop(): Promise<void>; metricsAddress: Promise<string | undefined> } {
  const ac = new AbortController();
  let started: (address: string | undefined) => void = () => {};
  const metricsAddress = new Promise<string | undefined>((resolve) => {
    started = resolve;
  });
  const run = runOperator({
    ...(opts.client ? { client: opts.client } : { kubeconfig: cluster.kubeconfig }),
    ...(opts.namespace ? { namespace: opts.namespace } : {}),
    ...(opts.replicationPollMs !== undefined ? { replicationPollMs: opts.replicationPollMs } : {}),
    ...(opts.metrics ? { metricsBindAddress: '127.0.0.1:0' } : {}),
    onStarted: (info) => started(info.metricsAddress),
    signal: ac.signal,
    logger: testLogger(opts.name ?? 'operator'),
    leaderElect: false,
  });
  run.catch((err: unknown) => {
    process.stderr.write(`operator failed: ${String(err)}\n`);
  });
  return {
    metricsAddress,
    async stop() {
      ac.abort();
      await run.catch(() => {});
    },
  };
}

export interface WriteRecord {
  verb: string;
  resource: string;
  namespace?: string;
  name?: string;
  at: number;
}

/**
 * A Client that records every write it makes (create, update, patch, delete and the status verbs), for
 * "no write when nothing changed" assertions against the real API server.
 */
export class CountingClient implements Client {
  readonly inner: Client;
  readonly writes: WriteRecord[] = [];
  constructor(inner: Client) {
    this.inner = inner;
  }
  get fieldManager(): string {
    return this.inner.fieldManager;
  }
  #record(verb: string, res: Resource, key: { namespace?: string; name?: string }): void {
    this.writes.push({
      verb,
      resource: res.plural,
      ...(key.namespace ? { namespace: key.namespace } : {}),
      ...(key.name ? { name: key.name } : {}),
      at: Date.now(),
    });
  }
  writesSince(t: number): WriteRecord[] {
    return this.writes.filter((w) => w.at >= t);
  }
  get<T extends KubeObject>(res: Resource<T>, key: ObjectKey, opts?: { signal?: AbortSignal }): Promise<T> {
    return this.inner.get(res, key, opts);
  }
  list<T extends KubeObject>(res: Resource<T>, opts?: ListOptions): Promise<ObjectList<T>> {
    return this.inner.list(res, opts);
  }
  watch<T extends KubeObject>(res: Resource<T>, opts?: WatchOptions): AsyncIterable<WatchEvent<T>> {
    return this.inner.watch(res, opts);
  }
  create<T extends KubeObject>(res: Resource<T>, obj: T, opts?: WriteOptions): Promise<T> {
    this.#record('create', res, obj.metadata);
    return this.inner.create(res, obj, opts);
  }
  update<T extends KubeObject>(res: Resource<T>, obj: T, opts?: WriteOptions): Promise<T> {
    this.#record('update', res, obj.metadata);
    return this.inner.update(res, obj, opts);
  }
  updateStatus<T extends KubeObject>(res: Resource<T>, obj: T, opts?: WriteOptions): Promise<T> {
    this.#record('updateStatus', res, obj.metadata);
    return this.inner.updateStatus(res, obj, opts);
  }
  patch<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    patch: Patch,
    opts?: WriteOptions,
  ): Promise<T> {
    this.#record('patch', res, key);
    return this.inner.patch(res, key, patch, opts);
  }
  patchStatus<T extends KubeObject>(
    res: Resource<T>,
    key: ObjectKey,
    patch: Patch,
    opts?: WriteOptions,
  ): Promise<T> {
    this.#record('patchStatus', res, key);
    return this.inner.patchStatus(res, key, patch, opts);
  }
  delete<T extends KubeObject>(res: Resource<T>, key: ObjectKey, opts?: DeleteOptions): Promise<void> {
    this.#record('delete', res, key);
    return this.inner.delete(res, key, opts);
  }
}

export async function getDb(client: Client, namespace: string, name: string): Promise<Database> {
  return client.get(Databases.resource, { namespace, name });
}

/**
 * Waits for the Database's phase, with its status caught up with its generation: the conditions describe
 * it, and, unless the reconcile failed before applying the spec, observedGeneration says it was applied.
 */
export async function waitForPhase(
  client: Client,
  namespace: string,
  name: string,
  phase: string,
  timeoutMs = 90_000,
): Promise<Database> {
  let last: Database | undefined;
  try {
    return await eventually(
      `${namespace}/${name} to be ${phase}`,
      async () => {
        last = await getDb(client, namespace, name);
        const st = last.status;
        const ready = (st?.conditions as { type: string; observedGeneration?: number }[] | undefined)?.find(
          (c) => c.type === 'Ready',
        );
        const described = ready?.observedGeneration === last.metadata.generation;
        const applied = phase === 'Failed' || st?.observedGeneration === last.metadata.generation;
        return st?.phase === phase && described && applied ? last : undefined;
      },
      timeoutMs,
      200,
    );
  } catch (err) {
    const why = await describeInstances(client, namespace, name).catch(
      (e: unknown) => `(not described: ${e})`,
    );
    throw new Error(`${(err as Error).message}; last status: ${JSON.stringify(last?.status)}; ${why}`);
  }
}

/**
 * One line per pod of the Database (phase, node, Ready, container states) and the StatefulSet's status: what a
 * timed-out wait needs to tell a pod that never became Ready from an operator that did not notice it did.
 */
export async function describeInstances(client: Client, namespace: string, name: string): Promise<string> {
  const pods = await client.list(Pods, { namespace, labelSelector: `app.kubernetes.io/instance=${name}` });
  const lines = pods.items.map((p) => {
    const ready = p.status?.conditions?.find((c) => c.type === 'Ready');
    const containers = (p.status?.containerStatuses ?? [])
      .map(
        (c) =>
          `${c.name}:${c.ready ? 'ready' : 'not-ready'}${c.state?.waiting ? `(${c.state.waiting.reason})` : ''}`,
      )
      .join(',');
    const scheduled = p.status?.conditions?.find((c) => c.type === 'PodScheduled');
    return `${p.metadata.name} phase=${p.status?.phase} node=${p.spec?.nodeName ?? '-'} ready=${ready?.status ?? '-'}${ready?.reason ? `(${ready.reason})` : ''} scheduled=${scheduled?.status ?? '-'}${scheduled?.message ? `(${scheduled.message})` : ''} deleting=${p.metadata.deletionTimestamp ? 'yes' : 'no'} containers=${containers || '-'}`;
  });
  const sts = await client.get(StatefulSets, { namespace, name }).catch(() => undefined);
  const stsStatus = sts ? JSON.stringify(sts.status) : 'no StatefulSet';
  return `pods: [${lines.join('; ')}]; StatefulSet status: ${stsStatus}`;
}

/** Marks every node (un)schedulable: with no schedulable node, new pods stay Pending and never get Ready. */
export async function setSchedulable(client: Client, schedulable: boolean): Promise<void> {
  const nodes = await client.list<Node>(Nodes);
  for (const node of nodes.items) {
    await client.patch(
      Nodes,
      { name: node.metadata.name ?? '' },
      { type: 'merge', body: { spec: { unschedulable: schedulable ? null : true } } },
    );
  }
}

/** Events about an object (events.k8s.io), oldest first. */
export async function eventsFor(client: Client, namespace: string, name: string): Promise<Event[]> {
  const list = await client.list(Events, { namespace });
  return list.items
    .filter((e) => e.regarding?.name === name && e.regarding?.kind === 'Database')
    .sort((a, b) => (a.eventTime ?? '').localeCompare(b.eventTime ?? ''));
}

/** Records every version of the Databases in `namespace` from a watch, until stop(). */
export function recordDatabases(client: Client, namespace: string): { seen: Database[]; stop(): void } {
  const ac = new AbortController();
  const seen: Database[] = [];
  void (async () => {
    while (!ac.signal.aborted) {
      try {
        for await (const ev of client.watch(Databases.resource, {
          namespace,
          signal: ac.signal,
          timeoutSeconds: 300,
        })) {
          if (ev.type !== 'BOOKMARK') seen.push(ev.object);
        }
      } catch {
        if (!ac.signal.aborted) await sleep(100);
      }
    }
  })();
  return { seen, stop: () => ac.abort() };
}
