/**
 * The failover decisions (failover/decide.ts, pure): when the primary counts as lost, which replica is
 * promoted, the quorum of synchronous mode, switchovers; and the parsers of what the instances answer.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Node, Pod } from '@opkit/runtime';
import type { Database } from '../../src/api/v1/database.ts';
import { databasePredicate, nodePredicate } from '../../src/controllers/database/controller.ts';
import { parseInstanceState, synchronousStandbyNames } from '../../src/controllers/database/engines/index.ts';
import {
  type CandidateState,
  chooseCandidate,
  decideFailover,
  type FailoverInput,
  parseLsn,
} from '../../src/controllers/database/failover/decide.ts';

const NOW = Date.parse('2026-12-04T12:00:00Z');
const ago = (s: number) => new Date(NOW - s * 1000).toISOString();

export interface PodOpts {
  ready?: boolean;
  readySince?: number;
  running?: boolean;
  crashLooping?: boolean;
  node?: string;
  deleting?: boolean;
}

/** A pod of `orders` as the kubelet reports it. */
export function fakePod(name: string, o: PodOpts = {}): Pod {
  const ready = o.ready ?? true;
  const running = o.running ?? true;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: 'shop',
      creationTimestamp: ago(3600),
      ...(o.deleting ? { deletionTimestamp: ago(1) } : {}),
    },
    spec: { containers: [], nodeName: o.node ?? 'n1' },
    status: {
      phase: 'Running',
      conditions: [
        {
          type: 'Ready',
          status: ready ? 'True' : 'False',
          lastTransitionTime: ago(o.readySince ?? 600) as unknown as Date,
        },
      ],
      containerStatuses: [
        {
          name: 'postgres',
          image: 'postgres:16',
          imageID: '',
          ready,
          restartCount: 0,
          state: o.crashLooping
            ? { waiting: { reason: 'CrashLoopBackOff' } }
            : running
              ? { running: {} }
              : { waiting: { reason: 'ContainerCreating' } },
        },
      ],
    },
  } as Pod;
}

function node(name: string, ready: boolean, since = 600, unschedulable = false): Node {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name },
    spec: unschedulable ? { unschedulable: true } : {},
    status: {
      conditions: [
        {
          type: 'Ready',
          status: ready ? 'True' : 'False',
          lastTransitionTime: ago(since) as unknown as Date,
        },
      ],
    },
  } as Node;
}

function input(pods: Pod[], extra: Partial<FailoverInput> = {}): FailoverInput {
  return {
    statefulSet: 'orders',
    primary: 'orders-0',
    replicas: 3,
    pods,
    nodes: new Map(),
    now: NOW,
    delayMs: 10_000,
    ...extra,
  };
}

describe('decideFailover: when the primary is lost', () => {
  const replicas = [fakePod('orders-1', { ready: false }), fakePod('orders-2', { ready: false })];

  test('a Ready primary: nothing to do', () => {
    assert.deepEqual(decideFailover(input([fakePod('orders-0'), ...replicas])), { kind: 'none' });
  });

  test('the primary pod missing or being deleted: at once, whatever the delay', () => {
    for (const pods of [replicas, [fakePod('orders-0', { deleting: true }), ...replicas]]) {
      const d = decideFailover(input(pods, { delayMs: 3_600_000 }));
      assert.equal(d.kind, 'start');
      assert.equal(d.kind === 'start' && d.reason, 'PrimaryPodMissing');
      assert.equal(d.kind === 'start' && d.from, 'orders-0');
    }
  });

  test('not Ready: waits out failoverDelay from the Ready transition, then starts', () => {
    const waiting = decideFailover(
      input([fakePod('orders-0', { ready: false, readySince: 4 }), ...replicas]),
    );
    assert.equal(waiting.kind, 'wait');
    assert.equal(waiting.kind === 'wait' && waiting.afterMs, 6_000);
    assert.match(
      waiting.kind === 'wait' ? waiting.message : '',
      /not Ready; failing over after failoverDelay \(10s\)/,
    );
    const late = decideFailover(input([fakePod('orders-0', { ready: false, readySince: 11 }), ...replicas]));
    assert.equal(late.kind === 'start' && late.reason, 'PrimaryNotReady');
    const zero = decideFailover(
      input([fakePod('orders-0', { ready: false, readySince: 0 }), ...replicas], { delayMs: 0 }),
    );
    assert.equal(zero.kind, 'start', 'failoverDelay 0: at once');
  });

  test('crash-looping and node NotReady are named', () => {
    const crash = decideFailover(
      input([fakePod('orders-0', { ready: false, readySince: 30, crashLooping: true }), ...replicas]),
    );
    assert.equal(crash.kind === 'start' && crash.reason, 'PrimaryCrashLooping');
    const pods = [fakePod('orders-0', { node: 'dead' }), ...replicas];
    const early = decideFailover(input(pods, { nodes: new Map([['dead', node('dead', false, 3)]]) }));
    assert.equal(early.kind, 'wait');
    const lost = decideFailover(input(pods, { nodes: new Map([['dead', node('dead', false, 40)]]) }));
    assert.equal(lost.kind === 'start' && lost.reason, 'PrimaryNodeNotReady');
  });

  test('blocked without a replica that can take over: not running, being deleted, on a NotReady node, beyond spec.replicas', () => {
    const pods = [
      fakePod('orders-1', { running: false }),
      fakePod('orders-2', { deleting: true }),
      fakePod('orders-3', { node: 'dead' }),
      fakePod('orders-4'),
    ];
    const d = decideFailover(input(pods, { replicas: 4, nodes: new Map([['dead', node('dead', false)]]) }));
    assert.equal(d.kind, 'blocked');
    assert.match(d.kind === 'blocked' ? d.message : '', /no replica can take over/);
  });
});

describe('decideFailover: switchovers', () => {
  const pods = [
    fakePod('orders-0'),
    fakePod('orders-1', { node: 'n2' }),
    fakePod('orders-2', { ready: false }),
  ];

  test('to a Ready replica: started, naming the target', () => {
    const d = decideFailover(input(pods, { switchoverTo: 'orders-1' }));
    assert.deepEqual(d.kind === 'start' && [d.reason, d.from, d.to, d.switchover], [
      'Switchover',
      'orders-0',
      'orders-1',
      true,
    ]);
  });

  test('refused: itself, no such instance; waiting: a target that is not Ready', () => {
    assert.equal(decideFailover(input(pods, { switchoverTo: 'orders-0' })).kind, 'refuse');
    const none = decideFailover(input(pods, { switchoverTo: 'orders-7' }));
    assert.match(none.kind === 'refuse' ? none.message : '', /no such instance/);
    assert.equal(decideFailover(input(pods, { switchoverTo: 'orders-2' })).kind, 'blocked');
  });

  test("the primary's node cordoned: a switchover to a Ready replica on another node", () => {
    const d = decideFailover(input(pods, { nodes: new Map([['n1', node('n1', true, 600, true)]]) }));
    assert.equal(d.kind === 'start' && d.reason, 'PrimaryNodeCordoned');
    assert.equal(d.kind === 'start' && d.to, 'orders-1');
  });
});

function state(
  pod: string,
  received: string,
  replayed = received,
  extra: Partial<CandidateState> = {},
): CandidateState {
  return {
    pod,
    ordinal: Number(pod.split('-').at(-1)),
    inRecovery: true,
    receivedLsn: parseLsn(received),
    replayedLsn: parseLsn(replayed),
    timeline: 1,
    systemIdentifier: '7312',
    ...extra,
  };
}

describe('chooseCandidate', () => {
  const async = { replicas: 3, synchronousReplicas: 0, systemIdentifier: '7312' };

  test('the most advanced by received or replayed WAL; ties by ordinal', () => {
    assert.deepEqual(
      chooseCandidate([state('orders-1', '0/3000000'), state('orders-2', '0/3000100')], async),
      { ok: true, pod: 'orders-2', lsn: 0x3000100n },
    );
    const tie = chooseCandidate([state('orders-2', '1/0'), state('orders-1', '0/FFFFFFFF', '1/0')], async);
    assert.equal(tie.ok && tie.pod, 'orders-1');
  });

  test('one already promoted (a resumed procedure) wins; another cluster is never promoted', () => {
    const r = chooseCandidate(
      [state('orders-1', '0/9000000'), state('orders-2', '0/1000000', '0/1000000', { inRecovery: false })],
      async,
    );
    assert.equal(r.ok && r.pod, 'orders-2');
    const foreign = chooseCandidate(
      [state('orders-1', '0/9000000', '0/9000000', { systemIdentifier: '99' })],
      async,
    );
    assert.deepEqual(foreign, { ok: false, message: 'no replica answered' });
  });

  test('synchronous mode: enough replicas must answer to prove no acknowledged write is lost', () => {
    const sync1 = { replicas: 3, synchronousReplicas: 1, systemIdentifier: '7312' };
    const one = chooseCandidate([state('orders-1', '0/3000000')], sync1);
    assert.equal(one.ok, false);
    assert.match(one.ok ? '' : one.message, /ANY 1 of 2 replicas\): 1 replica\(s\) answered, 2 needed/);
    assert.equal(chooseCandidate([state('orders-1', '0/1'), state('orders-2', '0/2')], sync1).ok, true);
    // ANY 2 of 2: each commit is on both, so one answer is enough.
    const sync2 = { ...sync1, synchronousReplicas: 2 };
    assert.equal(chooseCandidate([state('orders-1', '0/3000000')], sync2).ok, true);
  });

  test("a switchover's target when it is as advanced as the best; otherwise the best, with a note", () => {
    const same = chooseCandidate([state('orders-1', '0/5'), state('orders-2', '0/5')], {
      ...async,
      target: 'orders-2',
    });
    assert.equal(same.ok && same.pod, 'orders-2');
    const behind = chooseCandidate([state('orders-1', '0/6'), state('orders-2', '0/5')], {
      ...async,
      target: 'orders-2',
    });
    assert.equal(behind.ok && behind.pod, 'orders-1');
    assert.match((behind.ok && behind.note) || '', /orders-2 is behind orders-1/);
  });
});

describe('what the instances answer', () => {
  test('LSNs', () => {
    assert.equal(parseLsn('16/B374D848'), (0x16n << 32n) + 0xb374d848n);
    assert.equal(parseLsn(''), undefined);
    assert.equal(parseLsn('x/1'), undefined);
  });

  test('the state line', () => {
    assert.deepEqual(
      parseInstanceState('t|0/3000060|0/3000000|2|7312|orders-0.orders-headless\n'),
      undefined,
    );
    assert.deepEqual(parseInstanceState('t|0/3000060|0/3000000|2|7312||orders-0.orders-headless\n'), {
      inRecovery: true,
      receivedLsn: 0x3000060n,
      replayedLsn: 0x3000000n,
      timeline: 2,
      systemIdentifier: '7312',
      currentLsn: undefined,
      streamingFrom: 'orders-0.orders-headless',
    });
    const primary = parseInstanceState('f|||3|7312|0/5000000|');
    assert.equal(primary?.inRecovery, false);
    assert.equal(primary?.currentLsn, 0x5000000n);
    assert.equal(primary?.streamingFrom, undefined);
  });

  test('synchronous_standby_names: ANY n of every possible instance (a scale does not change it)', () => {
    assert.equal(synchronousStandbyNames('orders', 0), '');
    assert.equal(
      synchronousStandbyNames('orders', 1),
      'ANY 1 ("orders-0", "orders-1", "orders-2", "orders-3", "orders-4")',
    );
  });
});

describe('what wakes the controller for a failover', () => {
  const db = (annotations?: Record<string, string>, generation = 1) =>
    ({
      apiVersion: 'myapp.example.com/v1',
      kind: 'Database',
      metadata: { name: 'orders', namespace: 'shop', generation, ...(annotations ? { annotations } : {}) },
      spec: { engine: 'postgres', version: '16', storage: '1Gi' },
    }) as Database;

  test('the switchover-to annotation set or removed (metadata: no new generation); not other annotations', () => {
    const p = databasePredicate();
    const update = (o: Database, n: Database) => p.update?.(o, n) ?? true;
    assert.equal(update(db(), db({ 'myapp.example.com/switchover-to': 'orders-1' })), true);
    assert.equal(update(db({ 'myapp.example.com/switchover-to': 'orders-1' }), db()), true);
    assert.equal(update(db(), db({ team: 'a' })), false);
  });

  test('a node cordoned or turning NotReady; not a heartbeat', () => {
    const p = nodePredicate();
    const n = (unschedulable: boolean, ready: string, beat = '1') =>
      ({
        metadata: { name: 'n1', resourceVersion: beat },
        spec: unschedulable ? { unschedulable: true } : {},
        status: { conditions: [{ type: 'Ready', status: ready }] },
      }) as Node;
    const update = (o: Node, x: Node) => p.update?.(o, x) ?? true;
    assert.equal(update(n(false, 'True'), n(true, 'True')), true);
    assert.equal(update(n(false, 'True'), n(false, 'Unknown')), true);
    assert.equal(update(n(false, 'True', '1'), n(false, 'True', '2')), false);
  });
});
