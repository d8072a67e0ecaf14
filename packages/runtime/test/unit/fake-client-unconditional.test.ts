/**
 * The fake client refuses an update without metadata.resourceVersion of a custom resource, as the API
 * server does (custom resources do not allow unconditional updates); built-in kinds keep allowing it.
 * test/integration/fake-vs-apiserver.test.ts checks the same outcomes against a real kube-apiserver.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigMaps, Deployments } from '../../src/api/builtin.ts';
import type { KubeObject } from '../../src/api/object.ts';
import { defineResource } from '../../src/api/resource.ts';
import { InvalidError } from '../../src/client/errors.ts';
import { FakeClient } from '../../src/testing/index.ts';

interface Widget extends KubeObject {
  spec?: { size?: number };
  status?: { phase?: string };
}
const Widgets = defineResource<Widget>({
  group: 'opkit.dev',
  version: 'v1',
  kind: 'Widget',
  plural: 'widgets',
  namespaced: true,
});
const key = { namespace: 'default', name: 'w' };

function isUnconditionalRefusal(err: unknown): boolean {
  assert.ok(err instanceof InvalidError, `expected InvalidError, got ${String(err)}`);
  assert.equal(err.code, 422);
  assert.equal(err.reason, 'Invalid');
  assert.deepEqual(err.causes, [
    {
      reason: 'FieldValueInvalid',
      message: 'Invalid value: 0: must be specified for an update',
      field: 'metadata.resourceVersion',
    },
  ]);
  assert.equal(
    err.message,
    'widgets.opkit.dev "w" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update',
  );
  return true;
}

describe('FakeClient: unconditional updates', () => {
  it('refuses update and updateStatus of a custom resource without resourceVersion (422), changing nothing', async () => {
    const fake = new FakeClient({ statusSubresource: [Widgets] });
    const created = await fake.create(Widgets, { metadata: { ...key }, spec: { size: 1 } });
    await assert.rejects(
      fake.update(Widgets, { metadata: { ...key }, spec: { size: 2 } }),
      isUnconditionalRefusal,
    );
    await assert.rejects(
      fake.updateStatus(Widgets, { metadata: { ...key }, status: { phase: 'Ready' } }),
      isUnconditionalRefusal,
    );
    assert.deepEqual(fake.getStored(Widgets, key), created);
    assert.equal(fake.resourceVersion, created.metadata.resourceVersion);
  });

  it('accepts them with the current resourceVersion', async () => {
    const fake = new FakeClient({ statusSubresource: [Widgets] });
    const created = await fake.create(Widgets, { metadata: { ...key }, spec: { size: 1 } });
    const updated = await fake.update(Widgets, { ...created, spec: { size: 2 } });
    const withStatus = await fake.updateStatus(Widgets, { ...updated, status: { phase: 'Ready' } });
    assert.equal(withStatus.spec?.size, 2);
    assert.equal(withStatus.status?.phase, 'Ready');
  });

  it('still allows unconditional updates of built-in kinds (ConfigMap, Deployment)', async () => {
    const fake = new FakeClient();
    await fake.create(ConfigMaps, { metadata: { ...key }, data: { a: '1' } });
    const cm = await fake.update(ConfigMaps, { metadata: { ...key }, data: { a: '2' } });
    assert.equal(cm.data?.a, '2');
    await fake.create(Deployments, { metadata: { ...key }, spec: { replicas: 1 } } as never);
    const dep = await fake.update(Deployments, { metadata: { ...key }, spec: { replicas: 2 } } as never);
    assert.equal(dep.spec?.replicas, 2);
  });

  it('does not count patches as unconditional updates', async () => {
    const fake = new FakeClient();
    await fake.create(Widgets, { metadata: { ...key }, spec: { size: 1 } });
    const patched = await fake.patch(Widgets, key, { type: 'merge', body: { spec: { size: 3 } } });
    assert.equal(patched.spec?.size, 3);
  });
});
