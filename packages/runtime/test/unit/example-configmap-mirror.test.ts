/**
 * The ConfigMap mirror example (examples/configmap-mirror) against the FakeClient: the reconciler on
 * its own, then the whole controller under a manager.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type ConfigMap,
  ConfigMaps,
  createManager,
  EventRecorder,
  Events,
  isTerminalError,
  type ReconcileContext,
  silentLogger,
} from '@opkit/runtime';
import { FakeClient } from '@opkit/runtime/testing';
import { CONTROLLER_NAME, setupMirrorController } from '../../examples/configmap-mirror/controller.ts';
import {
  createMirrorReconciler,
  desiredCopy,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  MIRROR_LABEL,
  SOURCE_ANNOTATION,
  sourceOf,
} from '../../examples/configmap-mirror/mirror.ts';

const SRC = 'team-a';
const DST = 'mirror';

function ctx(): ReconcileContext {
  return {
    signal: new AbortController().signal,
    log: silentLogger(),
    reconcileID: 'test',
    controller: CONTROLLER_NAME,
  };
}

function source(name: string, data: Record<string, string>, labels: Record<string, string> = {}): ConfigMap {
  return {
    metadata: { namespace: SRC, name, labels: { [MIRROR_LABEL]: 'true', ...labels } },
    data,
  };
}

/** A reconciler reading straight from the FakeClient's storage (the informer caches in production). */
function setup(objects: ConfigMap[] = []) {
  const fake = new FakeClient({ objects: objects.map((object) => ({ resource: ConfigMaps, object })) });
  const recorder = new EventRecorder({
    client: fake,
    reportingController: CONTROLLER_NAME,
    reportingInstance: 'test',
  });
  const reconcile = createMirrorReconciler({
    sourceNamespace: SRC,
    targetNamespace: DST,
    client: fake,
    read: (key) => fake.getStored(ConfigMaps, key),
    recorder,
  });
  const run = (name: string, namespace = SRC) => reconcile({ namespace, name }, ctx());
  const copy = (name: string) => fake.getStored(ConfigMaps, { namespace: DST, name });
  return { fake, recorder, run, copy };
}

describe('configmap-mirror: helpers', () => {
  test('desiredCopy: same name in the target, back-pointer annotation, managed-by label, data', () => {
    const copy = desiredCopy(
      {
        metadata: { namespace: SRC, name: 'app', labels: { [MIRROR_LABEL]: 'true', tier: 'web' } },
        data: { a: '1' },
        binaryData: { b: 'AA==' },
      },
      DST,
    );
    assert.deepEqual(copy, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        namespace: DST,
        name: 'app',
        labels: { tier: 'web', [MANAGED_BY_LABEL]: MANAGED_BY },
        annotations: { [SOURCE_ANNOTATION]: `${SRC}/app` },
      },
      data: { a: '1' },
      binaryData: { b: 'AA==' },
    });
  });

  test('sourceOf maps a copy back to its source, and ignores anything else', () => {
    const copy = (annotation: string | undefined, name = 'app'): ConfigMap => ({
      metadata: {
        namespace: DST,
        name,
        ...(annotation ? { annotations: { [SOURCE_ANNOTATION]: annotation } } : {}),
      },
    });
    assert.deepEqual(sourceOf(copy(`${SRC}/app`), SRC), [{ namespace: SRC, name: 'app' }]);
    assert.deepEqual(sourceOf(copy(undefined), SRC), []);
    assert.deepEqual(sourceOf(copy('elsewhere/app'), SRC), [], 'another namespace');
    assert.deepEqual(sourceOf(copy(`${SRC}/other`), SRC), [], 'a different name');
  });
});

describe('configmap-mirror: the reconciler', () => {
  test('creates the copy, records an event, and is idempotent', async () => {
    const { fake, recorder, run, copy } = setup([source('app', { a: '1' })]);
    assert.equal(await run('app'), undefined);
    const created = copy('app');
    assert.ok(created, 'the copy exists');
    assert.deepEqual(created.data, { a: '1' });
    assert.equal(created.metadata.annotations?.[SOURCE_ANNOTATION], `${SRC}/app`);
    assert.equal(created.metadata.labels?.[MANAGED_BY_LABEL], MANAGED_BY);
    assert.equal(created.metadata.labels?.[MIRROR_LABEL], undefined, 'a copy is not itself a source');

    await recorder.flush();
    const events = fake.objects(Events, SRC);
    assert.equal(events.length, 1);
    assert.equal(events[0]?.reason, 'Mirrored');
    assert.equal(events[0]?.regarding?.name, 'app');

    fake.clearActions();
    await run('app');
    assert.deepEqual(fake.writes(), [], 'nothing changed, nothing written');
    await recorder.close();
  });

  test('follows the source: changed, added and removed keys and labels', async () => {
    const { fake, run, copy } = setup([source('app', { a: '1', gone: 'x' }, { tier: 'web' })]);
    await run('app');
    const src = fake.getStored(ConfigMaps, { namespace: SRC, name: 'app' })!;
    src.data = { a: '2', b: 'new' };
    src.metadata.labels = { [MIRROR_LABEL]: 'true', tier: 'db' };
    await fake.update(ConfigMaps, src);
    await run('app');
    const updated = copy('app')!;
    assert.deepEqual(updated.data, { a: '2', b: 'new' });
    assert.deepEqual(updated.metadata.labels, { tier: 'db', [MANAGED_BY_LABEL]: MANAGED_BY });
  });

  test('puts back a copy someone edited or deleted, keeping annotations others added', async () => {
    const { fake, run, copy } = setup([source('app', { a: '1' })]);
    await run('app');
    const tampered = copy('app')!;
    tampered.data = { a: 'hacked' };
    tampered.metadata.annotations = { ...tampered.metadata.annotations, 'example.com/note': 'hi' };
    await fake.update(ConfigMaps, tampered);
    await run('app');
    assert.deepEqual(copy('app')?.data, { a: '1' });
    assert.equal(copy('app')?.metadata.annotations?.['example.com/note'], 'hi');

    await fake.delete(ConfigMaps, { namespace: DST, name: 'app' });
    await run('app');
    assert.deepEqual(copy('app')?.data, { a: '1' }, 'recreated');
  });

  test('deletes the copy when the source goes, loses its label or is being deleted', async () => {
    const { fake, run, copy } = setup([
      source('deleted', { a: '1' }),
      source('unlabelled', { a: '1' }),
      {
        ...source('finalizing', { a: '1' }),
        metadata: { ...source('finalizing', {}).metadata, finalizers: ['example.com/hold'] },
      },
    ]);
    for (const name of ['deleted', 'unlabelled', 'finalizing']) await run(name);
    assert.equal(fake.objects(ConfigMaps, DST).length, 3);

    await fake.delete(ConfigMaps, { namespace: SRC, name: 'deleted' });
    const unlabelled = fake.getStored(ConfigMaps, { namespace: SRC, name: 'unlabelled' })!;
    delete unlabelled.metadata.labels?.[MIRROR_LABEL];
    await fake.update(ConfigMaps, unlabelled);
    await fake.delete(ConfigMaps, { namespace: SRC, name: 'finalizing' });
    assert.ok(fake.getStored(ConfigMaps, { namespace: SRC, name: 'finalizing' })?.metadata.deletionTimestamp);

    for (const name of ['deleted', 'unlabelled', 'finalizing']) await run(name);
    assert.deepEqual(fake.objects(ConfigMaps, DST), []);
    assert.equal(copy('deleted'), undefined);
    fake.clearActions();
    await run('deleted');
    assert.deepEqual(fake.writes(), [], 'nothing left to do');
  });

  test('never copies an unlabelled ConfigMap, never touches ConfigMaps it does not own', async () => {
    const plain: ConfigMap = { metadata: { namespace: SRC, name: 'plain' }, data: { a: '1' } };
    const foreign: ConfigMap = { metadata: { namespace: DST, name: 'taken' }, data: { mine: 'yes' } };
    const orphanOfOther: ConfigMap = {
      metadata: { namespace: DST, name: 'plain', annotations: { [SOURCE_ANNOTATION]: 'other/plain' } },
    };
    const { fake, run, copy } = setup([plain, foreign, orphanOfOther, source('taken', { a: '1' })]);
    fake.clearActions();
    await run('plain');
    assert.deepEqual(fake.writes(), [], 'an unlabelled source with a copy of someone else: nothing to do');

    await assert.rejects(run('taken'), (err: unknown) => {
      assert.ok(isTerminalError(err), 'a name clash cannot be fixed by retrying');
      assert.match(String(err), /exists and is not a mirror of team-a\/taken/);
      return true;
    });
    assert.deepEqual(copy('taken')?.data, { mine: 'yes' }, 'not overwritten');
  });

  test('ignores keys outside the source namespace', async () => {
    const { fake, run } = setup([
      { ...source('app', { a: '1' }), metadata: { ...source('app', {}).metadata, namespace: DST } },
    ]);
    fake.clearActions();
    await run('app', DST);
    assert.deepEqual(fake.writes(), []);
  });
});

describe('configmap-mirror: the controller under a manager, over the FakeClient', () => {
  test('mirrors, follows and cleans up through the informers; metrics count the reconciles', async () => {
    const fake = new FakeClient();
    const mgr = await createManager({ client: fake, logger: silentLogger() });
    const controller = setupMirrorController(mgr, { sourceNamespace: SRC, targetNamespace: DST });
    const stop = new AbortController();
    const run = mgr.start(stop.signal);
    const eventually = async (what: string, cond: () => boolean): Promise<void> => {
      const deadline = Date.now() + 5_000;
      while (!cond()) {
        if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    const copy = () => fake.getStored(ConfigMaps, { namespace: DST, name: 'app' });
    try {
      await mgr.elected;
      await fake.create(ConfigMaps, source('app', { a: '1' }));
      await fake.create(ConfigMaps, { metadata: { namespace: SRC, name: 'plain' }, data: { a: '1' } });
      await eventually('the copy', () => copy()?.data?.a === '1');

      const src = fake.getStored(ConfigMaps, { namespace: SRC, name: 'app' })!;
      src.data = { a: '2' };
      await fake.update(ConfigMaps, src);
      await eventually('the update', () => copy()?.data?.a === '2');

      await fake.delete(ConfigMaps, { namespace: DST, name: 'app' });
      await eventually('the copy to come back', () => copy() !== undefined);

      await fake.delete(ConfigMaps, { namespace: SRC, name: 'app' });
      await eventually('the copy to go', () => copy() === undefined);
      await eventually(
        'the queue to drain',
        () => controller.queue.len() === 0 && controller.activeWorkers === 0,
      );
      assert.equal(fake.getStored(ConfigMaps, { namespace: DST, name: 'plain' }), undefined);

      const text = await mgr.metrics.text();
      const series = (result: string) =>
        Number(
          new RegExp(
            `controller_runtime_reconcile_total\\{controller="${CONTROLLER_NAME}",result="${result}"\\} (\\d+)`,
          ).exec(text)?.[1],
        );
      assert.ok(series('success') >= 4, `success reconciles: ${series('success')}`);
      assert.equal(series('error'), 0);
    } finally {
      stop.abort();
      await run;
    }
  });
});
