/**
 * Test candidates for the leader election unit tests: LeaderElectors on LeaseLocks over a FakeClient,
 * driven by one FakeClock, each with a client that can be partitioned or slowed down.
 */
import assert from 'node:assert/strict';
import type { Client } from '../../src/client/types.ts';
import {
  LeaderElector,
  type LeaderElectorOptions,
  LeaseLock,
  type LeaseObject,
  LeaseResource,
} from '../../src/leaderelection/index.ts';
import { FakeClient, internalError } from '../../src/testing/index.ts';
import { FakeClock, sleep } from '../../src/util/clock.ts';

export const T0 = Date.parse('2025-01-01T00:00:00Z');
export const NS = 'kube-system';
export const LEASE = 'my-operator';

export interface Env {
  clock: FakeClock;
  fake: FakeClient;
}

export function env(): Env {
  const clock = new FakeClock(T0);
  const fake = new FakeClient({ now: () => new Date(clock.now()) });
  return { clock, fake };
}

/**
 * A client whose requests fail while `failing` is set (a network partition for one candidate), and
 * are answered `delay` ms (on `clock`) after they were sent.
 */
function partitionable(
  inner: Client,
  clock: FakeClock,
): { client: Client; setFailing(on: boolean): void; setDelay(ms: number): void } {
  let failing = false;
  let delay = 0;
  const guard = async (): Promise<void> => {
    if (failing) throw internalError('connection refused (simulated partition)');
    if (delay > 0) await sleep(delay, undefined, clock);
  };
  const client: Client = {
    fieldManager: inner.fieldManager,
    get: (res, key, opts) => guard().then(() => inner.get(res, key, opts)),
    list: (res, opts) => guard().then(() => inner.list(res, opts)),
    create: (res, obj, opts) => guard().then(() => inner.create(res, obj, opts)),
    update: (res, obj, opts) => guard().then(() => inner.update(res, obj, opts)),
    patch: (res, key, patch, opts) => guard().then(() => inner.patch(res, key, patch, opts)),
    delete: (res, key, opts) => guard().then(() => inner.delete(res, key, opts)),
    updateStatus: (res, obj, opts) => guard().then(() => inner.updateStatus(res, obj, opts)),
    patchStatus: (res, key, patch, opts) => guard().then(() => inner.patchStatus(res, key, patch, opts)),
    watch: (res, opts) => inner.watch(res, opts),
  };
  return {
    client,
    setFailing: (on) => {
      failing = on;
    },
    setDelay: (ms) => {
      delay = ms;
    },
  };
}

export interface Candidate {
  id: string;
  elector: LeaderElector;
  ctl: AbortController;
  run: Promise<'cancelled' | 'lost'>;
  started: number[];
  stopped: number[];
  newLeaders: string[];
  status: boolean[];
  leadingSignal: AbortSignal | undefined;
  setFailing(on: boolean): void;
  setDelay(ms: number): void;
}

export function candidate(e: Env, id: string, opts: Partial<LeaderElectorOptions> = {}): Candidate {
  const { client, setFailing, setDelay } = partitionable(e.fake, e.clock);
  const c: Partial<Candidate> & {
    started: number[];
    stopped: number[];
    newLeaders: string[];
    status: boolean[];
  } = { id, started: [], stopped: [], newLeaders: [], status: [], setFailing, setDelay };
  c.elector = new LeaderElector({
    lock: new LeaseLock({ client, namespace: NS, name: LEASE, identity: id }),
    clock: e.clock,
    onStartedLeading: (signal) => {
      c.started.push(e.clock.now());
      c.leadingSignal = signal;
    },
    onStoppedLeading: () => void c.stopped.push(e.clock.now()),
    onNewLeader: (leader) => void c.newLeaders.push(leader),
    onLeaderStatus: (_name, leading) => void c.status.push(leading),
    ...opts,
  });
  c.ctl = new AbortController();
  c.run = c.elector.run(c.ctl.signal);
  return c as Candidate;
}

export function lease(e: Env): LeaseObject {
  const found = e.fake.getStored(LeaseResource, { namespace: NS, name: LEASE });
  assert.ok(found, 'the lease exists');
  return found;
}

/** Advances in small steps until `cond` holds; returns the clock time then. */
export async function advanceUntil(
  e: Env,
  cond: () => boolean,
  maxMs: number,
  stepMs = 100,
): Promise<number> {
  for (let waited = 0; waited <= maxMs; waited += stepMs) {
    if (cond()) return e.clock.now();
    await e.clock.advanceAsync(stepMs);
  }
  assert.fail(`condition not met within ${maxMs} ms`);
}
