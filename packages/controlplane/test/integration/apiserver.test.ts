import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, start } from '../../src/index.ts';
import type { KubeClient } from '../../src/kube-client.ts';
import { adminClient, eventually } from './helpers.ts';

describe('apiserver mode', () => {
  let cp: ControlPlane;
  let client: KubeClient;
  before(async () => {
    cp = await start({ mode: 'apiserver' });
    client = adminClient(cp);
  });
  after(async () => {
    client?.close();
    await cp?.stop();
  });

  test('serves the version it was built from', async () => {
    const version = await client.json<{ gitVersion: string }>('GET', '/version');
    assert.match(version.gitVersion, /^v1\.\d+\.\d+$/);
  });

  test('create, get, list and watch a ConfigMap', async () => {
    const path = '/api/v1/namespaces/default/configmaps';
    const list0 = await client.json<{ metadata: { resourceVersion: string } }>('GET', path);
    const seen: Array<{ type: string; name: string; value?: string }> = [];
    const abort = new AbortController();
    const watching = client.watch(
      `${path}?watch=1&resourceVersion=${list0.metadata.resourceVersion}`,
      (e) => {
        const o = e.object as { metadata: { name: string }; data?: { k?: string } };
        seen.push({ type: e.type, name: o.metadata.name, value: o.data?.k });
      },
      abort.signal,
    );
    const created = await client.json<{ metadata: { uid: string } }>('POST', path, {
      metadata: { name: 'cm1' },
      data: { k: 'v1' },
    });
    assert.ok(created.metadata.uid);
    const got = await client.json<{ data: { k: string } }>('GET', `${path}/cm1`);
    assert.equal(got.data.k, 'v1');
    await client.json('PATCH', `${path}/cm1`, { data: { k: 'v2' } }, 'application/merge-patch+json');
    const list = await client.json<{ items: Array<{ metadata: { name: string } }> }>('GET', path);
    assert.deepEqual(
      list.items.map((i) => i.metadata.name).filter((n) => n === 'cm1'),
      ['cm1'],
    );
    await client.json('DELETE', `${path}/cm1`);
    await eventually('three watch events', async () => seen.length >= 3);
    abort.abort();
    await watching;
    assert.deepEqual(
      seen.filter((e) => e.name === 'cm1'),
      [
        { type: 'ADDED', name: 'cm1', value: 'v1' },
        { type: 'MODIFIED', name: 'cm1', value: 'v2' },
        { type: 'DELETED', name: 'cm1', value: 'v2' },
      ],
    );
  });

  test('a CustomResourceDefinition gets served', async () => {
    await client.json('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
      metadata: { name: 'widgets.example.com' },
      spec: {
        group: 'example.com',
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
                properties: {
                  spec: { type: 'object', properties: { size: { type: 'integer', maximum: 10 } } },
                },
              },
            },
          },
        ],
      },
    });
    const path = '/apis/example.com/v1/namespaces/default/widgets';
    await eventually(
      'the Widget API to be served',
      async () => (await client.raw('GET', path)).code === 200,
      30_000,
    );
    await client.json('POST', path, {
      apiVersion: 'example.com/v1',
      kind: 'Widget',
      metadata: { name: 'w' },
      spec: { size: 3 },
    });
    const tooBig = await client.raw('POST', path, {
      apiVersion: 'example.com/v1',
      kind: 'Widget',
      metadata: { name: 'w2' },
      spec: { size: 11 },
    });
    assert.equal(tooBig.code, 422);
    assert.match(tooBig.text, /spec\.size/);
  });

  test('restartApiServer keeps etcd data', async () => {
    const path = '/api/v1/namespaces/default/configmaps';
    await client.json('POST', path, { metadata: { name: 'survivor' }, data: { a: 'b' } });
    await cp.restartApiServer();
    const got = await client.json<{ data: { a: string } }>('GET', `${path}/survivor`);
    assert.equal(got.data.a, 'b');
  });
});

describe('etcd compaction', () => {
  test('a watch from a compacted resourceVersion gets 410 Gone', async () => {
    // The watch cache would keep serving old versions from memory; without it, reads hit etcd.
    await using cp = await start({ mode: 'apiserver', apiServerArgs: ['--watch-cache=false'] });
    const client = adminClient(cp);
    try {
      const path = '/api/v1/namespaces/default/configmaps';
      const created = await client.json<{ metadata: { resourceVersion: string } }>('POST', path, {
        metadata: { name: 'before-compaction' },
      });
      for (let i = 0; i < 3; i++) await client.json('POST', path, { metadata: { name: `churn-${i}` } });
      await cp.compact();
      const codes: number[] = [];
      const abort = new AbortController();
      await client.watch(
        `${path}?watch=1&resourceVersion=${created.metadata.resourceVersion}`,
        (e) => {
          if (e.type === 'ERROR') codes.push((e.object as { code: number }).code);
          abort.abort();
        },
        abort.signal,
      );
      assert.deepEqual(codes, [410]);
    } finally {
      client.close();
    }
  });
});
