/** What deploy applies: config/default rendered like kubectl kustomize, with the image and namespace set. */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { renderDeployment } from '../../src/commands/deploy.ts';
import {
  imageName,
  type KubeObject,
  kubectlAvailable,
  renderBuiltin,
  renderKubectl,
  sortForApply,
} from '../../src/kube/render.ts';
import { scaffold, tempDir } from '../helpers.ts';

const key = (o: KubeObject) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;

function deploymentOf(objects: KubeObject[]) {
  return objects.find((o) => o.kind === 'Deployment') as KubeObject & {
    spec: { template: { spec: { containers: Array<{ name: string; image: string }> } } };
  };
}

describe('rendering config/default', () => {
  test('every object of the project, in the manager namespace, the image set', async () => {
    using tmp = tempDir('opkit-render-');
    await scaffold(tmp.dir);
    const objects = renderDeployment(tmp.dir, { image: 'registry.example.com/db-op:v1' });
    assert.deepEqual(objects.map(key).sort(), [
      'ClusterRole//db-op-manager-role',
      'ClusterRoleBinding//db-op-manager-rolebinding',
      'CustomResourceDefinition//databases.myapp.example.com',
      'Deployment/db-op-system/db-op-controller-manager',
      'Namespace//db-op-system',
      'Role/db-op-system/db-op-leader-election-role',
      'RoleBinding/db-op-system/db-op-leader-election-rolebinding',
      'Service/db-op-system/db-op-controller-manager-metrics',
      'ServiceAccount/db-op-system/db-op-controller-manager',
    ]);
    assert.equal(
      deploymentOf(objects).spec.template.spec.containers[0]!.image,
      'registry.example.com/db-op:v1',
    );
    assert.deepEqual(
      sortForApply(objects)
        .slice(0, 2)
        .map((o) => o.kind),
      ['Namespace', 'CustomResourceDefinition'],
    );

    const moved = renderDeployment(tmp.dir, { image: 'x:1', namespace: 'ops' });
    assert.ok(moved.some((o) => o.kind === 'Namespace' && o.metadata.name === 'ops'));
    assert.equal(deploymentOf(moved).metadata.namespace, 'ops');
    const binding = moved.find((o) => o.kind === 'ClusterRoleBinding') as KubeObject & {
      subjects: Array<{ namespace: string }>;
    };
    assert.equal(binding.subjects[0]!.namespace, 'ops');
  });

  test('the same objects as kubectl kustomize', {
    skip: !kubectlAvailable() && 'kubectl is not installed',
  }, async () => {
    using tmp = tempDir('opkit-render-');
    await scaffold(tmp.dir);
    const dir = join(tmp.dir, 'config/default');
    const ours = renderBuiltin(dir).sort((a, b) => key(a).localeCompare(key(b)));
    const theirs = renderKubectl(dir).sort((a, b) => key(a).localeCompare(key(b)));
    assert.deepEqual(ours, theirs);
  });

  test('kustomize images: rules apply; fields opkit does not render are refused (or left to kubectl)', async () => {
    using tmp = tempDir('opkit-render-');
    await scaffold(tmp.dir);
    const manager = join(tmp.dir, 'config/manager/kustomization.yaml');
    writeFileSync(
      manager,
      'resources:\n  - manager.yaml\nimages:\n  - name: controller\n    newName: ghcr.io/me/db-op\n    newTag: "0.2"\n',
    );
    assert.equal(
      deploymentOf(renderBuiltin(join(tmp.dir, 'config/default'))).spec.template.spec.containers[0]!.image,
      'ghcr.io/me/db-op:0.2',
    );
    writeFileSync(
      join(tmp.dir, 'config/default/kustomization.yaml'),
      'namePrefix: x-\nresources:\n  - ../crd\n',
    );
    assert.throws(
      () => renderBuiltin(join(tmp.dir, 'config/default')),
      /config\/default\/kustomization\.yaml|kustomization\.yaml uses "namePrefix"/,
    );
  });

  test('kustomize replicas: set on the named workload like kubectl kustomize; bad rules name the field', async () => {
    using tmp = tempDir('opkit-render-');
    await scaffold(tmp.dir);
    const dir = join(tmp.dir, 'config/default');
    const file = join(dir, 'kustomization.yaml');
    const base = 'namespace: db-op-system\nresources:\n  - ../crd\n  - ../rbac\n  - ../manager\n';
    writeFileSync(file, `${base}replicas:\n  - name: db-op-controller-manager\n    count: 2\n`);
    const ours = renderBuiltin(dir);
    assert.equal((deploymentOf(ours).spec as { replicas?: number }).replicas, 2);
    if (kubectlAvailable()) {
      const sorted = (objects: KubeObject[]) => objects.sort((a, b) => key(a).localeCompare(key(b)));
      assert.deepEqual(sorted(ours), sorted(renderKubectl(dir)));
    }
    // A name that matches no workload is refused, as kustomize refuses it.
    writeFileSync(file, `${base}replicas:\n  - name: other\n    count: 5\n`);
    assert.throws(() => renderBuiltin(dir), /replicas\[0\] names "other", which is no Deployment/);
    if (kubectlAvailable())
      assert.throws(() => renderKubectl(dir), /resource with name other does not match/);
    writeFileSync(file, `${base}replicas:\n  - name: db-op-controller-manager\n    count: two\n`);
    assert.throws(
      () => renderBuiltin(dir),
      /replicas\[0\]\.count must be a whole number of 0 or more, not "two"/,
    );
    writeFileSync(file, `${base}replicas:\n  - count: 2\n`);
    assert.throws(() => renderBuiltin(dir), /replicas\[0\]\.name must be/);
  });

  test('image names', () => {
    assert.equal(imageName('controller:latest'), 'controller');
    assert.equal(imageName('reg:5000/a/b:tag'), 'reg:5000/a/b');
    assert.equal(imageName('reg:5000/a/b'), 'reg:5000/a/b');
    assert.equal(imageName('a@sha256:abc'), 'a');
  });
});
