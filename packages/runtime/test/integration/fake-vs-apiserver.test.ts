/**
 * The fake client refuses what the API server refuses, and keeps field ownership as it does: the same
 * scenarios run on a FakeClient and on a real kube-apiserver, and their outcomes are compared step by step
 * (status code, reason, message and causes of errors; which manager owns which field after each write;
 * the resulting object).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, start } from '@opkit/controlplane';
import { type ConfigMap, ConfigMaps, CustomResourceDefinitions, Namespaces } from '../../src/api/builtin.ts';
import type { KubeObject } from '../../src/api/object.ts';
import { defineResource } from '../../src/api/resource.ts';
import { ApiError, createClient, loadConfig, NotFoundError } from '../../src/client/index.ts';
import type { Client, Patch } from '../../src/client/types.ts';
import { eventually, FakeClient } from '../../src/testing/index.ts';

interface Widget extends KubeObject {
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}
const Widgets = defineResource<Widget>({
  group: 'fake.opkit.dev',
  version: 'v1',
  kind: 'Widget',
  plural: 'widgets',
  namespaced: true,
});

const NS = 'scenarios';

let cp: ControlPlane;
let real: Client;

before(
  async () => {
    cp = await start({ mode: 'apiserver' });
    const rest = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), { fieldManager: 'setup' });
    real = rest;
    await rest.create(Namespaces, { metadata: { name: NS } });
    await rest.create(CustomResourceDefinitions, {
      metadata: { name: 'widgets.fake.opkit.dev' },
      spec: {
        group: 'fake.opkit.dev',
        names: { kind: 'Widget', plural: 'widgets', singular: 'widget', listKind: 'WidgetList' },
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
                  spec: {
                    type: 'object',
                    properties: {
                      size: { type: 'integer' },
                      items: { type: 'array', items: { type: 'string' } },
                      containers: {
                        type: 'array',
                        items: {
                          type: 'object',
                          properties: { name: { type: 'string' }, image: { type: 'string' } },
                        },
                      },
                      nested: { type: 'object', properties: { x: { type: 'integer' } } },
                      extra: { type: 'object', properties: { y: { type: 'integer' } } },
                    },
                  },
                  status: { type: 'object', properties: { phase: { type: 'string' } } },
                },
              },
            },
          },
        ],
      },
    });
    await rest.waitForServed(Widgets, { timeoutMs: 60_000 });
    // Served can come a moment before the storage takes writes: wait until a create goes through.
    await eventually(
      'the Widget storage to take writes',
      async () => {
        try {
          await rest.create(Widgets, { metadata: { namespace: NS, name: 'warm-up' } });
        } catch (err) {
          if (err instanceof NotFoundError) throw err;
        }
        return true;
      },
      { timeoutMs: 60_000 },
    );
  },
  { timeout: 240_000 },
);

after(async () => {
  await cp?.stop();
});

type Outcome =
  | { step: string; ok: true; owners: Record<string, unknown>; object: unknown }
  | { step: string; code: number; reason: string; message: string; causes: string[] };

/** manager/operation[/subresource] -> fieldsV1: who owns which field (times left out). */
function owners(obj: KubeObject): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const m of obj.metadata.managedFields ?? []) {
    out[`${m.manager}/${m.operation}${m.subresource ? `/${m.subresource}` : ''}`] = m.fieldsV1;
  }
  return out;
}

/** The part of an object a scenario looks at. */
function content(obj: KubeObject): unknown {
  const { apiVersion: _a, kind: _k, metadata, ...rest } = obj as KubeObject & Record<string, unknown>;
  return { labels: metadata.labels, ...rest };
}

async function outcome(step: string, write: () => Promise<KubeObject>): Promise<Outcome> {
  try {
    const obj = await write();
    return { step, ok: true, owners: owners(obj), object: content(obj) };
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    const causes = (err.status.details?.causes ?? []).map((c) => `${c.reason} ${c.field} ${c.message}`);
    return { step, code: err.code, reason: err.reason, message: err.message, causes: causes.sort() };
  }
}

type Step = [label: string, write: (client: Client) => Promise<KubeObject>];

async function run(client: Client, steps: Step[]): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  for (const [label, write] of steps) outcomes.push(await outcome(label, () => write(client)));
  return outcomes;
}

const as = (fieldManager: string) => ({ fieldManager });
const cmKey = { namespace: NS, name: 'cm' };
const cmApply = (body: Partial<ConfigMap>, force = false): Patch => ({
  type: 'apply',
  force,
  body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { ...cmKey }, ...body },
});
const wKey = { namespace: NS, name: 'w' };
const wApply = (body: Omit<Widget, 'metadata'>, force = false): Patch => ({
  type: 'apply',
  force,
  body: { apiVersion: 'fake.opkit.dev/v1', kind: 'Widget', metadata: { ...wKey }, ...body } as Widget,
});

describe('FakeClient and kube-apiserver: the same requests, the same outcomes', () => {
  test('ConfigMap: unconditional update allowed; apply conflicts, shared ownership, force, dropped fields, updates taking fields', async () => {
    const steps: Step[] = [
      [
        'create',
        (c) =>
          c.create(ConfigMaps, { metadata: { ...cmKey, labels: { l: '1' } }, data: { a: '1' } }, as('mgr-u')),
      ],
      [
        'update without resourceVersion',
        (c) => c.update(ConfigMaps, { metadata: { ...cmKey }, data: { a: '2', b: '1' } }, as('mgr-u')),
      ],
      [
        'apply A',
        (c) =>
          c.patch(
            ConfigMaps,
            cmKey,
            cmApply({ metadata: { ...cmKey, labels: { l: '1', m: '2' } }, data: { a: '2', c: '3' } }),
            as('mgr-a'),
          ),
      ],
      [
        'apply B, conflicting',
        (c) => c.patch(ConfigMaps, cmKey, cmApply({ data: { a: '9', c: '9' } }), as('mgr-b')),
      ],
      ['apply B, same value', (c) => c.patch(ConfigMaps, cmKey, cmApply({ data: { c: '3' } }), as('mgr-b'))],
      [
        'apply B, forced',
        (c) => c.patch(ConfigMaps, cmKey, cmApply({ data: { a: '9', c: '3' } }, true), as('mgr-b')),
      ],
      ['apply A, nothing', (c) => c.patch(ConfigMaps, cmKey, cmApply({}), as('mgr-a'))],
      [
        'update C changes c',
        async (c) => {
          const current = await c.get(ConfigMaps, cmKey);
          return c.update(ConfigMaps, { ...current, data: { ...current.data, c: 'C' } }, as('mgr-c'));
        },
      ],
      [
        'apply B, conflicting with an updater',
        (c) => c.patch(ConfigMaps, cmKey, cmApply({ data: { a: '9', c: '3' } }), as('mgr-b')),
      ],
      [
        'apply with managedFields in the body',
        (c) =>
          c.patch(
            ConfigMaps,
            cmKey,
            cmApply({
              metadata: {
                ...cmKey,
                managedFields: [
                  { manager: 'mgr-b', operation: 'Apply', fieldsType: 'FieldsV1', fieldsV1: {} },
                ],
              },
              data: { a: '9' },
            }),
            as('mgr-b'),
          ),
      ],
      [
        'merge patch U removes a',
        (c) => c.patch(ConfigMaps, cmKey, { type: 'merge', body: { data: { a: null } } }, as('mgr-u')),
      ],
    ];
    const fake = await run(new FakeClient(), steps);
    const onServer = await run(real, steps);
    assert.deepEqual(fake, onServer);
  });

  test('custom resource: no unconditional update (422); apply, update, status subresource, atomic lists', async () => {
    const steps: Step[] = [
      [
        'apply A creates',
        (c) =>
          c.patch(
            Widgets,
            wKey,
            wApply({
              spec: {
                size: 1,
                items: ['a', 'b'],
                containers: [{ name: 'c1', image: 'i' }],
                nested: { x: 1 },
              },
            }),
            as('mgr-a'),
          ),
      ],
      [
        'update without resourceVersion',
        (c) => c.update(Widgets, { metadata: { ...wKey }, spec: { size: 2 } }, as('mgr-u')),
      ],
      [
        'updateStatus without resourceVersion',
        (c) => c.updateStatus(Widgets, { metadata: { ...wKey }, status: { phase: 'x' } }, as('mgr-u')),
      ],
      [
        'update U with resourceVersion',
        async (c) => {
          const current = await c.get(Widgets, wKey);
          return c.update(
            Widgets,
            { ...current, spec: { ...current.spec, size: 2, extra: { y: 2 } } },
            as('mgr-u'),
          );
        },
      ],
      [
        'apply A, conflicting with U',
        (c) => c.patch(Widgets, wKey, wApply({ spec: { size: 3, items: ['a'] } }), as('mgr-a')),
      ],
      [
        'apply B, two conflicts',
        (c) => c.patch(Widgets, wKey, wApply({ spec: { size: 5, items: ['z'] } }), as('mgr-b')),
      ],
      [
        'apply B to status',
        (c) => c.patchStatus(Widgets, wKey, wApply({ status: { phase: 'p' } }), as('mgr-b')),
      ],
      [
        'merge patch U',
        (c) => c.patch(Widgets, wKey, { type: 'merge', body: { spec: { size: 7 } } }, as('mgr-u')),
      ],
      [
        'apply A, replacing the lists, dropping nested',
        (c) =>
          c.patch(
            Widgets,
            wKey,
            wApply({ spec: { items: ['q'], containers: [{ name: 'c2' }] } }),
            as('mgr-a'),
          ),
      ],
      [
        'updateStatus U with resourceVersion',
        async (c) => {
          const current = await c.get(Widgets, wKey);
          return c.updateStatus(Widgets, { ...current, status: { phase: 'q' } }, as('mgr-u'));
        },
      ],
      [
        'apply B to status, forced',
        (c) => c.patchStatus(Widgets, wKey, wApply({ status: { phase: 'p' } }, true), as('mgr-b')),
      ],
      [
        'apply A, spec with status (ignored)',
        (c) =>
          c.patch(Widgets, wKey, wApply({ spec: { items: ['q'] }, status: { phase: 'z' } }), as('mgr-a')),
      ],
    ];
    const fake = await run(new FakeClient({ statusSubresource: [Widgets] }), steps);
    const onServer = await run(real, steps);
    assert.deepEqual(fake, onServer);
  });

  test('an object without managedFields belongs to before-first-apply', async () => {
    const key = { namespace: NS, name: 'unmanaged' };
    const object: ConfigMap = { metadata: { ...key }, data: { a: '1' } };
    // On the API server: create, then clear managedFields (a list with one empty entry resets them).
    await real.create(ConfigMaps, object);
    const cleared = await real.patch(ConfigMaps, key, {
      type: 'merge',
      body: { metadata: { managedFields: [{}] } },
    });
    assert.equal(cleared.metadata.managedFields, undefined);
    const fake = new FakeClient({ objects: [{ resource: ConfigMaps, object }] });
    const body: Patch = {
      type: 'apply',
      body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { ...key }, data: { a: '2' } } as ConfigMap,
    };
    const forced: Patch = { ...body, force: true } as Patch;
    const steps: Step[] = [
      ['apply, conflicting', (c) => c.patch(ConfigMaps, key, body, as('mgr-a'))],
      ['apply, forced', (c) => c.patch(ConfigMaps, key, forced, as('mgr-a'))],
    ];
    assert.deepEqual(await run(fake, steps), await run(real, steps));
  });
});
