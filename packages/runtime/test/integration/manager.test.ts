/**
 * The manager against a real kube-apiserver: health probes, readiness gated on cache sync, metrics.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, start } from '@opkit/controlplane';
import { CustomResourceDefinitions } from '../../src/api/builtin.ts';
import type { KubeObject } from '../../src/api/object.ts';
import { defineResource } from '../../src/api/resource.ts';
import { createClient, loadConfig, type RestClient } from '../../src/client/index.ts';
import { LeaseResource } from '../../src/leaderelection/index.ts';
import { silentLogger } from '../../src/log/index.ts';
import { createManager } from '../../src/manager/index.ts';

type Widget = KubeObject & { spec?: { size?: number } };
const Widgets = defineResource<Widget>({
  group: 'test.opkit.dev',
  version: 'v1',
  kind: 'Widget',
  plural: 'widgets',
  namespaced: true,
});

let cp: ControlPlane;
let client: RestClient;

before(
  async () => {
    cp = await start({ mode: 'apiserver' });
    client = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), { fieldManager: 'mgr-test' });
  },
  { timeout: 180_000 },
);

after(async () => {
  client?.close();
  await cp?.stop();
});

async function get(address: string | undefined, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://${address}${path}`);
  return { status: res.status, body: await res.text() };
}

async function until(cond: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('manager probes and metrics', () => {
  test('/readyz is 503 until the caches sync, /healthz 200, /metrics has the standard series', {
    timeout: 60_000,
  }, async () => {
    const mgr = await createManager({
      kubeconfig: cp.kubeconfigPath,
      logger: silentLogger(),
      healthProbeBindAddress: '127.0.0.1:0',
      metricsBindAddress: ':0',
      // Fast informer retries, so that the cache syncs soon after the CRD appears.
      cache: { backoff: { initialMs: 100, maxMs: 300 } },
      leaderElection: { enabled: true, id: 'probe-operator', namespace: 'default' },
    });
    // The informer of a kind the API does not serve yet cannot sync.
    mgr.cache.getInformer(Widgets);
    const ctl = new AbortController();
    const run = mgr.start(ctl.signal);
    try {
      await until(async () => mgr.healthProbeAddress !== undefined, 5_000, 'the probe server');
      assert.match(mgr.metricsAddress ?? '', /^\[::\]:\d+$|^0\.0\.0\.0:\d+$/, 'bound on every interface');
      assert.deepEqual(await get(mgr.healthProbeAddress, '/healthz'), { status: 200, body: 'ok' });
      await new Promise((r) => setTimeout(r, 500));
      const notReady = await get(mgr.healthProbeAddress, '/readyz');
      assert.equal(notReady.status, 503);
      assert.match(notReady.body, /\[-\]cache-sync failed/);
      assert.equal(mgr.isLeader(), false, 'nothing leads before the caches synced');

      await client.create(CustomResourceDefinitions, {
        metadata: { name: 'widgets.test.opkit.dev' },
        spec: {
          group: 'test.opkit.dev',
          names: { kind: 'Widget', plural: 'widgets', singular: 'widget', listKind: 'WidgetList' },
          scope: 'Namespaced',
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  properties: { spec: { type: 'object', properties: { size: { type: 'integer' } } } },
                },
              },
            },
          ],
        },
      });
      await until(
        async () => (await get(mgr.healthProbeAddress, '/readyz')).status === 200,
        30_000,
        'readiness',
      );
      assert.equal((await get(mgr.healthProbeAddress, '/healthz')).status, 200);
      await mgr.elected;

      const metrics = await get(mgr.metricsAddress, '/metrics');
      assert.equal(metrics.status, 200);
      assert.match(metrics.body, /leader_election_master_status\{name="probe-operator"\} 1/);
      assert.match(
        metrics.body,
        /rest_client_requests_total\{code="200",method="GET",host="127\.0\.0\.1:\d+"\} \d+/,
      );
      assert.match(
        metrics.body,
        /rest_client_requests_total\{code="404",method="GET"/,
        'the failed lists count',
      );
    } finally {
      ctl.abort();
      await run;
    }
    const lease = await client.get(LeaseResource, { namespace: 'default', name: 'probe-operator' });
    assert.equal(lease.spec?.holderIdentity, '', 'released on shutdown');
    await assert.rejects(fetch(`http://${mgr.healthProbeAddress}/healthz`), 'the servers are closed');
  });
});
