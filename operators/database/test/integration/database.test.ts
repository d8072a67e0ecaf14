/**
 * The Database controller against a real cluster (started by @opkit/controlplane in cluster mode: kwok
 * nodes make pods Running and Ready), with the CRD opkit generate wrote: the API server's validation and
 * defaulting apply. What the scaffold's integration test checks, for the real Database; lifecycle,
 * deletion and restart test the rest.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createManager, findCondition, InvalidError, type Manager } from '@opkit/runtime';
import { Databases } from '../../src/api/v1/database.ts';
import { setupDatabaseController } from '../../src/controllers/database/controller.ts';
import { type Cluster, createNamespace, sample, startCluster, testLogger, waitForPhase } from './helpers.ts';

const NS = 'sample';

describe('Database controller against a real API server', { timeout: 300_000 }, () => {
  let cluster: Cluster;
  let mgr: Manager;
  const stop = new AbortController();
  let running: Promise<void> | undefined;

  before(async () => {
    cluster = await startCluster();
    await createNamespace(cluster.client, NS);
    mgr = await createManager({ kubeconfig: cluster.kubeconfig, logger: testLogger('manager') });
    setupDatabaseController(mgr);
    running = mgr.start({ signal: stop.signal });
  });

  after(async () => {
    stop.abort();
    await running;
    await cluster?.stop();
  });

  test('the sample gets its defaults and becomes Running', async () => {
    const db = sample(NS);
    const name = db.metadata.name ?? '';
    await cluster.client.create(Databases.resource, db);
    const ready = await waitForPhase(cluster.client, NS, name, 'Running');
    assert.equal(ready.spec.deletionPolicy, 'Retain', 'the schema default applies');
    assert.equal(ready.spec.databaseName, 'app');
    assert.equal(ready.status?.readyReplicas, ready.spec.replicas);
    assert.equal(findCondition(ready.status?.conditions, 'Ready')?.status, 'True');
  });

  test('the API server rejects what the schema forbids', async () => {
    await assert.rejects(
      cluster.client.create(Databases.resource, sample(NS, 'invalid', { replicas: 6 })),
      (err: unknown) => err instanceof InvalidError && /spec\.replicas/.test(err.message),
    );
  });
});
