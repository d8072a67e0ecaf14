/**
 * The code of docs/runtime.md (docs/examples/*.ts) against a real kube-apiserver: the client examples,
 * an informer, the Database schema's CRD (server-side defaults and CEL rules), and the quick start's
 * Greeting controller run by a manager.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, start } from '@opkit/controlplane';
import {
  ConfigMaps,
  CustomResourceDefinitions,
  createClient,
  createManager,
  isInvalid,
  isNotFound,
  loadConfig,
  Namespaces,
  type RestClient,
  silentLogger,
} from '@opkit/runtime';
import { watchConfigMaps } from '../../../../docs/examples/cache.ts';
import { crud, firstEvents, getOrExplain, patches } from '../../../../docs/examples/client.ts';
import { Greetings, setupGreetingController } from '../../../../docs/examples/quickstart.ts';
import { Databases, example, installCrd } from '../../../../docs/examples/schema.ts';
import { eventually } from '../../src/testing/eventually.ts';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('docs/examples against a real API server', { timeout: 300_000 }, () => {
  let cp: ControlPlane;
  let client: RestClient;

  before(
    async () => {
      cp = await start({ mode: 'apiserver' });
      client = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), { fieldManager: 'docs-test' });
    },
    { timeout: 180_000 },
  );

  after(async () => {
    client?.close();
    await cp?.stop();
  });

  test('client: crud, patches, errors, a raw watch; an informer', async () => {
    const items = await crud(client);
    assert.deepEqual(
      items.map((cm) => cm.data),
      [{ color: 'blue', size: 'large' }],
    );
    assert.deepEqual((await patches(client)).data, { a: '3', b: '2' });
    assert.equal(await getOrExplain(client, 'missing'), undefined);

    const events = firstEvents(client, 2);
    await sleep(200);
    await client.create(ConfigMaps, { metadata: { namespace: 'default', name: 'one' } });
    await client.delete(ConfigMaps, { namespace: 'default', name: 'one' });
    assert.deepEqual(await events, ['ADDED one', 'DELETED one']);

    await client.create(ConfigMaps, {
      metadata: { namespace: 'default', name: 'demo', labels: { app: 'demo' } },
    });
    const stop = new AbortController();
    try {
      assert.deepEqual(await watchConfigMaps(client, stop.signal), ['default/demo']);
    } finally {
      stop.abort();
    }
  });

  test('schema: the API server takes the generated CRD, applies its defaults and CEL rules', async () => {
    await installCrd(client);
    const created = await eventually('the Database CRD to be served', async () =>
      client.create(Databases.resource, example),
    );
    assert.equal(created.spec.replicas, 1, 'defaulted by the API server');
    assert.equal(created.spec.storage, '1Gi');
    await assert.rejects(
      client.update(Databases.resource, { ...created, spec: { ...created.spec, version: '17.0' } }),
      (err: unknown) => isInvalid(err) && /version is immutable/.test(String(err)),
    );
    await assert.rejects(
      client.create(Databases.resource, {
        ...example,
        metadata: { namespace: 'default', name: 'bad' },
        spec: { ...example.spec, replicas: 9 },
      }),
      (err: unknown) => isInvalid(err) && err.causes.some((c) => c.field === 'spec.replicas'),
    );
  });

  test('quick start: the Greeting controller, run by a manager', async () => {
    await client.create(CustomResourceDefinitions, Greetings.crd());
    await client.create(Namespaces, { metadata: { name: 'greetings' } });
    await eventually('the Greeting CRD to be served', async () =>
      client.list(Greetings.resource, { namespace: 'greetings' }),
    );
    const mgr = await createManager({
      kubeconfig: cp.kubeconfigPath,
      logger: silentLogger(),
      healthProbeBindAddress: '127.0.0.1:0',
    });
    setupGreetingController(mgr);
    const stop = new AbortController();
    const running = mgr.start(stop.signal);
    try {
      await mgr.elected;
      const greeting = await client.create(
        Greetings.resource,
        Greetings.build({
          metadata: { namespace: 'greetings', name: 'hello' },
          spec: { message: 'hi', shout: true },
        }),
      );
      assert.equal(greeting.spec.shout, true);
      const key = { namespace: 'greetings', name: 'hello-greeting' };
      const cm = await eventually('the ConfigMap', async () =>
        client.get(ConfigMaps, key).catch((err: unknown) => {
          if (isNotFound(err)) return undefined;
          throw err;
        }),
      );
      assert.deepEqual(cm.data, { message: 'HI' });
      assert.deepEqual(
        cm.metadata.ownerReferences?.map((r) => [r.kind, r.name, r.uid, r.controller]),
        [['Greeting', 'hello', greeting.metadata.uid, true]],
      );
      const ready = await eventually('the Ready condition', async () => {
        const g = await client.get(Greetings.resource, { namespace: 'greetings', name: 'hello' });
        return g.status?.conditions?.find((c) => c.type === 'Ready' && c.status === 'True') ? g : undefined;
      });
      assert.equal(ready.status?.observedGeneration, 1);

      // A spec change is reconciled; someone deleting the owned ConfigMap is too.
      await client.update(Greetings.resource, { ...ready, spec: { message: 'bye' } });
      await eventually('the new message', async () =>
        (await client.get(ConfigMaps, key)).data?.message === 'bye' ? true : undefined,
      );
      await client.delete(ConfigMaps, key);
      await eventually('the ConfigMap to come back', async () =>
        client.get(ConfigMaps, key).catch(() => undefined),
      );
      const readyz = await fetch(`http://${mgr.healthProbeAddress}/readyz`);
      assert.equal(readyz.status, 200);
    } finally {
      stop.abort();
      await running;
    }
  });
});
