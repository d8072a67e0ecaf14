/**
 * The watch of the nodes' Leases (failover/node-heartbeat-io.ts): renewals update the operator's memory
 * and never enqueue a Database; only a node that goes silent wakes (once) the Databases on it; a Lease
 * never renewed wakes nobody (a fake clock and fake timers: no waiting). The controller watches them in
 * kube-node-lease only, as its rbac export allows.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  createManager,
  type EventHandler,
  type Lease,
  Leases,
  type Request,
  type RequestSink,
  silentLogger,
} from '@opkit/runtime';
import { type FakeAction, FakeClient, FakePodExecutor } from '@opkit/runtime/testing';
import { rbac, setupDatabaseController } from '../../src/controllers/database/controller.ts';
import { NodeHeartbeats, type Timers } from '../../src/controllers/database/failover/node-heartbeat-io.ts';

/** A clock and timers that move only when told to. */
class FakeTime implements Timers {
  now = 0;
  #next = 1;
  readonly pending = new Map<number, { at: number; fn: () => void }>();
  set(fn: () => void, ms: number): unknown {
    const id = this.#next++;
    this.pending.set(id, { at: this.now + ms, fn });
    return id;
  }
  clear(handle: unknown): void {
    this.pending.delete(handle as number);
  }
  /** Moves to `to`, running each timer due on the way, at its time. */
  advance(to: number): void {
    for (;;) {
      const due = [...this.pending].filter(([, t]) => t.at <= to).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.pending.delete(due[0]);
      this.now = due[1].at;
      due[1].fn();
    }
    this.now = to;
  }
}

function nodeLease(node: string, rv: number): Lease {
  return {
    metadata: { name: node, namespace: 'kube-node-lease', resourceVersion: String(rv) },
    spec: { holderIdentity: node, leaseDurationSeconds: 40 },
  } as Lease;
}

function setup() {
  const time = new FakeTime();
  const beats = new NodeHeartbeats(() => time.now, time);
  const added: Request[] = [];
  const woken: string[] = [];
  const sink: RequestSink = { add: (r) => added.push(r) };
  const handler: EventHandler<Lease> = beats.handler((node, s) => {
    woken.push(node);
    s.add({ namespace: 'shop', name: `db-on-${node}` });
  });
  let rv = 100;
  const versions = new Map<string, Lease>();
  /** The informer's event for a Lease written now (its first sight is a create). */
  const renew = (node: string): void => {
    const prev = versions.get(node);
    const next = nodeLease(node, ++rv);
    versions.set(node, next);
    if (prev) handler.update(prev, next, sink);
    else handler.create(next, sink);
  };
  return { time, beats, added, woken, renew, handler, sink, versions };
}

describe('the watch of the nodes’ Leases', () => {
  test('renewals every 10 s of every node enqueue nothing, for as long as they come', () => {
    const { time, added, woken, renew, beats } = setup();
    for (let t = 0; t <= 600_000; t += 10_000) {
      time.advance(t);
      renew('n1');
      renew('n2');
    }
    time.advance(615_000);
    assert.deepEqual(added, []);
    assert.deepEqual(woken, []);
    assert.deepEqual([...beats.silent(['n1', 'n2'])], []);
    beats.stop();
  });

  test('a node that stops renewing wakes the Databases on it once, just after its grace', () => {
    const { time, added, woken, renew, beats } = setup();
    for (let t = 0; t <= 120_000; t += 10_000) {
      time.advance(t);
      if (t <= 30_000) renew('n1');
      renew('n2');
    }
    assert.deepEqual(woken, ['n1']);
    assert.deepEqual(added, [{ namespace: 'shop', name: 'db-on-n1' }]);
    // Its last renewal at 30 s: silent at 50 s, woken within the timer's slack.
    assert.ok(beats.silent(['n1']).has('n1'));
    beats.stop();
  });

  test('a Lease never renewed (seen once, never changed) arms nothing and wakes nobody', () => {
    const { time, woken, renew, beats } = setup();
    renew('kwok-1');
    for (let t = 0; t <= 300_000; t += 10_000) {
      time.advance(t);
      renew('n2');
    }
    assert.deepEqual(woken, []);
    beats.stop();
  });

  test('an API server outage: nobody woken during it; a node that does not renew after it, woken 20 s after its end', () => {
    const { time, woken, renew, beats } = setup();
    for (let t = 0; t <= 30_000; t += 10_000) {
      time.advance(t);
      renew('n1');
      renew('n2');
    }
    // Nothing from 30 s to 52 s (n1's timer fires at 50 s: a blackout, it looks again); then only n2.
    for (const t of [52_000, 62_000, 72_000]) {
      time.advance(t);
      renew('n2');
    }
    assert.deepEqual(woken, [], 'nobody woken up to 72 s');
    time.advance(73_000);
    assert.deepEqual(woken, ['n1'], '20 s after the blackout ended (52 s), within the timer slack');
    time.advance(120_000);
    assert.deepEqual(woken, ['n1'], 'once');
    beats.stop();
  });

  test('every node silent at once (the watch, or the API server): nobody woken; a node deleted is forgotten', () => {
    const { time, woken, renew, beats, handler, sink, versions } = setup();
    for (let t = 0; t <= 30_000; t += 10_000) {
      time.advance(t);
      renew('n1');
      renew('n2');
    }
    time.advance(300_000);
    assert.deepEqual(woken, []);
    handler.delete(versions.get('n1') as Lease, sink);
    assert.equal(beats.beats.has('n1'), false);
    beats.stop();
  });
});

describe('the controller with pods/exec (FakeClient)', () => {
  test('watches the Leases of kube-node-lease only, as its rbac export allows', async () => {
    const client = new FakeClient();
    const mgr = await createManager({ client, logger: silentLogger() });
    setupDatabaseController(mgr, { exec: new FakePodExecutor({ client }), replicationPollMs: 0 });
    const stop = new AbortController();
    const running = mgr.start({ signal: stop.signal });
    try {
      const deadline = Date.now() + 5_000;
      let seen: FakeAction[] = [];
      while (Date.now() < deadline) {
        seen = client.actions({ resource: Leases, verb: ['list', 'watch'] });
        if (seen.length > 0) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.ok(seen.length > 0, 'a list or watch of Leases');
      for (const a of seen) {
        assert.equal(a.namespace, 'kube-node-lease', 'no other namespace');
        const allowed = rbac.some(
          (r) => 'resource' in r && r.resource.plural === 'leases' && r.verbs.includes(a.verb as never),
        );
        assert.ok(allowed, `rbac allows ${a.verb} leases`);
      }
    } finally {
      stop.abort();
      await running;
    }
  });
});
