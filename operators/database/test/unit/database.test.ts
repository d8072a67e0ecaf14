/**
 * The Database controller against the FakeClient, wired as src/main.ts wires it (createManager +
 * setupDatabaseController): no cluster, well under a second. The sample gets its children and a status,
 * is Running once its pods are Ready, a reconcile with nothing to do writes nothing, and every request
 * the controller makes is allowed by its `rbac` export, from which opkit generate writes
 * config/rbac/role.yaml.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { RbacRule } from '@opkit/cli/rbac';
import {
  ConfigMaps,
  createManager,
  findCondition,
  type KubeObject,
  type Manager,
  type PersistentVolumeClaim,
  PersistentVolumeClaims,
  type Pod,
  PodDisruptionBudgets,
  Pods,
  Secrets,
  Services,
  type StatefulSet,
  StatefulSets,
  silentLogger,
} from '@opkit/runtime';
import { type FakeAction, FakeClient } from '@opkit/runtime/testing';
import { parse } from 'yaml';
import { type Database, Databases } from '../../src/api/v1/database.ts';
import { CONTROLLER_NAME, rbac, setupDatabaseController } from '../../src/controllers/database/controller.ts';

const NS = 'default';
const SAMPLE = new URL('../../config/samples/myapp_v1_database.yaml', import.meta.url);

type Maybe<T> = T | undefined | false;

async function until<T>(
  what: string,
  check: () => Maybe<T> | Promise<Maybe<T>>,
  timeoutMs = 5_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The RBAC verb and `resource[/subresource]` a FakeClient request needs. */
function permission(a: FakeAction): { group: string; resource: string; verb: string } {
  const status = a.verb === 'patchStatus' || a.verb === 'updateStatus';
  const verb = a.verb === 'patchStatus' ? 'patch' : a.verb === 'updateStatus' ? 'update' : a.verb;
  return { group: a.resource.group, resource: `${a.resource.plural}${status ? '/status' : ''}`, verb };
}

function allows(rules: readonly RbacRule[], want: { group: string; resource: string; verb: string }) {
  return rules.some((r) => {
    const verbs: readonly string[] = r.verbs;
    if (!verbs.includes(want.verb)) return false;
    if ('resource' in r) {
      const resource = r.subresource ? `${r.resource.plural}/${r.subresource}` : r.resource.plural;
      return r.resource.group === want.group && resource === want.resource;
    }
    return r.apiGroups.includes(want.group) && r.resources.includes(want.resource);
  });
}

/** The sample as the API server stores it (the CRD's defaults applied: the FakeClient does not apply them). */
const sample = parse(readFileSync(SAMPLE, 'utf8')) as Database;
sample.metadata.namespace = NS;
const name = sample.metadata.name ?? '';

describe('the Database controller (FakeClient)', () => {
  // Seeded, not created: every request the client records is then the controller's.
  const client = new FakeClient({
    objects: [{ resource: Databases.resource, object: Databases.applyDefaults(sample) as Database }],
    statusSubresource: [Databases.resource],
  });
  const stop = new AbortController();
  let mgr: Manager;
  let running: Promise<void>;
  const key = () => ({ namespace: NS, name });
  const db = () => client.getStored(Databases.resource, key());

  before(async () => {
    mgr = await createManager({ client, logger: silentLogger() });
    setupDatabaseController(mgr);
    running = mgr.start({ signal: stop.signal });
  });

  after(async () => {
    stop.abort();
    await running;
  });

  /** What the StatefulSet controller and the kubelets would do: every pod Running and Ready. */
  function simulateReady(): void {
    const sts = client.getStored(StatefulSets, key()) as StatefulSet;
    const replicas = sts.spec?.replicas ?? 1;
    client.setStored(StatefulSets, {
      ...sts,
      status: {
        replicas,
        readyReplicas: replicas,
        currentReplicas: replicas,
        updatedReplicas: replicas,
        availableReplicas: replicas,
        observedGeneration: sts.metadata.generation,
        currentRevision: `${name}-1`,
        updateRevision: `${name}-1`,
      },
    });
    const labels = sts.spec?.template.metadata?.labels ?? {};
    const storage = String(db()?.spec.storage);
    for (let i = 0; i < replicas; i++) {
      client.setStored(Pods, {
        metadata: { name: `${name}-${i}`, namespace: NS, labels },
        spec: { containers: [] },
        status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
      } as Pod);
      client.setStored(PersistentVolumeClaims, {
        metadata: { name: `data-${name}-${i}`, namespace: NS, labels: sts.spec?.selector.matchLabels ?? {} },
        spec: { resources: { requests: { storage } } },
        status: { phase: 'Bound', capacity: { storage } },
      } as PersistentVolumeClaim);
    }
  }

  async function reconciles(): Promise<number> {
    const text = await mgr.metrics.text();
    const line = new RegExp(
      `^controller_runtime_reconcile_total\\{controller="${CONTROLLER_NAME}",result="success"\\} (\\d+)$`,
      'm',
    );
    return Number(line.exec(text)?.[1] ?? 0);
  }

  test('the sample gets its children, owned by it, and a Provisioning status', async () => {
    const provisioning = await until('the Provisioning status', () => {
      const got = db();
      return (
        got?.status?.phase === 'Provisioning' &&
        got.status.observedGeneration === got.metadata.generation &&
        got
      );
    });
    assert.equal(findCondition(provisioning.status?.conditions, 'Ready')?.status, 'False');
    const children: Array<KubeObject | undefined> = [
      client.getStored(StatefulSets, key()),
      client.getStored(Services, key()),
      client.getStored(Services, { namespace: NS, name: `${name}-headless` }),
      client.getStored(ConfigMaps, { namespace: NS, name: `${name}-config` }),
      client.getStored(PodDisruptionBudgets, key()),
    ];
    for (const child of children) {
      assert.ok(child, 'created');
      const ref = child.metadata.ownerReferences?.[0];
      assert.equal(ref?.uid, provisioning.metadata.uid);
      assert.equal(ref?.controller, true);
      // Why rbac grants update on databases/finalizers: the API server checks it for blockOwnerDeletion.
      assert.equal(ref?.blockOwnerDeletion, true);
    }
    // deletionPolicy Retain (the sample's default): the Secret stays with the data, so it has no owner.
    const secret = client.getStored(Secrets, { namespace: NS, name: `${name}-credentials` });
    assert.ok(secret, 'created');
    assert.equal(secret.metadata.ownerReferences, undefined);
  });

  test('Running once the pods are Ready; then a reconcile with nothing to do writes nothing', async () => {
    simulateReady();
    const ready = await until('the Running status', () => {
      const got = db();
      return got?.status?.phase === 'Running' && got;
    });
    assert.equal(findCondition(ready.status?.conditions, 'Ready')?.status, 'True');
    assert.equal(ready.status?.readyReplicas, ready.spec.replicas);

    await new Promise((resolve) => setTimeout(resolve, 200)); // the status write's own reconcile
    const before = await reconciles();
    const writes = client.writes().length;
    const sts = client.getStored(StatefulSets, key()) as StatefulSet;
    client.setStored(StatefulSets, sts); // an unchanged child: its owner is reconciled again
    await until('another reconcile', async () => (await reconciles()) > before);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(client.writes().slice(writes), []);
  });

  test('a key deleted from the Secret (which no ownerReference ties to the Database) is put back', async () => {
    const skey = { namespace: NS, name: `${name}-credentials` };
    const secret = client.getStored(Secrets, skey);
    assert.ok(secret?.data?.['app-password']);
    const { 'app-password': _gone, ...rest } = secret.data;
    client.setStored(Secrets, { ...secret, data: rest });
    const back = await until('app-password added back', () => {
      const s = client.getStored(Secrets, skey);
      return s?.data?.['app-password'] !== undefined && s;
    });
    for (const [k, v] of Object.entries(rest)) assert.equal(back.data?.[k], v, `${k} untouched`);
  });

  test('every request it made is allowed by its rbac export (config/rbac/role.yaml)', () => {
    const needed = new Map<string, ReturnType<typeof permission>>();
    for (const action of client.actions()) {
      const p = permission(action);
      needed.set(`${p.group}|${p.resource}|${p.verb}`, p);
    }
    assert.ok(needed.size > 10, 'it made requests');
    for (const [what, p] of needed) assert.ok(allows(rbac, p), `rbac does not allow ${what}`);
    assert.ok(allows(rbac, { group: Databases.group, resource: 'databases/finalizers', verb: 'update' }));
    for (const rule of rbac) {
      const text = JSON.stringify(rule);
      assert.doesNotMatch(text, /\*/, 'no wildcards');
    }
  });
});
