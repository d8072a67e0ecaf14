/**
 * Controllers against a real kube-apiserver (etcd + kube-apiserver from @opkit/controlplane), run by the
 * Manager with the real client and cache: owned-child events, generationChanged on a CRD with a status
 * subresource, retries with backoff, and TerminalError.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, start } from '@opkit/controlplane';
import { ConfigMaps, CustomResourceDefinitions, Namespaces } from '../../src/api/builtin.ts';
import { type KubeObject, keyOf } from '../../src/api/object.ts';
import { defineResource } from '../../src/api/resource.ts';
import { createClient, isNotFound, loadConfig, type RestClient } from '../../src/client/index.ts';
import {
  type Controller,
  controllerFor,
  generationChanged,
  TerminalError,
} from '../../src/controller/index.ts';
import { silentLogger } from '../../src/log/logger.ts';
import { Manager } from '../../src/manager/manager.ts';
import { MetricsRegistry } from '../../src/metrics/index.ts';
import { ItemExponentialFailureRateLimiter } from '../../src/queue/index.ts';

type Widget = KubeObject & { spec?: { size?: number }; status?: { observed?: number } };
const Widgets = defineResource<Widget>({
  group: 'test.opkit.dev',
  version: 'v1',
  kind: 'Widget',
  plural: 'widgets',
  namespaced: true,
});

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function eventually(
  what: string,
  pred: () => boolean | Promise<boolean>,
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await pred()) return;
    await sleep(25);
  }
  assert.fail(`timed out waiting for: ${what}`);
}

async function metric(m: MetricsRegistry, series: string): Promise<number | undefined> {
  for (const line of (await m.text()).split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

describe('controllers against a real API server', { timeout: 300_000 }, () => {
  let cp: ControlPlane;
  let rest: RestClient;

  before(
    async () => {
      cp = await start({ mode: 'apiserver' });
      rest = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), { fieldManager: 'controller-test' });
      await rest.create(CustomResourceDefinitions, {
        metadata: { name: 'widgets.test.opkit.dev' },
        spec: {
          group: 'test.opkit.dev',
          names: { kind: 'Widget', listKind: 'WidgetList', plural: 'widgets', singular: 'widget' },
          scope: 'Namespaced',
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              subresources: { status: {} },
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  properties: {
                    spec: { type: 'object', properties: { size: { type: 'integer' } } },
                    status: { type: 'object', properties: { observed: { type: 'integer' } } },
                  },
                },
              },
            },
          ],
        },
      });
      await eventually(
        'the Widget CRD is served',
        async () => {
          try {
            await rest.list(Widgets, { namespace: 'default' });
            return true;
          } catch {
            return false;
          }
        },
        60_000,
      );
    },
    { timeout: 240_000 },
  );

  after(async () => {
    rest?.close();
    await cp?.stop();
  });

  /** A manager restricted to a fresh namespace, with its own client and metrics. */
  async function harness(ns: string) {
    await rest.create(Namespaces, { metadata: { name: ns } });
    const metrics = new MetricsRegistry();
    const client = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), {
      fieldManager: 'controller-test',
      onRequest: metrics.restClientObserver(),
    });
    const mgr = new Manager({ client, metrics, logger: silentLogger(), namespace: ns });
    const ac = new AbortController();
    let run: Promise<void> | undefined;
    return {
      mgr,
      client,
      metrics,
      start: () => {
        run = mgr.start({ signal: ac.signal, handleSignals: false });
      },
      stop: async () => {
        ac.abort();
        await run;
        client.close();
      },
    };
  }

  test('deleting an owned child ConfigMap reconciles its owner (which recreates it)', async () => {
    const ns = 'owned';
    const h = await harness(ns);
    const reconciled: string[] = [];
    controllerFor(h.mgr, Widgets)
      .named('widget-owner')
      .owns(ConfigMaps)
      .complete(async (req, ctx) => {
        reconciled.push(keyOf(req));
        const w = await h.mgr.cache.get(Widgets, req, { signal: ctx.signal });
        if (!w) return;
        const name = `${req.name}-child`;
        try {
          await h.client.get(ConfigMaps, { namespace: ns, name }, { signal: ctx.signal });
        } catch (err) {
          if (!isNotFound(err)) throw err;
          await h.client.create(
            ConfigMaps,
            {
              metadata: {
                name,
                namespace: ns,
                ownerReferences: [
                  {
                    apiVersion: Widgets.apiVersion,
                    kind: 'Widget',
                    name: w.metadata.name!,
                    uid: w.metadata.uid!,
                    controller: true,
                    blockOwnerDeletion: true,
                  },
                ],
              },
              data: { size: String(w.spec?.size ?? 0) },
            },
            { signal: ctx.signal },
          );
        }
      });
    h.start();
    try {
      await rest.create(Widgets, { metadata: { name: 'w1', namespace: ns }, spec: { size: 1 } });
      // An unrelated ConfigMap and one owned by a non-controller reference do not wake w1.
      const first = await (async () => {
        let cm: KubeObject | undefined;
        await eventually('the child exists', async () => {
          try {
            cm = await rest.get(ConfigMaps, { namespace: ns, name: 'w1-child' });
            return true;
          } catch {
            return false;
          }
        });
        return cm!;
      })();
      await eventually('reconciles settle', () => reconciled.length >= 2); // create of w1, add of its child
      await sleep(300);
      const before = reconciled.length;
      await rest.create(ConfigMaps, { metadata: { name: 'unrelated', namespace: ns } });
      await sleep(500);
      assert.equal(reconciled.length, before, 'an unowned ConfigMap does not reconcile any Widget');

      await rest.delete(ConfigMaps, { namespace: ns, name: 'w1-child' });
      await eventually(
        'the owner is reconciled after its child was deleted',
        () => reconciled.length > before,
      );
      assert.ok(reconciled.slice(before).every((k) => k === `${ns}/w1`));
      await eventually('the child is recreated', async () => {
        try {
          const cm = await rest.get(ConfigMaps, { namespace: ns, name: 'w1-child' });
          return cm.metadata.uid !== first.metadata.uid;
        } catch {
          return false;
        }
      });
    } finally {
      await h.stop();
    }
  });

  test('generationChanged filters status-only updates on a CRD with a status subresource', async () => {
    const ns = 'generation';
    const h = await harness(ns);
    const generations: number[] = [];
    controllerFor(h.mgr, Widgets)
      .named('widget-generation')
      .withPredicates(generationChanged())
      .complete(async (req, ctx) => {
        const w = await h.mgr.cache.get(Widgets, req, { signal: ctx.signal });
        if (w) generations.push(w.metadata.generation ?? 0);
      });
    h.start();
    try {
      await rest.create(Widgets, { metadata: { name: 'w', namespace: ns }, spec: { size: 1 } });
      await eventually('the create is reconciled', () => generations.length === 1);
      assert.deepEqual(generations, [1]);

      const patched = await rest.patchStatus(
        Widgets,
        { namespace: ns, name: 'w' },
        { type: 'merge', body: { status: { observed: 1 } } },
      );
      assert.equal(patched.metadata.generation, 1, 'a status write does not bump the generation');
      await eventually('the cache saw the status update', async () => {
        const w = await h.mgr.cache.get(Widgets, { namespace: ns, name: 'w' });
        return w?.metadata.resourceVersion === patched.metadata.resourceVersion;
      });
      await rest.patch(
        Widgets,
        { namespace: ns, name: 'w' },
        { type: 'merge', body: { metadata: { labels: { a: 'b' } } } },
      );
      await sleep(700);
      assert.deepEqual(generations, [1], 'status-only and metadata-only updates are filtered');

      await rest.patch(Widgets, { namespace: ns, name: 'w' }, { type: 'merge', body: { spec: { size: 2 } } });
      await eventually('the spec change is reconciled', () => generations.length === 2);
      assert.deepEqual(generations, [1, 2]);
    } finally {
      await h.stop();
    }
  });

  test('a throwing reconcile is retried with backoff; a TerminalError is not', async () => {
    const ns = 'retries';
    const h = await harness(ns);
    const times: number[] = [];
    const retrying: Controller = controllerFor(h.mgr, Widgets)
      .named('widget-retry')
      .withPredicates({
        create: (o) => o.metadata.name === 'flaky',
        update: () => false,
        delete: () => false,
      })
      .withOptions({ rateLimiter: new ItemExponentialFailureRateLimiter(100, 10_000) })
      .complete(async () => {
        times.push(Date.now());
        if (times.length <= 3) throw new Error(`transient failure ${times.length}`);
      });
    let terminalCalls = 0;
    controllerFor(h.mgr, Widgets)
      .named('widget-terminal')
      .withPredicates({ create: (o) => o.metadata.name === 'broken', delete: () => false })
      .withOptions({ rateLimiter: new ItemExponentialFailureRateLimiter(50, 10_000) })
      .complete(async () => {
        terminalCalls++;
        throw new TerminalError('spec can never work');
      });
    h.start();
    try {
      await rest.create(Widgets, { metadata: { name: 'flaky', namespace: ns }, spec: { size: 1 } });
      await rest.create(Widgets, { metadata: { name: 'broken', namespace: ns }, spec: { size: 1 } });
      await eventually('the flaky widget succeeds after 3 failures', () => times.length === 4);
      const gaps = times.slice(1).map((t, i) => t - times[i]!);
      // 100, 200, 400 ms of backoff (timers may fire a little late, never early).
      assert.ok(gaps[0]! >= 95 && gaps[1]! >= 195 && gaps[2]! >= 395, `gaps ${gaps}`);
      assert.ok(gaps[1]! > gaps[0]! && gaps[2]! > gaps[1]!, `gaps grow: ${gaps}`);
      assert.equal(retrying.queue.numRequeues(`${ns}/flaky`), 0, 'success forgot the backoff');
      assert.equal(
        await metric(h.metrics, 'controller_runtime_reconcile_errors_total{controller="widget-retry"}'),
        3,
      );
      assert.equal(
        await metric(
          h.metrics,
          'controller_runtime_reconcile_total{controller="widget-retry",result="success"}',
        ),
        1,
      );

      await eventually('the broken widget was reconciled', () => terminalCalls === 1);
      await sleep(1_000);
      assert.equal(terminalCalls, 1, 'a TerminalError is not retried');
      assert.equal(
        await metric(
          h.metrics,
          'controller_runtime_terminal_reconcile_errors_total{controller="widget-terminal"}',
        ),
        1,
      );
      // The next change to the object reconciles it again.
      await rest.patch(
        Widgets,
        { namespace: ns, name: 'broken' },
        { type: 'merge', body: { spec: { size: 2 } } },
      );
      await eventually('a new event reconciles the broken widget again', () => terminalCalls === 2);
      await sleep(500);
      assert.equal(terminalCalls, 2);
      assert.match(
        await h.metrics.text(),
        /^rest_client_requests_total\{code="200",method="GET",host="[^"]+"\} [1-9]/m,
        'the manager client counts its requests',
      );
    } finally {
      await h.stop();
    }
  });
});
