/**
 * Unit tests of a reconciler and of a whole controller with the FakeClient (docs/runtime.md,
 * "Testing"). These are real node:test tests: packages/runtime/test/unit/example-docs.test.ts runs them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Cache, ConfigMaps, createManager, type ReconcileContext, silentLogger } from '@opkit/runtime';
import { FakeClient } from '@opkit/runtime/testing';
import { type Greeting, Greetings, greetingReconciler, setupGreetingController } from './quickstart.ts';

// #region reconciler-test
const hello: Greeting = Greetings.build({
  metadata: { namespace: 'default', name: 'hello' },
  spec: { message: 'hi', shout: true },
});
const key = { namespace: 'default', name: 'hello-greeting' };

test('a Greeting gets its ConfigMap and a Ready condition', async () => {
  // API semantics in memory: resourceVersions, conflicts, generation, the status subresource, ...
  const fake = new FakeClient({
    objects: [{ resource: Greetings.resource, object: hello }],
    statusSubresource: [Greetings.resource],
  });
  const cache = new Cache(fake); // the real cache, fed by the fake's list and watch
  const stop = new AbortController();
  const cacheRun = cache.start(stop.signal);
  const ctx: ReconcileContext = {
    signal: stop.signal,
    log: silentLogger(),
    reconcileID: 'test',
    controller: 'test',
  };

  await greetingReconciler({ client: fake, cache })({ namespace: 'default', name: 'hello' }, ctx);

  const cm = fake.getStored(ConfigMaps, key);
  assert.deepEqual(cm?.data, { message: 'HI' });
  assert.equal(cm?.metadata.ownerReferences?.[0]?.kind, 'Greeting');
  const { status } = fake.getStored(Greetings.resource, { namespace: 'default', name: 'hello' }) ?? {};
  assert.equal(status?.conditions?.[0]?.type, 'Ready');
  assert.equal(status?.observedGeneration, 1);
  assert.deepEqual(
    fake.writes().map((a) => `${a.verb} ${a.resource.kind}`),
    ['create ConfigMap', 'patchStatus Greeting'],
  );
  stop.abort();
  await cacheRun;
});
// #endregion reconciler-test

// #region controller-test
test('the controller puts back a deleted ConfigMap', async () => {
  const fake = new FakeClient({ statusSubresource: [Greetings.resource] });
  const mgr = await createManager({ client: fake, logger: silentLogger() }); // no kubeconfig needed
  setupGreetingController(mgr);
  const stop = new AbortController();
  const running = mgr.start(stop.signal);

  await fake.create(Greetings.resource, hello);
  await until(() => fake.getStored(ConfigMaps, key) !== undefined);
  await fake.delete(ConfigMaps, key); // the owned child's delete event reconciles its owner
  await until(() => fake.getStored(ConfigMaps, key) !== undefined);

  stop.abort(); // graceful shutdown: in-flight reconciles finish first
  await running;
});

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !condition(); await new Promise((r) => setTimeout(r, 10))) {
    if (Date.now() > deadline) assert.fail('timed out');
  }
}
// #endregion controller-test
