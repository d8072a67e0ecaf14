/**
 * Field managers in the fake client: metadata.managedFields, server-side apply conflicts and force, fields
 * a manager stops applying. The expected values are what a real kube-apiserver (1.34) answered to the same
 * requests; test/integration/fake-vs-apiserver.test.ts runs such scenarios on both and compares.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ConfigMap, ConfigMaps } from '../../src/api/builtin.ts';
import type { KubeObject } from '../../src/api/object.ts';
import { defineResource } from '../../src/api/resource.ts';
import { BadRequestError, ConflictError } from '../../src/client/errors.ts';
import { FakeClient } from '../../src/testing/index.ts';

interface Widget extends KubeObject {
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}
const Widgets = defineResource<Widget>({
  group: 'opkit.dev',
  version: 'v1',
  kind: 'Widget',
  plural: 'widgets',
  namespaced: true,
});
const key = { namespace: 'default', name: 'x' };
const widget = (fields: Omit<Widget, 'metadata'>): Widget => ({
  apiVersion: 'opkit.dev/v1',
  kind: 'Widget',
  metadata: { ...key },
  ...fields,
});
const cmBody = (extra: Partial<ConfigMap>): ConfigMap => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { ...key },
  ...extra,
});

/** manager/operation[/subresource] -> fieldsV1, the part of managedFields that says who owns what. */
function owners(obj: KubeObject | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const m of obj?.metadata.managedFields ?? []) {
    out[`${m.manager}/${m.operation}${m.subresource ? `/${m.subresource}` : ''}`] = m.fieldsV1;
  }
  return out;
}

function conflict(expected: { message: string; causes: Array<{ field: string; message: string }> }) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof ConflictError, `expected ConflictError, got ${String(err)}`);
    assert.equal(err.code, 409);
    assert.equal(err.reason, 'Conflict');
    assert.equal(err.message, expected.message);
    const causes = (err.status.details?.causes ?? [])
      .map((c) => `${c.reason} ${c.field} ${c.message}`)
      .sort();
    const wanted = expected.causes.map((c) => `FieldManagerConflict ${c.field} ${c.message}`).sort();
    assert.deepEqual(causes, wanted);
    return true;
  };
}

describe('FakeClient: field managers', () => {
  it('create and update give their manager the fields they set, as Update entries', async () => {
    const fake = new FakeClient({ fieldManager: 'mgr-u' });
    const created = await fake.create(ConfigMaps, {
      metadata: { ...key, labels: { l: '1' } },
      data: { a: '1' },
    });
    assert.deepEqual(owners(created), {
      'mgr-u/Update': {
        'f:data': { '.': {}, 'f:a': {} },
        'f:metadata': { 'f:labels': { '.': {}, 'f:l': {} } },
      },
    });
    const entry = created.metadata.managedFields?.[0];
    assert.equal(entry?.apiVersion, 'v1');
    assert.equal(entry?.fieldsType, 'FieldsV1');
    assert.match(entry?.time ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const updated = await fake.update(ConfigMaps, { metadata: { ...key }, data: { a: '2', b: '1' } });
    assert.deepEqual(owners(updated), { 'mgr-u/Update': { 'f:data': { '.': {}, 'f:a': {}, 'f:b': {} } } });
  });

  it('apply conflicts with other managers on fields it would change, unless forced', async () => {
    const fake = new FakeClient({ fieldManager: 'mgr-u' });
    await fake.create(ConfigMaps, { metadata: { ...key }, data: { a: '2', b: '1' } });
    const a = await fake.patch(
      ConfigMaps,
      key,
      {
        type: 'apply',
        body: cmBody({ metadata: { ...key, labels: { l: '1', m: '2' } }, data: { a: '2', c: '3' } }),
      },
      { fieldManager: 'mgr-a' },
    );
    assert.deepEqual(owners(a), {
      'mgr-a/Apply': {
        'f:data': { 'f:a': {}, 'f:c': {} },
        'f:metadata': { 'f:labels': { 'f:l': {}, 'f:m': {} } },
      },
      'mgr-u/Update': { 'f:data': { '.': {}, 'f:a': {}, 'f:b': {} } },
    });
    const rv = fake.resourceVersion;
    await assert.rejects(
      fake.patch(
        ConfigMaps,
        key,
        { type: 'apply', body: cmBody({ data: { a: '9', c: '9' } }) },
        { fieldManager: 'mgr-b' },
      ),
      conflict({
        message:
          'Apply failed with 3 conflicts: conflicts with "mgr-a":\n- .data.a\n- .data.c\nconflicts with "mgr-u" using v1:\n- .data.a',
        causes: [
          { field: '.data.a', message: 'conflict with "mgr-u" using v1' },
          { field: '.data.a', message: 'conflict with "mgr-a"' },
          { field: '.data.c', message: 'conflict with "mgr-a"' },
        ],
      }),
    );
    assert.equal(fake.resourceVersion, rv, 'a refused apply changes nothing');

    // The same value is no conflict: both own the field.
    const shared = await fake.patch(
      ConfigMaps,
      key,
      { type: 'apply', body: cmBody({ data: { c: '3' } }) },
      { fieldManager: 'mgr-b' },
    );
    assert.deepEqual(owners(shared)['mgr-b/Apply'], { 'f:data': { 'f:c': {} } });
    assert.deepEqual(owners(shared)['mgr-a/Apply'], {
      'f:data': { 'f:a': {}, 'f:c': {} },
      'f:metadata': { 'f:labels': { 'f:l': {}, 'f:m': {} } },
    });

    // force takes the field from every other manager.
    const forced = await fake.patch(
      ConfigMaps,
      key,
      { type: 'apply', force: true, body: cmBody({ data: { a: '9', c: '3' } }) },
      { fieldManager: 'mgr-b' },
    );
    assert.equal(forced.data?.a, '9');
    assert.deepEqual(owners(forced), {
      'mgr-a/Apply': { 'f:data': { 'f:c': {} }, 'f:metadata': { 'f:labels': { 'f:l': {}, 'f:m': {} } } },
      'mgr-b/Apply': { 'f:data': { 'f:a': {}, 'f:c': {} } },
      'mgr-u/Update': { 'f:data': { '.': {}, 'f:b': {} } },
    });

    // mgr-a stops applying everything: its labels go (no one else owns them), data.c stays (mgr-b's).
    const dropped = await fake.patch(
      ConfigMaps,
      key,
      { type: 'apply', body: cmBody({}) },
      { fieldManager: 'mgr-a' },
    );
    assert.deepEqual(owners(dropped), {
      'mgr-b/Apply': { 'f:data': { 'f:a': {}, 'f:c': {} } },
      'mgr-u/Update': { 'f:data': { '.': {}, 'f:b': {} } },
    });
    assert.equal(dropped.metadata.labels, undefined);
    assert.deepEqual(dropped.data, { a: '9', b: '1', c: '3' });
  });

  it('apply to a custom resource: lists are atomic; an update takes the fields it changes; status is its own subresource', async () => {
    const fake = new FakeClient({ fieldManager: 'mgr-u', statusSubresource: [Widgets] });
    const apply = (manager: string, spec: Record<string, unknown>, force = false) =>
      fake.patch(
        Widgets,
        key,
        {
          type: 'apply',
          force,
          body: widget({ spec }),
        },
        { fieldManager: manager },
      );
    const created = await apply('mgr-a', {
      size: 1,
      items: ['a', 'b'],
      containers: [{ name: 'c1', image: 'i' }],
    });
    assert.deepEqual(owners(created), {
      'mgr-a/Apply': { 'f:spec': { 'f:containers': {}, 'f:items': {}, 'f:size': {} } },
    });
    const updated = await fake.update(Widgets, {
      ...created,
      spec: { ...created.spec, size: 2, extra: { y: 2 } },
    });
    assert.deepEqual(owners(updated), {
      'mgr-a/Apply': { 'f:spec': { 'f:containers': {}, 'f:items': {} } },
      'mgr-u/Update': { 'f:spec': { 'f:extra': { '.': {}, 'f:y': {} }, 'f:size': {} } },
    });
    await assert.rejects(
      apply('mgr-a', { size: 3, items: ['a'] }),
      conflict({
        message: 'Apply failed with 1 conflict: conflict with "mgr-u" using opkit.dev/v1: .spec.size',
        causes: [{ field: '.spec.size', message: 'conflict with "mgr-u" using opkit.dev/v1' }],
      }),
    );
    await assert.rejects(
      apply('mgr-b', { size: 5, items: ['z'] }),
      conflict({
        message:
          'Apply failed with 2 conflicts: conflicts with "mgr-a":\n- .spec.items\nconflicts with "mgr-u" using opkit.dev/v1:\n- .spec.size',
        causes: [
          { field: '.spec.items', message: 'conflict with "mgr-a"' },
          { field: '.spec.size', message: 'conflict with "mgr-u" using opkit.dev/v1' },
        ],
      }),
    );
    const status = await fake.patchStatus(
      Widgets,
      key,
      {
        type: 'apply',
        body: widget({ status: { phase: 'p' } }),
      },
      { fieldManager: 'mgr-b' },
    );
    assert.deepEqual(owners(status)['mgr-b/Apply/status'], { 'f:status': { 'f:phase': {} } });
    // A list is replaced whole by its applier.
    const replaced = await apply('mgr-a', { items: ['q'], containers: [{ name: 'c2' }] });
    assert.deepEqual(replaced.spec, { size: 2, extra: { y: 2 }, items: ['q'], containers: [{ name: 'c2' }] });
  });

  it('an object without managedFields (seeded) belongs to before-first-apply', async () => {
    const fake = new FakeClient({
      objects: [{ resource: ConfigMaps, object: { metadata: { ...key }, data: { a: '1' } } }],
    });
    await assert.rejects(
      fake.patch(ConfigMaps, key, { type: 'apply', body: cmBody({ data: { a: '2' } }) }),
      conflict({
        message: 'Apply failed with 1 conflict: conflict with "before-first-apply" using v1: .data.a',
        causes: [{ field: '.data.a', message: 'conflict with "before-first-apply" using v1' }],
      }),
    );
    const forced = await fake.patch(ConfigMaps, key, {
      type: 'apply',
      force: true,
      body: cmBody({ data: { a: '2' } }),
    });
    assert.deepEqual(owners(forced), {
      'before-first-apply/Update': { 'f:data': {} },
      'opkit/Apply': { 'f:data': { 'f:a': {} } },
    });
  });

  it('refuses an applied configuration that carries managedFields (400), as the API server does', async () => {
    const fake = new FakeClient();
    const created = await fake.patch(ConfigMaps, key, { type: 'apply', body: cmBody({ data: { a: '1' } }) });
    await assert.rejects(
      fake.patch(ConfigMaps, key, { type: 'apply', body: { ...created, data: { a: '2' } } as ConfigMap }),
      (err: unknown) => {
        assert.ok(err instanceof BadRequestError);
        assert.equal(err.message, 'metadata.managedFields must be nil');
        return true;
      },
    );
  });

  it('a no-op apply or update stores nothing', async () => {
    const fake = new FakeClient();
    await fake.patch(ConfigMaps, key, { type: 'apply', body: cmBody({ data: { a: '1' } }) });
    const rv = fake.resourceVersion;
    await fake.patch(ConfigMaps, key, { type: 'apply', body: cmBody({ data: { a: '1' } }) });
    const current = await fake.get(ConfigMaps, key);
    await fake.update(ConfigMaps, current);
    assert.equal(fake.resourceVersion, rv);
  });
});
