/**
 * Watches the Databases and their children and records the moment each Database converged: all its
 * expected children exist and status.observedGeneration == metadata.generation (and, in cluster mode,
 * status.phase == Running). Children are watched metadata-only (cheap); StatefulSets in full, for the
 * reaction-latency scenario (spec.replicas).
 */
import { CHILD_KINDS, type ChildKind, kindPath } from './kinds.ts';
import type { Kube, KubeObject } from './kube.ts';

export interface ObserverOptions {
  namespace: string;
  /** "Kind/name" of every child a Database must have. */
  expected: (db: KubeObject) => string[];
  requirePhase?: string;
  /**
   * List and watch again (every second, at most 300 times in a row) when a list or watch fails, instead
   * of failing: for runs that restart the API server.
   */
  retryWatches?: boolean;
}

type Db = KubeObject & {
  spec?: { replicas?: number };
  status?: { observedGeneration?: number; phase?: string };
};
type Sts = KubeObject & { spec?: { replicas?: number } };

export class Observer {
  private readonly kube: Kube;
  private readonly opts: ObserverOptions;
  private readonly abort = new AbortController();
  private readonly watches: Promise<void>[] = [];
  readonly dbs = new Map<string, Db>();
  readonly children = new Set<string>();
  readonly stsReplicas = new Map<string, number>();
  /** db name -> time (performance.now()) it was first seen converged */
  readonly convergedAt = new Map<string, number>();
  private expectedByDb = new Map<string, string[]>();
  private waiters: Array<() => void> = [];
  private failure: Error | undefined;

  constructor(kube: Kube, opts: ObserverOptions) {
    this.kube = kube;
    this.opts = opts;
  }

  async start(): Promise<void> {
    const ns = this.opts.namespace;
    const kinds: Array<ChildKind | 'Database'> = ['Database', ...CHILD_KINDS];
    await Promise.all(
      kinds.map(async (kind) => {
        const path = kindPath(kind, ns);
        const full = kind === 'Database' || kind === 'StatefulSet';
        let failures = 0;
        const retry = (err: Error): Promise<void> | undefined => {
          if (this.abort.signal.aborted) return undefined;
          if (!this.opts.retryWatches || ++failures > 300) {
            this.fail(err);
            return undefined;
          }
          return new Promise((r) => setTimeout(r, 1000)).then(() => listAndWatch().catch(retry));
        };
        const listAndWatch = async (): Promise<void> => {
          const list = await this.kube.json<{ items: KubeObject[]; metadata: { resourceVersion: string } }>(
            'GET',
            path,
          );
          failures = 0;
          for (const o of list.items) this.onEvent(kind, 'ADDED', o);
          const w = this.kube
            .watch(path, list.metadata.resourceVersion, (type, o) => this.onEvent(kind, type, o), {
              signal: this.abort.signal,
              metadataOnly: !full,
            })
            .then(
              // A watch the API server ended (timeout, overload): list and watch again.
              () => (this.abort.signal.aborted ? undefined : listAndWatch().catch(retry)),
              retry,
            );
          this.watches.push(w);
        };
        await listAndWatch();
      }),
    );
  }

  private fail(err: Error) {
    this.failure = err;
    this.notify();
  }

  private notify() {
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) w();
  }

  private onEvent(kind: ChildKind | 'Database', type: string, o: KubeObject) {
    if (type === 'BOOKMARK' || type === 'ERROR') return;
    const name = o.metadata.name;
    if (kind === 'Database') {
      if (type === 'DELETED') this.dbs.delete(name);
      else {
        this.dbs.set(name, o as Db);
        if (!this.expectedByDb.has(name)) this.expectedByDb.set(name, this.opts.expected(o));
      }
      this.check(name);
    } else {
      const key = `${kind}/${name}`;
      if (type === 'DELETED') this.children.delete(key);
      else this.children.add(key);
      if (kind === 'StatefulSet') {
        if (type === 'DELETED') this.stsReplicas.delete(name);
        else this.stsReplicas.set(name, (o as Sts).spec?.replicas ?? 1);
      }
      const owner = o.metadata.ownerReferences?.find((r) => r.controller)?.name;
      if (owner) this.check(owner);
    }
    this.notify();
  }

  isConverged(name: string): boolean {
    const db = this.dbs.get(name);
    if (!db) return false;
    const st = db.status;
    if (!st || st.observedGeneration !== db.metadata.generation) return false;
    if (this.opts.requirePhase && st.phase !== this.opts.requirePhase) return false;
    const expected = this.expectedByDb.get(name) ?? [];
    return expected.every((k) => this.children.has(k));
  }

  private check(name: string) {
    if (this.convergedAt.has(name)) return;
    if (this.isConverged(name)) this.convergedAt.set(name, performance.now());
  }

  /** Re-evaluates a Database (e.g. after its spec changed, to measure convergence again). */
  reset(name: string) {
    this.convergedAt.delete(name);
    this.expectedByDb.delete(name);
    const db = this.dbs.get(name);
    if (db) this.expectedByDb.set(name, this.opts.expected(db));
    this.check(name);
  }

  /** Waits until pred() holds, re-checking on every event; throws on timeout or a broken watch. */
  async waitFor(what: string, pred: () => boolean, timeoutMs: number): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    while (!pred()) {
      if (this.failure) throw this.failure;
      const left = deadline - performance.now();
      if (left <= 0) throw new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 1000));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return performance.now();
  }

  /** Waits until every named Database converged; returns the time the last one did. */
  async waitConverged(names: string[], timeoutMs: number): Promise<number> {
    // Re-checked on every wake-up (every event, and every second), not only on the events of a Database or
    // its children: a loaded run once left 3 of 1000 Databases unrecorded with everything they need seen.
    let pending = names;
    await this.waitFor(
      `${names.length} Databases to converge`,
      () => {
        for (const n of pending) this.check(n);
        pending = pending.filter((n) => !this.convergedAt.has(n));
        return pending.length === 0;
      },
      timeoutMs,
    ).catch((err: Error) => {
      const missing = names.filter((n) => !this.convergedAt.has(n));
      const sample = missing[0];
      const db = sample ? this.dbs.get(sample) : undefined;
      const exp = sample ? (this.expectedByDb.get(sample) ?? []) : [];
      throw new Error(
        `${err.message}: ${missing.length} not converged, e.g. ${sample}: ` +
          `generation ${db?.metadata.generation} observed ${db?.status?.observedGeneration} ` +
          `phase ${db?.status?.phase}, missing children [${exp.filter((k) => !this.children.has(k)).join(', ')}]`,
      );
    });
    return Math.max(...names.map((n) => this.convergedAt.get(n)!));
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await Promise.allSettled(this.watches);
  }
}
