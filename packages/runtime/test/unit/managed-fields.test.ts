import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigMaps } from '../../src/api/builtin.ts';
import { Reflector } from '../../src/cache/reflector.ts';
import { JsonLineDecoder } from '../../src/client/json-lines.ts';
import { withoutManagedFields } from '../../src/client/managed-fields.ts';
import { createClient } from '../../src/client/rest-client.ts';
import { startLocalServer } from './local-http.ts';

const managedFields = [
  {
    manager: 'opkit',
    operation: 'Apply',
    fieldsType: 'FieldsV1',
    fieldsV1: { 'f:data': { 'f:a': {} }, 'f:metadata': { 'f:labels': { 'f:x"y]': {} } } },
  },
];

/**
 * What the cut must be equal to: the event parsed, then object.metadata.managedFields deleted (when it is
 * an array, as the API server sends it; anything else is left for the transform to judge).
 */
function parsedAndDeleted(text: string): unknown {
  const ev = JSON.parse(text) as { object?: { metadata?: Record<string, unknown> } };
  const metadata = ev.object?.metadata;
  if (metadata && Array.isArray(metadata.managedFields)) delete metadata.managedFields;
  return ev;
}

function check(ev: unknown, why: string): string {
  const text = JSON.stringify(ev);
  const cut = withoutManagedFields(text);
  assert.deepEqual(JSON.parse(cut), parsedAndDeleted(text), why);
  return cut;
}

describe('withoutManagedFields', () => {
  it('cuts object.metadata.managedFields wherever it sits in metadata, with one comma', () => {
    const meta = { name: 'a', namespace: 'ns', resourceVersion: '5' };
    const cut = check(
      {
        type: 'ADDED',
        object: { kind: 'ConfigMap', metadata: { ...meta, managedFields }, data: { a: '1' } },
      },
      'last member',
    );
    assert.equal(cut.includes('managedFields'), false);
    check({ type: 'ADDED', object: { metadata: { managedFields, ...meta } } }, 'first member');
    check({ type: 'ADDED', object: { metadata: { name: 'a', managedFields, uid: 'u' } } }, 'middle member');
    assert.equal(
      withoutManagedFields(JSON.stringify({ type: 'ADDED', object: { metadata: { managedFields } } })),
      '{"type":"ADDED","object":{"metadata":{}}}',
      'the only member',
    );
    // Pretty-printed JSON is cut too.
    check(
      JSON.parse(JSON.stringify({ object: { metadata: { ...meta, managedFields } }, type: 'MODIFIED' })),
      'key order',
    );
    const pretty = JSON.stringify(
      { type: 'ADDED', object: { metadata: { ...meta, managedFields } } },
      null,
      2,
    );
    assert.deepEqual(JSON.parse(withoutManagedFields(pretty)), parsedAndDeleted(pretty));
    assert.equal(withoutManagedFields(pretty).includes('managedFields'), false);
  });

  it('touches nothing else named managedFields, and nothing in strings', () => {
    const tricky = {
      type: 'ADDED',
      object: {
        apiVersion: 'myapp.example.com/v1',
        data: { managedFields: '"managedFields":[1,2]', 'x\\': '\\"managedFields\\":[', q: '}]{["\\' },
        metadata: {
          annotations: { note: 'ends with a backslash \\', other: '"managedFields":[]' },
          labels: { managedFields: 'label' },
          managedFields,
          name: 'tricky',
        },
        spec: { managedFields: [{ keep: true }], list: [[], {}, [{}], 1.5e3, true, false, null] },
      },
    };
    const cut = check(tricky, 'only metadata.managedFields goes');
    const parsed = JSON.parse(cut) as typeof tricky;
    assert.deepEqual(parsed.object.spec.managedFields, [{ keep: true }]);
    assert.equal(parsed.object.data.managedFields, '"managedFields":[1,2]');
    assert.deepEqual(parsed.object.metadata.labels, { managedFields: 'label' });
  });

  it('leaves text without it, or that it does not understand, as it is', () => {
    for (const text of [
      '{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}',
      '{"type":"ADDED","object":{"metadata":{"name":"a","managedFields":null}}}',
      '{"type":"ADDED","object":{"metadata":{"name":"a"},"spec":{"managedFields":[1]}}}',
      '{"type":"ADDED","managedFields":[1],"object":{"metadata":{"name":"a"}}}',
      '{"type":"ADDED","object":{"metadata":{"name":"a","managedFields":[{"a":"b"}',
      '{"type":"ADDED","object":{"metadata":{"name":"a,"managedFields":[]}}}',
      '["managedFields",1]',
      '',
      // malformed around it: a trailing comma, a missing comma
      '{"type":"ADDED","object":{"metadata":{"managedFields":[],}}}',
      '{"type":"ADDED","object":{"metadata":{"managedFields":[]"name":"a"}}}',
      '{"type":"ADDED","object":{"metadata":{"name":"a","managedFields":[] 1}}}',
    ]) {
      assert.equal(withoutManagedFields(text), text, text);
    }
  });

  it('equals parsing and deleting, for random events', () => {
    let seed = 42;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const strings = [
      '',
      'a',
      'managedFields',
      '"managedFields":[',
      '\\',
      '\\"',
      '}]',
      '{[',
      'é€😀',
      ',',
      ':',
    ];
    const value = (depth: number): unknown => {
      const r = random();
      if (depth > 3 || r < 0.3) return pick([...strings, 0, -1.5, 2e-7, true, false, null]);
      if (r < 0.6) return Array.from({ length: Math.floor(random() * 4) }, () => value(depth + 1));
      return object(depth + 1);
    };
    const object = (depth: number): Record<string, unknown> => {
      const out: Record<string, unknown> = {};
      for (let i = Math.floor(random() * 5); i > 0; i--)
        out[pick([...strings, 'k', 'metadata', 'object'])] = value(depth);
      return out;
    };
    for (let n = 0; n < 500; n++) {
      const metadata = object(2);
      if (random() < 0.8)
        metadata.managedFields = Array.from({ length: Math.floor(random() * 3) }, () => value(1));
      const ev: Record<string, unknown> = { ...object(1), type: 'ADDED', object: { ...object(1), metadata } };
      const text = JSON.stringify(ev, null, random() < 0.2 ? 1 : undefined);
      assert.deepEqual(JSON.parse(withoutManagedFields(text)), parsedAndDeleted(text), text);
    }
  });

  it('is what the decoder does when told to', () => {
    const line = `${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a', managedFields } } })}\n`;
    const [plain] = new JsonLineDecoder().write(line) as [{ object: { metadata: object } }];
    assert.ok('managedFields' in plain.object.metadata);
    const [cut] = new JsonLineDecoder({ omitManagedFields: true }).write(line) as [
      { object: { metadata: object } },
    ];
    assert.deepEqual(cut.object.metadata, { name: 'a' });
  });
});

describe('informers and managedFields over HTTP', () => {
  it('are not parsed with the default transform, and reach a transform of the caller', async () => {
    const cm = (name: string) => ({
      kind: 'ConfigMap',
      apiVersion: 'v1',
      metadata: { name, namespace: 'ns', resourceVersion: '5', managedFields },
      data: { a: '1' },
    });
    const local = await startLocalServer((req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      if (!req.url?.includes('sendInitialEvents=true')) return;
      res.write(`${JSON.stringify({ type: 'ADDED', object: cm('a') })}\n`);
      res.write(
        `${JSON.stringify({
          type: 'BOOKMARK',
          object: {
            metadata: { resourceVersion: '6', annotations: { 'k8s.io/initial-events-end': 'true' } },
          },
        })}\n`,
      );
    });
    const client = createClient(local.config);
    const ctrl = new AbortController();
    try {
      const plain = new Reflector(client, ConfigMaps, { watchList: true });
      const seen: unknown[] = [];
      const custom = new Reflector(client, ConfigMaps, {
        watchList: true,
        transform: (o) => {
          seen.push(o.metadata.managedFields);
          return o;
        },
      });
      void plain.run(ctrl.signal);
      void custom.run(ctrl.signal);
      assert.equal(await plain.waitForSync(), true);
      assert.equal(await custom.waitForSync(), true);
      assert.equal(plain.store.list()[0]?.metadata.managedFields, undefined);
      assert.deepEqual(plain.store.list()[0]?.data, { a: '1' });
      assert.deepEqual(seen, [managedFields], "the caller's transform gets them");
    } finally {
      ctrl.abort();
      await local.close();
    }
  });
});
