/**
 * What a user sees when the API server refuses a Database: every invalid case is sent to a real
 * kube-apiserver (as kubectl would send it, without the client-side checks) and the refusal must name the
 * field and say what was wrong with the value sent.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, start } from '@opkit/controlplane';
import {
  type CustomResourceDefinition,
  CustomResourceDefinitions,
  createClient,
  InvalidError,
  loadConfig,
  Namespaces,
  type RestClient,
  type StatusCause,
} from '@opkit/runtime';
import { parse } from 'yaml';
import { Databases } from '../../src/api/v1/database.ts';
import { CRD_YAML } from './helpers.ts';

const NS = 'validation';
const BASE = { engine: 'postgres', version: '16', storage: '1Gi' };

type Spec = Record<string, unknown>;
const database = (name: string, spec: Spec) => ({
  apiVersion: 'myapp.example.com/v1',
  kind: 'Database',
  metadata: { name, namespace: NS },
  spec: { ...BASE, ...spec },
});

describe('the Database CRD refuses bad input with the field and the value', { timeout: 180_000 }, () => {
  let cp: ControlPlane;
  let client: RestClient;

  before(async () => {
    cp = await start({ mode: 'apiserver' });
    client = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), { fieldManager: 'test' });
    const crd = parse(readFileSync(CRD_YAML, 'utf8')) as CustomResourceDefinition;
    await client.create(CustomResourceDefinitions, crd);
    await client.waitForServed(Databases.resource, { timeoutMs: 60_000 });
    await client.create(Namespaces, { metadata: { name: NS } });
  });
  after(async () => {
    client?.close();
    await cp?.stop();
  });

  /** The causes of the refusal of `send()`; fails when it is accepted or refused otherwise. */
  async function refusal(send: () => Promise<unknown>): Promise<StatusCause[]> {
    try {
      await send();
    } catch (err) {
      assert.ok(err instanceof InvalidError, `expected 422 Invalid, got ${String(err)}`);
      return err.causes;
    }
    assert.fail('the API server accepted it');
  }
  const create = (name: string, spec: Spec) =>
    refusal(() => client.create(Databases.resource, database(name, spec) as never));
  /** Creates `name` with `from`, then refuses the update to `to`. */
  async function update(name: string, from: Spec, to: Spec): Promise<StatusCause[]> {
    await client.create(Databases.resource, database(name, from) as never);
    const current = await client.get(Databases.resource, { namespace: NS, name });
    return refusal(() =>
      client.update(Databases.resource, { ...current, spec: { ...current.spec, ...to } } as never),
    );
  }
  /** No cause is reported without a field or with the rule's type (not the value sent) as the value. */
  function clean(causes: StatusCause[]): void {
    for (const c of causes) {
      assert.notEqual(c.field, '<nil>', `a cause without field path: ${c.message}`);
      assert.doesNotMatch(c.message ?? '', /Invalid value: "(object|string)"/, c.message);
    }
  }
  function only(causes: StatusCause[], field: string, message: RegExp): void {
    clean(causes);
    assert.equal(causes.length, 1, JSON.stringify(causes));
    assert.equal(causes[0]?.field, field);
    assert.match(causes[0]?.message ?? '', message);
  }

  test('a name longer than 52 characters: reported under metadata.name', async () => {
    const name = 'a'.repeat(60);
    only(
      await create(name, {}),
      'metadata.name',
      /Forbidden: a Database name must be a DNS label of at most 52/,
    );
  });

  test('an unsupported version names the engine, the value and the supported ones', async () => {
    only(
      await create('v13', { version: '13' }),
      'spec.version',
      /Forbidden: unsupported postgres version 13: supported postgres versions are 14, 15, 16, 17/,
    );
    only(
      await create('my57', { engine: 'mysql', version: '5.7' }),
      'spec.version',
      /unsupported mysql version 5.7: supported mysql versions are 8.0, 8.4/,
    );
  });

  test('an empty version is the schema error alone', async () => {
    only(await create('empty', { version: '' }), 'spec.version', /should be at least 1 chars long/);
  });

  test('a type error stops at the schema: no CEL rule runs on it', async () => {
    for (const [name, replicas] of [
      ['float', 2.5],
      ['text', '3'],
    ] as const) {
      const causes = await create(name, { replicas });
      assert.equal(causes[0]?.field, 'spec.replicas');
      assert.match(causes[0]?.message ?? '', /must be of type integer/);
      // Besides the schema error, the API server's own scale-subresource check reads spec.replicas as an
      // integer (apiextensions ValidateScaleSpec: ".spec.replicas accessor error") and says it skipped the
      // CEL rules; none of the CRD's rules is evaluated on the wrongly typed object.
      for (const c of causes.slice(1)) {
        assert.match(c.message ?? '', /accessor error|some validation rules were not checked/, c.message);
      }
    }
  });

  test('storage: zero shows the value; shrinking is reported under spec.storage', async () => {
    only(await create('zero', { storage: '0' }), 'spec.storage', /storage 0 must be greater than zero/);
    only(
      await update('shrink', {}, { storage: '500Mi' }),
      'spec.storage',
      /Forbidden: storage may not shrink: volumes can only grow/,
    );
  });

  test('a version downgrade says downgrade, also to an unsupported version', async () => {
    only(
      await update('my-down', { engine: 'mysql', version: '8.4' }, { version: '8.0' }),
      'spec.version',
      /version 8.4 -> 8.0 is a mysql downgrade/,
    );
    const causes = await update('my-57', { engine: 'mysql', version: '8.0' }, { version: '5.7' });
    clean(causes);
    assert.ok(
      causes.some(
        (c) => c.field === 'spec.version' && /8.0 -> 5.7 is a mysql downgrade/.test(c.message ?? ''),
      ),
      JSON.stringify(causes),
    );
    only(
      await update('pg-down', {}, { version: '15' }),
      'spec.version',
      /version 16 -> 15 is a postgres downgrade/,
    );
    only(
      await update('pg-up', { version: '15' }, { version: '16' }),
      'spec.version',
      /version 15 -> 16: postgres major version changes are not done in place/,
    );
  });

  test('immutable fields show the change', async () => {
    only(
      await update('engine', {}, { engine: 'mysql', version: '8.0' }),
      'spec.engine',
      /engine is immutable \(postgres -> mysql\)/,
    );
    only(
      await update('dbname', {}, { databaseName: 'other' }),
      'spec.databaseName',
      /databaseName is immutable \(app -> other\)/,
    );
    only(
      await update('sc', {}, { storageClassName: 'fast' }),
      'spec.storageClassName',
      /storageClassName is immutable \(unset -> fast\)/,
    );
  });

  test('parameters and podLabels: under their field, without the rule type as value', async () => {
    only(
      await create('reserved', { parameters: { port: '1', max_connections: '100' } }),
      'spec.parameters',
      /Forbidden: parameters may not set settings the operator manages for postgres: archive_mode/,
    );
    only(
      await create('badkey', { parameters: { 'bad key!': '1' } }),
      'spec.parameters',
      /Forbidden: parameter names are letters, digits/,
    );
    only(
      await create('labels', { podLabels: { 'app.kubernetes.io/name': 'x', team: 'a' } }),
      'spec.podLabels',
      /Forbidden: podLabels may not set the labels the operator manages/,
    );
  });

  test('synchronousReplicas: less than replicas, postgres only, under its field; failoverDelay bounds', async () => {
    only(
      await create('sync-too-many', { replicas: 3, synchronousReplicas: 3 }),
      'spec.synchronousReplicas',
      /Forbidden: synchronousReplicas must be less than replicas/,
    );
    only(
      await create('sync-mysql', { engine: 'mysql', version: '8.4', replicas: 3, synchronousReplicas: 1 }),
      'spec.synchronousReplicas',
      /Forbidden: synchronousReplicas is only supported for postgres/,
    );
    const negative = await create('delay', { failoverDelay: -1 });
    assert.ok(
      negative.some((c) => c.field === 'spec.failoverDelay'),
      JSON.stringify(negative),
    );
    await client.create(
      Databases.resource,
      database('sync-ok', { replicas: 3, synchronousReplicas: 2, failoverDelay: 0 }) as never,
    );
  });

  test('maxReplicaLag: a quantity over zero, postgres only, under its field', async () => {
    only(
      await create('lag-zero', { maxReplicaLag: '0' }),
      'spec.maxReplicaLag',
      /Forbidden: maxReplicaLag must be greater than zero/,
    );
    only(
      await create('lag-mysql', { engine: 'mysql', version: '8.4', maxReplicaLag: '16Mi' }),
      'spec.maxReplicaLag',
      /Forbidden: maxReplicaLag is only supported for postgres/,
    );
    const bad = await create('lag-bad', { maxReplicaLag: 'lots' });
    assert.ok(
      bad.some((c) => c.field === 'spec.maxReplicaLag'),
      JSON.stringify(bad),
    );
    await client.create(Databases.resource, database('lag-ok', { maxReplicaLag: '128Mi' }) as never);
  });
});
