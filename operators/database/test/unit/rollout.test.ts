/**
 * The operator's rollout (rollout.ts, pure): replicas first, the highest ordinal first, the primary last
 * whatever its ordinal, one pod at a time, each only once every other pod is Ready.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Pod, StatefulSet } from '@opkit/runtime';
import { nextRoll, REVISION_LABEL } from '../../src/controllers/database/rollout.ts';

const sts = (type = 'OnDelete'): StatefulSet => ({
  metadata: { name: 'pg', generation: 2 },
  spec: {
    replicas: 3,
    selector: {},
    serviceName: 'pg-headless',
    template: {},
    updateStrategy: { type },
  },
  status: { replicas: 3, observedGeneration: 2, currentRevision: 'pg-old', updateRevision: 'pg-new' },
});
const pod = (i: number, revision: string, ready = true, terminating = false): Pod => ({
  metadata: {
    name: `pg-${i}`,
    labels: { [REVISION_LABEL]: revision },
    ...(terminating ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}),
  },
  status: { conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
});

describe('the operator rollout', () => {
  it('replicas first (highest ordinal first), the primary last, whatever its ordinal', () => {
    const old = [pod(0, 'pg-old'), pod(1, 'pg-old'), pod(2, 'pg-old')];
    const order: string[] = [];
    let pods = old;
    for (let step = 0; step < 4; step++) {
      const d = nextRoll(sts(), pods, 'pg-1');
      if (d.action !== 'delete') break;
      order.push(`${d.pod}:${d.role}`);
      pods = pods.map((p) => (p.metadata.name === d.pod ? pod(Number(d.pod.slice(3)), 'pg-new') : p));
    }
    assert.deepEqual(order, ['pg-2:replica', 'pg-0:replica', 'pg-1:primary']);
    assert.deepEqual(nextRoll(sts(), pods, 'pg-1'), { action: 'none' });
  });

  it('one at a time: waits while a pod is terminating, missing or not Ready', () => {
    const wait = (pods: Pod[]) => nextRoll(sts(), pods, 'pg-0').action;
    assert.equal(wait([pod(0, 'pg-old'), pod(1, 'pg-old'), pod(2, 'pg-new', true, true)]), 'wait');
    assert.equal(wait([pod(0, 'pg-old'), pod(1, 'pg-old')]), 'wait');
    assert.equal(wait([pod(0, 'pg-old'), pod(1, 'pg-old'), pod(2, 'pg-new', false)]), 'wait');
    const stale = { ...sts(), status: { ...sts().status!, observedGeneration: 1 } } as StatefulSet;
    assert.equal(
      nextRoll(stale, [pod(0, 'pg-old'), pod(1, 'pg-old'), pod(2, 'pg-old')], 'pg-0').action,
      'wait',
    );
  });

  it('a replica not Ready goes first; the primary last even when it is NotReady for a moment', () => {
    const broken = nextRoll(sts(), [pod(0, 'pg-old'), pod(1, 'pg-old', false), pod(2, 'pg-old')], 'pg-0');
    assert.deepEqual(broken, { action: 'delete', pod: 'pg-1', role: 'replica', revision: 'pg-new' });
    // Seen on real pods: the primary's probe timed out while pg-0 was still on the old revision.
    const flapping = nextRoll(sts(), [pod(0, 'pg-old'), pod(1, 'pg-old', false), pod(2, 'pg-new')], 'pg-1');
    assert.deepEqual(flapping, { action: 'delete', pod: 'pg-0', role: 'replica', revision: 'pg-new' });
    // Only the primary left: it goes once every replica is Ready, whatever its own readiness.
    const last = [pod(0, 'pg-new'), pod(1, 'pg-old', false), pod(2, 'pg-new')];
    assert.deepEqual(nextRoll(sts(), last, 'pg-1'), {
      action: 'delete',
      pod: 'pg-1',
      role: 'primary',
      revision: 'pg-new',
    });
    assert.equal(
      nextRoll(sts(), [pod(0, 'pg-new', false), pod(1, 'pg-old'), pod(2, 'pg-new')], 'pg-1').action,
      'wait',
    );
  });

  it('nothing under the StatefulSet rolling update (mysql), or when every pod is on the update revision', () => {
    const old = [pod(0, 'pg-old'), pod(1, 'pg-old'), pod(2, 'pg-old')];
    assert.deepEqual(nextRoll(sts('RollingUpdate'), old, 'pg-0'), { action: 'none' });
    assert.deepEqual(nextRoll(undefined, old, 'pg-0'), { action: 'none' });
  });

  it('with switchover: the primary moves to the lowest-ordinal updated Ready replica, then rolls as a replica', () => {
    let pods = [pod(0, 'pg-old'), pod(1, 'pg-old'), pod(2, 'pg-old')];
    let primary = 'pg-1';
    const steps: string[] = [];
    for (let step = 0; step < 6; step++) {
      const d = nextRoll(sts(), pods, primary, { switchover: true });
      if (d.action === 'switchover') {
        steps.push(`switchover ${d.from}->${d.to}`);
        primary = d.to; // what the switchover procedure records once done
      } else if (d.action === 'delete') {
        steps.push(`${d.pod}:${d.role}`);
        pods = pods.map((p) => (p.metadata.name === d.pod ? pod(Number(d.pod.slice(3)), 'pg-new') : p));
      } else break;
    }
    // Never a primary restarted in place: it rolls only after it became a replica.
    assert.deepEqual(steps, ['pg-2:replica', 'pg-0:replica', 'switchover pg-1->pg-0', 'pg-1:replica']);
    assert.deepEqual(nextRoll(sts(), pods, primary, { switchover: true }), { action: 'none' });
  });
});
