/**
 * status.instances and its Events (instances.ts, pure): each instance spec.replicas asks for, why one is
 * not ready from its pod's status, what its last start did, and the Events from one status to the next.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Pod } from '@opkit/runtime';
import {
  describeNotReady,
  instanceEvents,
  instanceStatuses,
  notReadyReason,
} from '../../src/controllers/database/instances.ts';

const ready = (name: string): Pod => ({
  metadata: { name },
  status: {
    phase: 'Running',
    conditions: [{ type: 'Ready', status: 'True' }],
    initContainerStatuses: [
      {
        name: 'bootstrap',
        ready: true,
        restartCount: 0,
        image: 'i',
        imageID: '',
        state: { terminated: { exitCode: 0 } },
      },
    ],
    containerStatuses: [
      {
        name: 'postgres',
        ready: true,
        started: true,
        restartCount: 0,
        image: 'i',
        imageID: '',
        state: { running: {} },
      },
    ],
  },
});

describe('status.instances', () => {
  it('lists every instance spec.replicas asks for, a missing pod included, with its role', () => {
    const out = instanceStatuses('pg', 3, 'pg-0', [ready('pg-0'), ready('pg-1')], {
      'pg-1': { result: 'recloned', at: Date.parse('2026-01-01T00:00:00Z'), timeline: 1 },
    });
    assert.deepEqual(out, [
      { name: 'pg-0', role: 'primary', ready: true },
      {
        name: 'pg-1',
        role: 'replica',
        ready: true,
        result: 'recloned',
        resultAt: '2026-01-01T00:00:00.000Z',
        timeline: 1,
      },
      {
        name: 'pg-2',
        role: 'replica',
        ready: false,
        reason: 'PodMissing',
        message: 'the pod does not exist',
      },
    ]);
    assert.match(describeNotReady(out) ?? '', /^pg-2 not ready \(PodMissing: the pod does not exist\)$/);
    assert.equal(describeNotReady(out.slice(0, 2)), undefined);
  });

  it('says why a pod is not ready: unschedulable, bootstrapping, a refused start, starting, probe failing', () => {
    const unschedulable: Pod = {
      metadata: { name: 'pg-2' },
      status: {
        phase: 'Pending',
        conditions: [
          {
            type: 'PodScheduled',
            status: 'False',
            reason: 'Unschedulable',
            message: '0/2 nodes are available',
          },
        ],
      },
    };
    assert.deepEqual(notReadyReason(unschedulable), {
      reason: 'Unschedulable',
      message: 'pg-2 cannot be scheduled: 0/2 nodes are available',
    });
    const booting = structuredClone(ready('pg-2'));
    booting.status!.conditions = [];
    booting.status!.initContainerStatuses![0]!.state = { running: {} };
    assert.equal(notReadyReason(booting).reason, 'Bootstrapping');
    const refused = structuredClone(ready('pg-2'));
    refused.status!.initContainerStatuses![0]!.state = { waiting: { reason: 'CrashLoopBackOff' } };
    refused.status!.initContainerStatuses![0]!.lastState = {
      terminated: { exitCode: 1, message: 'result=foreign-data\nmessage=another cluster\n' },
    };
    assert.deepEqual(notReadyReason(refused), {
      reason: 'CrashLoopBackOff',
      message: 'pg-2: the bootstrap init container has not completed: another cluster',
    });
    const starting = structuredClone(ready('pg-2'));
    starting.status!.containerStatuses![0]!.started = false;
    assert.equal(notReadyReason(starting).reason, 'Starting');
    const probe = structuredClone(ready('pg-2'));
    probe.status!.conditions = [{ type: 'Ready', status: 'False' }];
    assert.equal(notReadyReason(probe).reason, 'ReadinessProbeFailing');
    assert.equal(
      notReadyReason({
        ...ready('pg-2'),
        metadata: { name: 'pg-2', deletionTimestamp: '2026-01-01T00:00:00Z' },
      }).reason,
      'Terminating',
    );
  });
});

describe('instance Events', () => {
  const up = instanceStatuses('pg', 2, 'pg-0', [ready('pg-0'), ready('pg-1')]);
  it('a ready instance that is not any more: a Warning naming it and why; ready again: Normal', () => {
    const down = instanceStatuses('pg', 2, 'pg-0', [ready('pg-0')]);
    assert.deepEqual(instanceEvents(up, down, 'pg-0'), [
      {
        type: 'Warning',
        reason: 'InstanceNotReady',
        note: 'pg-1 (replica) is not ready: PodMissing: the pod does not exist',
      },
    ]);
    assert.deepEqual(instanceEvents(down, up, 'pg-0'), [
      {
        type: 'Normal',
        reason: 'InstanceReady',
        note: 'pg-1 (replica) is ready: streaming from the primary pg-0',
      },
    ]);
    assert.deepEqual(instanceEvents(up, up, 'pg-0'), [], 'nothing changed, no Event');
  });

  it('one Event per start that did something to the data, not again for the same start', () => {
    const starts = { 'pg-1': { result: 'recloned', at: 1000, message: 'its slot had lost its WAL' } };
    const repaired = instanceStatuses('pg', 2, 'pg-0', [ready('pg-0'), ready('pg-1')], starts);
    assert.deepEqual(instanceEvents(up, repaired, 'pg-0', starts), [
      {
        type: 'Normal',
        reason: 'InstanceRepaired',
        note: 'pg-1: cloned again from the primary pg-0: its slot had lost its WAL',
      },
    ]);
    assert.deepEqual(instanceEvents(repaired, repaired, 'pg-0', starts), []);
    const existing = instanceStatuses('pg', 2, 'pg-0', [ready('pg-0'), ready('pg-1')], {
      'pg-1': { result: 'existing', at: 2000 },
    });
    assert.deepEqual(instanceEvents(repaired, existing, 'pg-0'), [], 'a start that changed nothing');
    // A new Database: no readiness Events for instances seen for the first time, their starts said.
    const fresh = instanceStatuses('pg', 2, 'pg-0', [ready('pg-0'), ready('pg-1')], {
      'pg-0': { result: 'initialized', at: 1 },
      'pg-1': { result: 'cloned', at: 2 },
    });
    assert.deepEqual(
      instanceEvents(undefined, fresh, 'pg-0').map((e) => e.reason),
      ['InstanceInitialized', 'InstanceCloned'],
    );
  });
});
