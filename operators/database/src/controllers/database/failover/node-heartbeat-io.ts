/**
 * The nodes' heartbeats, the operator's I/O (the decisions are in node-heartbeat.ts): the controller
 * watches the Leases of kube-node-lease (one informer, that namespace only), and each event updates what
 * the operator remembers of that node's Lease, timed by its own monotonic clock. No request of its own.
 *
 * A renewal enqueues nothing: every kubelet renews every 10 s, and waking the Databases on each would
 * reconcile all of them all the time. Instead a renewal (re)arms one timer per node at the end of its
 * grace; only when it fires and the node is silent are the Databases with a pod on it woken (their
 * reconcile decides: the primary lost, a replica not promotable). A node Lease never seen renewed arms no
 * timer, so Databases on nodes that never renew are never woken by it. During a blackout (no node Lease
 * changed lately: the watch may be what is silent) the timer looks again a renew interval later, without
 * waking anyone.
 */
import type { EventHandler, EventObject, Lease, RequestSink } from '@opkit/runtime';
import {
  afterChange,
  graceMs,
  type HeartbeatWatch,
  type NodeHeartbeat,
  nodeSilence,
  observeNodeLease,
  silentNodes,
} from './node-heartbeat.ts';

/** After the grace, so that the reconcile it wakes finds the node silent. */
const TIMER_SLACK_MS = 250;

/** What the failover reads: the silent nodes among these, now (failover/procedure.ts). */
export interface NodeHeartbeatView {
  silent(nodes: Iterable<string | undefined>): ReadonlyMap<string, number>;
}

/** Wakes the Databases with a pod on `node` (controller.ts: from the cache of managed pods). */
export type WakeNode = (node: string, sink: RequestSink) => void;

/** setTimeout and clearTimeout (tests pass their own). */
export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const realTimers: Timers = {
  set: (fn, ms) => {
    const t = setTimeout(fn, ms);
    // Never what keeps the process alive.
    t.unref();
    return t;
  },
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** The operator's memory of the node Leases (one per process: an operator restart starts empty). */
export class NodeHeartbeats implements NodeHeartbeatView {
  readonly beats = new Map<string, NodeHeartbeat>();
  /** When any node Lease last changed, and when changes came again after a blackout. */
  watch: HeartbeatWatch | undefined;
  readonly monotonic: () => number;
  readonly #timers: Timers;
  readonly #armed = new Map<string, unknown>();

  constructor(monotonic: () => number = () => performance.now(), timers: Timers = realTimers) {
    this.monotonic = monotonic;
    this.#timers = timers;
  }

  silent(nodes: Iterable<string | undefined>): ReadonlyMap<string, number> {
    return silentNodes(this.beats, this.watch, nodes, this.monotonic());
  }

  /** The event handler of the watch: memory and timers only, never a request in the sink on an event. */
  handler(wake: WakeNode): EventHandler<Lease> {
    const seen = (obj: EventObject<Lease>, sink: RequestSink): void => this.#observe(obj, sink, wake);
    return {
      create: seen,
      update: (_old, obj, sink) => seen(obj, sink),
      delete: (obj) => this.#forget(obj.metadata.name ?? ''),
      generic: seen,
    };
  }

  #observe(obj: EventObject<Lease>, sink: RequestSink, wake: WakeNode): void {
    const node = obj.metadata.name ?? '';
    const prev = this.beats.get(node);
    // Read only (the informer's objects are frozen).
    const now = this.monotonic();
    const next = observeNodeLease(prev, obj as Lease, now);
    if (!next) return;
    this.beats.set(node, next);
    // A renewal (not the first look, not a relist's same version): the grace starts again.
    if (prev && prev.resourceVersion !== next.resourceVersion) {
      this.watch = afterChange(this.watch, now, next.renewMs);
      this.#arm(node, graceMs(next), sink, wake);
    }
  }

  #forget(node: string): void {
    this.beats.delete(node);
    this.#disarm(node);
  }

  #disarm(node: string): void {
    const t = this.#armed.get(node);
    if (t !== undefined) this.#timers.clear(t);
    this.#armed.delete(node);
  }

  #arm(node: string, afterMs: number, sink: RequestSink, wake: WakeNode): void {
    this.#disarm(node);
    this.#armed.set(
      node,
      this.#timers.set(() => {
        this.#armed.delete(node);
        const s = nodeSilence(this.beats, this.watch, node, this.monotonic());
        if (s.kind === 'silent') wake(node, sink);
        else if (s.kind === 'beating') this.#arm(node, s.silentInMs, sink, wake);
        else {
          // Unknown during a blackout: look again (no request) until it renews or is gone.
          const beat = this.beats.get(node);
          if (beat?.changed) this.#arm(node, beat.renewMs, sink, wake);
        }
      }, afterMs + TIMER_SLACK_MS),
    );
  }

  /** Stops every timer (tests; the timers never keep the process alive anyway). */
  stop(): void {
    for (const node of [...this.#armed.keys()]) this.#disarm(node);
  }
}
