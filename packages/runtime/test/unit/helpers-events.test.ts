import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Event } from '../../src/api/builtin.ts';
import type { KubeObject, ObjectKey, ObjectList, WatchEvent } from '../../src/api/object.ts';
import type { Resource } from '../../src/api/resource.ts';
import { ConnectionError, errorFromStatus } from '../../src/client/errors.ts';
import type { Client, Patch } from '../../src/client/types.ts';
import {
  EVENT_WRITE_ATTEMPTS,
  EventRecorder,
  type EventRecorderOptions,
  microTime,
  NOTE_MAX_BYTES,
  truncateUtf8,
} from '../../src/helpers/events.ts';
import { FakeClock } from '../../src/util/clock.ts';

interface Call {
  verb: 'create' | 'patch';
  resource: string;
  namespace?: string;
  name: string;
  body: unknown;
}

/** Records Event writes; `fail` decides per call whether to throw. */
class EventSink implements Client {
  readonly fieldManager = 'test';
  readonly calls: Call[] = [];
  fail: ((call: Call) => Error | undefined) | undefined;
  /** Resolves writes only when released (to observe that event() does not wait). */
  gate: Promise<void> | undefined;
  /** Writes that reached the client, including those still waiting at the gate. */
  started = 0;

  #record(call: Call): void {
    this.calls.push(call);
    const err = this.fail?.(call);
    if (err) throw err;
  }

  async create<T extends KubeObject>(res: Resource<T>, obj: T): Promise<T> {
    this.started++;
    await this.gate;
    this.#record({
      verb: 'create',
      resource: `${res.apiVersion}/${res.plural}`,
      namespace: obj.metadata.namespace,
      name: obj.metadata.name ?? '',
      body: structuredClone(obj),
    });
    return obj;
  }

  async patch<T extends KubeObject>(res: Resource<T>, key: ObjectKey, patch: Patch): Promise<T> {
    this.started++;
    await this.gate;
    this.#record({
      verb: 'patch',
      resource: `${res.apiVersion}/${res.plural}`,
      namespace: key.namespace,
      name: key.name,
      body: structuredClone(patch),
    });
    return { metadata: { ...key } } as T;
  }

  creates(): Event[] {
    return this.calls.filter((c) => c.verb === 'create').map((c) => c.body as Event);
  }

  patches(): Call[] {
    return this.calls.filter((c) => c.verb === 'patch');
  }

  async get<T extends KubeObject>(): Promise<T> {
    throw new Error('not implemented');
  }
  async list<T extends KubeObject>(): Promise<ObjectList<T>> {
    throw new Error('not implemented');
  }
  async update<T extends KubeObject>(): Promise<T> {
    throw new Error('not implemented');
  }
  async delete(): Promise<void> {
    throw new Error('not implemented');
  }
  async updateStatus<T extends KubeObject>(): Promise<T> {
    throw new Error('not implemented');
  }
  async patchStatus<T extends KubeObject>(): Promise<T> {
    throw new Error('not implemented');
  }
  // biome-ignore lint/correctness/useYield: not used by these tests
  async *watch<T extends KubeObject>(): AsyncIterable<WatchEvent<T>> {
    throw new Error('not implemented');
  }
}

/** The merge patch body a recorded patch call sent. */
const patchBody = (call: Call | undefined): unknown => (call?.body as { body?: unknown } | undefined)?.body;

const T0 = Date.parse('2024-05-01T10:00:00Z');
const pod: KubeObject = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'db-0', namespace: 'ns', uid: 'uid-pod', resourceVersion: '12' },
};
const node: KubeObject = { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a', uid: 'uid-node' } };

function setup(opts: Partial<EventRecorderOptions> = {}) {
  const client = new EventSink();
  const clock = new FakeClock(T0);
  const errors: unknown[] = [];
  const recorder = new EventRecorder({
    client,
    clock,
    reportingController: 'opkit.dev/database',
    reportingInstance: 'operator-7f9c',
    onError: (err) => errors.push(err),
    ...opts,
  });
  return { client, clock, recorder, errors };
}

const hexName = (name: string, ms: number, plusNanos = 0n) =>
  `${name}.${(BigInt(ms) * 1_000_000n + plusNanos).toString(16)}`;

describe('EventRecorder', () => {
  it('creates an events.k8s.io/v1 Event without blocking the caller', async () => {
    const { client, recorder, errors } = setup();
    let release = () => {};
    client.gate = new Promise((resolve) => {
      release = resolve;
    });
    const returned = recorder.event(pod, 'Normal', 'Started', 'Start', 'database started', node);
    assert.equal(returned, undefined);
    assert.equal(client.calls.length, 0, 'nothing is written synchronously');
    release();
    await recorder.flush();
    assert.deepEqual(client.calls, [
      {
        verb: 'create',
        resource: 'events.k8s.io/v1/events',
        namespace: 'ns',
        name: hexName('db-0', T0),
        body: {
          apiVersion: 'events.k8s.io/v1',
          kind: 'Event',
          metadata: { name: hexName('db-0', T0), namespace: 'ns' },
          eventTime: '2024-05-01T10:00:00.000000Z',
          reportingController: 'opkit.dev/database',
          reportingInstance: 'operator-7f9c',
          action: 'Start',
          reason: 'Started',
          regarding: {
            apiVersion: 'v1',
            kind: 'Pod',
            namespace: 'ns',
            name: 'db-0',
            uid: 'uid-pod',
            resourceVersion: '12',
          },
          related: { apiVersion: 'v1', kind: 'Node', name: 'node-a', uid: 'uid-node' },
          note: 'database started',
          type: 'Normal',
        },
      },
    ]);
    assert.deepEqual(errors, []);
  });

  it('puts events about cluster-scoped objects in the default namespace', async () => {
    const { client, recorder } = setup();
    recorder.warning(node, 'NotReady', 'Check', 'node is not ready');
    await recorder.flush();
    assert.equal(client.creates()[0]?.metadata.namespace, 'default');
    assert.equal(client.creates()[0]?.type, 'Warning');
  });

  it('aggregates repeats into a series, patched at most every 30 s', async () => {
    const { client, clock, recorder } = setup();
    recorder.event(pod, 'Warning', 'BackOff', 'Restart', 'restarting');
    clock.advance(5_000);
    recorder.event(pod, 'Warning', 'BackOff', 'Restart', 'restarting');
    clock.advance(5_000);
    recorder.event(pod, 'Warning', 'BackOff', 'Restart', 'restarting');
    await recorder.flush();
    assert.equal(client.creates().length, 1);
    assert.equal(client.patches().length, 0, 'counted in memory within 30 s of the create');

    clock.advance(20_000); // 30 s after the create: the refresh timer fires
    await recorder.flush();
    assert.deepEqual(client.patches(), [
      {
        verb: 'patch',
        resource: 'events.k8s.io/v1/events',
        namespace: 'ns',
        name: hexName('db-0', T0),
        body: { type: 'merge', body: { series: { count: 3, lastObservedTime: microTime(T0 + 10_000) } } },
      },
    ]);

    // A repeat more than 30 s after the last write is patched at once.
    clock.advance(31_000);
    recorder.event(pod, 'Warning', 'BackOff', 'Restart', 'restarting');
    await recorder.flush();
    assert.equal(client.patches().length, 2);
    assert.deepEqual(patchBody(client.patches()[1]), {
      series: { count: 4, lastObservedTime: microTime(T0 + 61_000) },
    });

    // Nothing pending: time passing writes nothing more.
    clock.advance(60_000);
    await recorder.flush();
    assert.equal(client.patches().length, 2);
    assert.equal(client.creates().length, 1);
  });

  it('keeps distinct events apart', async () => {
    const { client, clock, recorder } = setup();
    const other: KubeObject = { metadata: { name: 'db-1', namespace: 'ns', uid: 'uid-other' } };
    recorder.event(pod, 'Normal', 'R', 'A', 'n');
    recorder.event(pod, 'Warning', 'R', 'A', 'n');
    recorder.event(pod, 'Normal', 'R2', 'A', 'n');
    recorder.event(pod, 'Normal', 'R', 'A2', 'n');
    recorder.event(pod, 'Normal', 'R', 'A', 'n2');
    recorder.event(other, 'Normal', 'R', 'A', 'n');
    recorder.event(pod, 'Normal', 'R', 'A', 'n');
    clock.advance(30_000);
    await recorder.flush();
    const names = client.creates().map((e) => e.metadata.name);
    assert.equal(names.length, 6);
    assert.equal(new Set(names).size, 6, 'names are unique even within one millisecond');
    assert.equal(names[1], hexName('db-0', T0, 1n));
    assert.equal(client.patches().length, 1);
    assert.equal(client.patches()[0]?.name, names[0]);
  });

  it('starts a new Event after 6 minutes without a repeat', async () => {
    const { client, clock, recorder } = setup();
    recorder.event(pod, 'Normal', 'Synced', 'Sync', 'ok');
    clock.advance(6 * 60_000 + 1);
    recorder.event(pod, 'Normal', 'Synced', 'Sync', 'ok');
    await recorder.flush();
    const names = client.creates().map((e) => e.metadata.name);
    assert.deepEqual(names, [hexName('db-0', T0), hexName('db-0', T0 + 6 * 60_000 + 1)]);
    assert.equal(client.patches().length, 0);
  });

  it('a series that ends writes its last count', async () => {
    const { client, clock, recorder } = setup();
    recorder.event(pod, 'Normal', 'Synced', 'Sync', 'ok');
    clock.advance(1_000);
    recorder.event(pod, 'Normal', 'Synced', 'Sync', 'ok');
    clock.advance(10 * 60_000); // the refresh timer fired at 30 s
    await recorder.flush();
    assert.equal(client.patches().length, 1);
    assert.deepEqual(patchBody(client.patches()[0]), {
      series: { count: 2, lastObservedTime: microTime(T0 + 1_000) },
    });
  });

  it('close() writes counts still in memory and ignores later events', async () => {
    const { client, clock, recorder } = setup();
    recorder.event(pod, 'Normal', 'Synced', 'Sync', 'ok');
    clock.advance(1_000);
    recorder.event(pod, 'Normal', 'Synced', 'Sync', 'ok');
    await recorder.close();
    assert.equal(client.patches().length, 1);
    assert.equal(clock.pendingTimers(), 0);
    recorder.event(pod, 'Normal', 'Other', 'Sync', 'ok');
    await recorder.flush();
    assert.equal(client.calls.length, 2);
  });

  it('truncates the note to 1 kB without splitting characters', async () => {
    const { client, recorder } = setup();
    recorder.event(pod, 'Warning', 'Failed', 'Provision', `${'x'.repeat(1023)}é and more`);
    recorder.event(pod, 'Warning', 'Failed2', 'Provision', 'y'.repeat(5000));
    await recorder.flush();
    const [first, second] = client.creates();
    assert.equal(first?.note, 'x'.repeat(1023));
    assert.equal(Buffer.byteLength(second?.note ?? ''), NOTE_MAX_BYTES);
    assert.equal(truncateUtf8('héllo', 2), 'h');
    assert.equal(truncateUtf8('héllo', 3), 'hé');
    assert.equal(truncateUtf8('😀😀', 5), '😀');
    assert.equal(truncateUtf8('short', 1024), 'short');
  });

  it('never throws into the caller: failures go to onError', async () => {
    const { client, recorder, errors } = setup({
      onError: (err) => {
        errors.push(err);
        throw new Error('onError must not break the recorder');
      },
    });
    client.fail = () => new Error('API down');
    assert.doesNotThrow(() => recorder.event(pod, 'Normal', 'R', 'A', 'n'));
    await recorder.flush();
    assert.equal(errors.length, 1);
    assert.match(String(errors[0]), /API down/);
    client.fail = undefined;
    assert.doesNotThrow(() =>
      recorder.event(
        { metadata: undefined } as unknown as KubeObject,
        'Normal',
        'R',
        'A',
        'broken regarding object',
      ),
    );
    assert.equal(errors.length, 2);
  });

  it('retries a write while the API server is unavailable, and loses nothing once it answers', async () => {
    const { client, clock, recorder, errors } = setup();
    let down = 3;
    client.fail = (call) => {
      if (call.verb !== 'create' || down === 0) return undefined;
      down--;
      return new ConnectionError('connect ECONNREFUSED 127.0.0.1:6443', undefined);
    };
    recorder.event(pod, 'Normal', 'Started', 'Start', 'database started');
    // Attempts 1-3 fail; the waits between them are 1 s, 2 s, 4 s.
    await clock.advanceAsync(1_000 + 2_000 + 4_000);
    await recorder.flush();
    assert.deepEqual(errors, []);
    // Four attempts reached the client; the fourth succeeded (nothing reported).
    assert.equal(client.creates().length, 4);
    assert.equal(client.creates()[3]?.reason, 'Started');
  });

  it('gives up after EVENT_WRITE_ATTEMPTS and reports it; a non-transient error is not retried', async () => {
    const { client, clock, recorder, errors } = setup();
    client.fail = () => errorFromStatus(503, { kind: 'Status', code: 503, reason: 'ServiceUnavailable' });
    recorder.event(pod, 'Normal', 'Started', 'Start', 'n');
    await clock.advanceAsync(10 * 60_000);
    await recorder.flush();
    assert.equal(client.calls.length, EVENT_WRITE_ATTEMPTS);
    assert.equal(errors.length, 1);
    client.calls.length = 0;
    client.fail = () => errorFromStatus(403, { kind: 'Status', code: 403, reason: 'Forbidden' });
    recorder.event(node, 'Normal', 'Other', 'Start', 'n');
    await recorder.flush();
    assert.equal(client.calls.length, 1);
    assert.equal(errors.length, 2);
  });

  it('recreates the Event with its series when the patch finds it gone', async () => {
    const { client, clock, recorder, errors } = setup();
    recorder.event(pod, 'Normal', 'R', 'A', 'n');
    client.fail = (call) =>
      call.verb === 'patch'
        ? errorFromStatus(404, { kind: 'Status', code: 404, reason: 'NotFound' })
        : undefined;
    clock.advance(30_000);
    recorder.event(pod, 'Normal', 'R', 'A', 'n');
    await recorder.flush();
    assert.deepEqual(errors, []);
    const recreated = client.creates()[1];
    assert.equal(recreated?.metadata.name, hexName('db-0', T0));
    assert.deepEqual(recreated?.series, { count: 2, lastObservedTime: microTime(T0 + 30_000) });
  });

  it('drops events, reporting them, when the queue is full', async () => {
    const { client, recorder, errors } = setup({ maxQueue: 2 });
    let release = () => {};
    client.gate = new Promise((resolve) => {
      release = resolve;
    });
    for (let i = 0; i < 4; i++) recorder.event(pod, 'Normal', `R${i}`, 'A', 'n');
    assert.equal(errors.length, 2);
    assert.match(String(errors[0]), /queue full/);
    release();
    await recorder.flush();
    assert.equal(client.creates().length, 2);
    recorder.event(pod, 'Normal', 'R3', 'A', 'n');
    await recorder.flush();
    assert.equal(client.creates().length, 3, 'a dropped event is not remembered as recorded');
  });

  it('writes up to maxInFlight Events at once, and the writes about one Event one after the other', async () => {
    const { client, recorder, errors } = setup({ maxInFlight: 3 });
    let release = () => {};
    client.gate = new Promise((resolve) => {
      release = resolve;
    });
    for (let i = 0; i < 10; i++) recorder.event(pod, 'Normal', `R${i}`, 'A', 'n');
    await new Promise((r) => setImmediate(r));
    assert.equal(client.started, 3, 'three writes in flight, seven waiting');
    release();
    await recorder.flush();
    assert.equal(client.creates().length, 10);
    assert.deepEqual(errors, []);

    // A repeat's series update waits for the creation of its Event, even with slots free.
    const gated = setup({ maxInFlight: 8 });
    gated.client.gate = new Promise((resolve) => {
      release = resolve;
    });
    gated.recorder.event(pod, 'Normal', 'Again', 'A', 'n');
    gated.clock.advance(1000);
    gated.recorder.event(pod, 'Normal', 'Again', 'A', 'n');
    const closing = gated.recorder.close();
    await new Promise((r) => setImmediate(r));
    assert.equal(gated.client.started, 1, 'the series patch waits for the create');
    release();
    await closing;
    assert.deepEqual(
      gated.client.calls.map((c) => c.verb),
      ['create', 'patch'],
    );
  });

  it('uses the system clock by default and flush() resolves with nothing queued', async () => {
    const client = new EventSink();
    const recorder = new EventRecorder({ client, reportingController: 'c', reportingInstance: 'i' });
    await recorder.flush();
    const before = Date.now();
    recorder.event(pod, 'Normal', 'R', 'A', 'n');
    recorder.event(pod, 'Normal', 'R', 'A', 'n'); // arms an unref'd refresh timer
    await recorder.flush();
    const eventTime = Date.parse(client.creates()[0]?.eventTime ?? '');
    assert.ok(eventTime >= before && eventTime <= Date.now());
    await recorder.close();
    assert.equal(client.patches().length, 1);
  });
});
