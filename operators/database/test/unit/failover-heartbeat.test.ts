/**
 * The nodes' heartbeats (failover/node-heartbeat.ts, pure) and what they decide (failover/decide.ts): a
 * primary whose node's kubelet stopped renewing the node Lease is lost after max(failoverDelay, 2 renew
 * intervals) by the operator's own clock, never on a Lease it never saw renewed, never when its watch may
 * be what is silent; a replica on such a node is not promoted.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Lease, Node, Pod } from '@opkit/runtime';
import {
  candidatePods,
  decideFailover,
  FAILOVER_REASONS,
  type FailoverInput,
} from '../../src/controllers/database/failover/decide.ts';
import {
  afterChange,
  type HeartbeatWatch,
  type NodeHeartbeat,
  nodeSilence,
  observeNodeLease,
  renewIntervalMs,
  silentNodes,
} from '../../src/controllers/database/failover/node-heartbeat.ts';

function nodeLease(node: string, rv: string, durationSeconds: number | undefined = 40): Lease {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: node, namespace: 'kube-node-lease', resourceVersion: rv },
    spec: {
      holderIdentity: node,
      ...(durationSeconds !== undefined ? { leaseDurationSeconds: durationSeconds } : {}),
      // The kubelet's clock: never read by the operator.
      renewTime: '2020-01-01T00:00:00.000000Z' as unknown as Date,
    },
  } as Lease;
}

interface Memory {
  beats: Map<string, NodeHeartbeat>;
  watch: HeartbeatWatch | undefined;
}

/** The operator's memory after seeing these versions of each node's Lease at these times (its clock). */
function seen(events: ReadonlyArray<[node: string, rv: string, at: number]>): Memory {
  const mem: Memory = { beats: new Map(), watch: undefined };
  for (const [node, rv, at] of events) {
    const prev = mem.beats.get(node);
    const next = observeNodeLease(prev, nodeLease(node, rv), at);
    if (!next) continue;
    mem.beats.set(node, next);
    if (prev && prev.resourceVersion !== next.resourceVersion) {
      mem.watch = afterChange(mem.watch, at, next.renewMs);
    }
  }
  return mem;
}

const silence = (mem: Memory, node: string, now: number) => nodeSilence(mem.beats, mem.watch, node, now);

/** Two nodes renewing every 10 s from t=0 to `until` (the operator's clock), `dead` stopping at `diesAt`. */
function renewals(until: number, dead = 'n1', diesAt = Number.POSITIVE_INFINITY) {
  const events: Array<[string, string, number]> = [];
  for (let t = 0; t <= until; t += 10_000) {
    if (t < diesAt) events.push([dead, `d${t}`, t]);
    events.push(['n2', `l${t}`, t + 3_000]);
  }
  return events.filter(([, , at]) => at <= until);
}

describe('node heartbeats: observations by the operator’s own clock', () => {
  test('the first look is no change; a new resourceVersion is one (the time reset), the same one keeps it', () => {
    const first = observeNodeLease(undefined, nodeLease('n1', '10'), 1_000);
    assert.deepEqual(first, { resourceVersion: '10', since: 1_000, changed: false, renewMs: 10_000 });
    assert.deepEqual(observeNodeLease(first, nodeLease('n1', '10'), 5_000), first);
    const renewed = observeNodeLease(first, nodeLease('n1', '11'), 11_000);
    assert.deepEqual(renewed, { resourceVersion: '11', since: 11_000, changed: true, renewMs: 10_000 });
    // Once changed, it stays a heartbeat the operator has seen beat.
    assert.equal(observeNodeLease(renewed, nodeLease('n1', '11'), 30_000)?.changed, true);
    assert.equal(observeNodeLease(renewed, undefined, 30_000), undefined);
  });

  test("the renew interval is the kubelet's: leaseDurationSeconds / 4, 10 s without one", () => {
    assert.equal(renewIntervalMs(nodeLease('n1', '1', 40)), 10_000);
    assert.equal(renewIntervalMs(nodeLease('n1', '1', 60)), 15_000);
    assert.equal(renewIntervalMs(nodeLease('n1', '1', undefined)), 10_000);
    assert.equal(renewIntervalMs(undefined), 10_000);
  });
});

describe('nodeSilence: has a kubelet stopped renewing its node Lease?', () => {
  test('silent once unchanged for 2 renew intervals (20 s) while another node renews; beating before', () => {
    // n1's last renewal seen at 30 s; n2 renews on.
    const mem = seen(renewals(60_000, 'n1', 35_000));
    assert.deepEqual(silence(mem, 'n1', 49_999), { kind: 'beating', silentInMs: 1 });
    assert.deepEqual(silence(mem, 'n1', 50_000), { kind: 'silent', silentMs: 20_000 });
    assert.deepEqual(silence(mem, 'n1', 58_000), { kind: 'silent', silentMs: 28_000 });
    assert.equal(silence(mem, 'n2', 58_000).kind, 'beating');
    assert.deepEqual(
      [...silentNodes(mem.beats, mem.watch, ['n1', 'n2', undefined, 'n1'], 58_000)],
      [['n1', 28_000]],
    );
  });

  test('a node Lease never seen renewed says nothing, however long (kwok nodes that do not renew)', () => {
    const mem = seen([['n1', '5', 0], ...renewals(600_000).filter(([n]) => n === 'n2')]);
    assert.deepEqual(silence(mem, 'n1', 600_000), { kind: 'unknown' });
    assert.deepEqual(silence(mem, 'unknown-node', 600_000), { kind: 'unknown' });
  });

  test('after an operator restart: nothing until a renewal is seen, then the full grace from it', () => {
    // A new process first sees both Leases at 500 s (its clock); n1's kubelet is already dead.
    const dead = seen([
      ['n1', '7', 500_000],
      ['n2', '8', 500_000],
      ['n2', '9', 510_000],
      ['n2', '10', 520_000],
    ]);
    assert.deepEqual(silence(dead, 'n1', 525_000), { kind: 'unknown' }, 'the NotReady rule decides');
    // n1 alive: its first renewal seen at 507 s starts the count.
    const alive = seen([
      ['n1', '7', 500_000],
      ['n2', '8', 500_000],
      ['n1', '11', 507_000],
      ['n2', '12', 510_000],
      ['n2', '13', 520_000],
    ]);
    assert.equal(silence(alive, 'n1', 520_000).kind, 'beating', '20 s after the restart: not yet');
    assert.deepEqual(silence(alive, 'n1', 527_000), { kind: 'silent', silentMs: 20_000 });
  });

  test('no node Lease changed for 1.5 renew intervals (a broken watch, an API server outage, a lone node): nothing', () => {
    const mem = seen(renewals(30_000));
    // Everything stopped after 30 s (the last change): by 46 s no Lease changed for 16 s.
    assert.equal(silence(mem, 'n1', 45_000).kind, 'beating');
    assert.deepEqual(silence(mem, 'n1', 46_000), { kind: 'unknown' });
    assert.deepEqual(silence(mem, 'n2', 600_000), { kind: 'unknown' });
    const lone = seen([
      ['n1', '1', 0],
      ['n1', '2', 10_000],
    ]);
    assert.equal(silence(lone, 'n1', 25_000).kind, 'beating');
    assert.deepEqual(silence(lone, 'n1', 26_000), { kind: 'unknown' });
    assert.deepEqual(silence(lone, 'n1', 60_000), { kind: 'unknown' });
  });

  test('after a blackout (an API server outage) silences count from its end: the kubelets renew late, at their pace', () => {
    // Both renew until 30 s; nothing changes from 31 s to 51 s; n2 renews first after it, at 52 s.
    const outage: Array<[string, string, number]> = [
      ...renewals(30_000),
      ['n2', 'after-1', 52_000],
      ['n2', 'after-2', 62_000],
      ['n2', 'after-3', 72_000],
    ];
    const mem = seen(outage);
    // Without the blackout rule n1 would count 27 s of silence at 57 s.
    assert.deepEqual(silence(mem, 'n1', 57_000), { kind: 'beating', silentInMs: 15_000 });
    const back = seen([...outage.filter(([, , at]) => at <= 52_000), ['n1', 'after-n1', 58_000]]);
    assert.equal(silence(back, 'n1', 60_000).kind, 'beating');
    // n1 never renews after it: silent 20 s after the blackout's end.
    assert.equal(silence(mem, 'n1', 71_999).kind, 'beating');
    assert.deepEqual(silence(mem, 'n1', 72_000), { kind: 'silent', silentMs: 20_000 });
  });
});

function pod(name: string, node: string): Pod {
  return {
    metadata: { name, namespace: 'shop' },
    spec: { containers: [], nodeName: node },
    status: {
      conditions: [{ type: 'Ready', status: 'True' }],
      containerStatuses: [{ name: 'postgres', state: { running: {} } }],
    },
  } as unknown as Pod;
}

function notReady(name: string, sinceMs: number, now: number): Node {
  return {
    metadata: { name },
    status: {
      conditions: [{ type: 'Ready', status: 'Unknown', lastTransitionTime: new Date(now - sinceMs) }],
    },
  } as Node;
}

describe('decideFailover with a silent node', () => {
  // The primary orders-0 on n1 (its kubelet dies), orders-1 on n1 too, orders-2 on n2.
  const pods = [pod('orders-0', 'n1'), pod('orders-1', 'n1'), pod('orders-2', 'n2')];
  const input = (extra: Partial<FailoverInput>): FailoverInput => ({
    statefulSet: 'orders',
    primary: 'orders-0',
    replicas: 3,
    pods,
    nodes: new Map(),
    now: 1_000_000,
    delayMs: 10_000,
    leaseHeld: true,
    ...extra,
  });

  test("the primary's kubelet stale by the operator's clock: lost after max(failoverDelay, 20 s), orders-2 promotable", () => {
    const at = (now: number) => {
      const mem = seen(renewals(now, 'n1', 35_000));
      return decideFailover(input({ silentNodes: silentNodes(mem.beats, mem.watch, ['n1', 'n2'], now) }));
    };
    assert.deepEqual(at(49_000), { kind: 'none' }, '19 s after the last renewal seen');
    const d = at(50_000);
    assert.equal(d.kind, 'start');
    assert.equal(d.kind === 'start' && d.reason, FAILOVER_REASONS.nodeUnresponsive);
    assert.match(d.kind === 'start' ? d.message : '', /stopped renewing the node's Lease/);
    // failoverDelay 30 s: lost after 20 s, failing over after 30.
    const longer = decideFailover(input({ delayMs: 30_000, silentNodes: new Map([['n1', 21_000]]) }));
    assert.deepEqual(longer.kind === 'wait' && [longer.reason, longer.afterMs], [
      FAILOVER_REASONS.nodeUnresponsive,
      9_000,
    ]);
    assert.equal(
      decideFailover(input({ delayMs: 30_000, silentNodes: new Map([['n1', 30_000]]) })).kind,
      'start',
    );
  });

  test('a primary on a node whose Lease was never seen renewed: never lost, however long; nor after a restart that saw no renewal', () => {
    const never = seen([['n1', '5', 0], ...renewals(600_000).filter(([n]) => n === 'n2')]);
    const restarted = seen([
      ['n1', '7', 500_000],
      ['n2', '8', 500_000],
      ...renewals(600_000)
        .filter(([n, , at]) => n === 'n2' && at > 500_000)
        .map(([n, rv, at]): [string, string, number] => [n, `r${rv}`, at]),
    ]);
    for (const mem of [never, restarted]) {
      const silent = silentNodes(mem.beats, mem.watch, ['n1', 'n2'], 600_000);
      assert.deepEqual([...silent], []);
      assert.deepEqual(decideFailover(input({ silentNodes: silent })), { kind: 'none' });
    }
  });

  test('a replica on a silent node is not promoted; with none elsewhere, blocked', () => {
    const silent = new Map([['n1', 25_000]]);
    assert.deepEqual(
      candidatePods(input({ silentNodes: silent })).map((p) => p.metadata.name),
      ['orders-2'],
    );
    const lost = decideFailover(
      input({ pods: [pod('orders-1', 'n1'), pod('orders-2', 'n1')], silentNodes: silent }),
    );
    assert.equal(lost.kind, 'blocked', 'the primary pod missing, both replicas on the silent node');
    // Whatever the primary's sidecar does: a candidate's silence is about reaching it.
    assert.deepEqual(
      candidatePods(input({ leaseHeld: false, silentNodes: silent })).map((p) => p.metadata.name),
      ['orders-2'],
    );
  });

  test("without the primary's sidecar renewing its Lease (kwok pods, no sidecar), a silent node is no reason", () => {
    const d = decideFailover(input({ leaseHeld: false, silentNodes: new Map([['n1', 600_000]]) }));
    assert.deepEqual(d, { kind: 'none' });
  });

  test('a NotReady node keeps its own reason', () => {
    const d = decideFailover(
      input({
        silentNodes: new Map([['n1', 60_000]]),
        nodes: new Map([['n1', notReady('n1', 15_000, 1_000_000)]]),
      }),
    );
    assert.equal(d.kind === 'start' && d.reason, FAILOVER_REASONS.nodeNotReady);
  });
});
