/**
 * The Database CRD generated from src/api/v1/database.ts: names, subresources, printer columns, the
 * schema's defaults and constraints, and the CEL rules (generated from SUPPORTED_VERSIONS). The rules were
 * also checked against a real kube-apiserver 1.34 (accepted, compiled, enforced).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { JSONSchemaProps, ValidationRule } from '@opkit/runtime';
import {
  Databases,
  OPERATOR_LABELS,
  RESERVED_PARAMETERS,
  SUPPORTED_VERSIONS,
  supportedVersionRule,
  VERSION_UPGRADES,
  versionTransitionRules,
} from '../../src/api/v1/database.ts';
import { database } from './fixtures.ts';

const crd = Databases.crd();
const version = crd.spec.versions[0];
const schema = version?.schema.openAPIV3Schema as JSONSchemaProps;
const spec = schema.properties?.spec as JSONSchemaProps;
const status = schema.properties?.status as JSONSchemaProps;
const prop = (s: JSONSchemaProps, name: string) => s.properties?.[name] as JSONSchemaProps;
const rules = (s: JSONSchemaProps | undefined): ValidationRule[] => s?.['x-kubernetes-validations'] ?? [];

describe('Database CRD', () => {
  test('names, scope and version', () => {
    assert.equal(crd.metadata.name, 'databases.myapp.example.com');
    assert.equal(crd.spec.group, 'myapp.example.com');
    assert.equal(crd.spec.scope, 'Namespaced');
    assert.deepEqual(crd.spec.names, {
      kind: 'Database',
      listKind: 'DatabaseList',
      plural: 'databases',
      singular: 'database',
      shortNames: ['db'],
    });
    assert.equal(crd.spec.versions.length, 1);
    assert.equal(version?.name, 'v1');
    assert.equal(version?.served, true);
    assert.equal(version?.storage, true);
    assert.equal(Databases.apiVersion, 'myapp.example.com/v1');
  });

  test('status and scale subresources', () => {
    assert.deepEqual(version?.subresources, {
      status: {},
      scale: {
        specReplicasPath: '.spec.replicas',
        statusReplicasPath: '.status.readyReplicas',
        labelSelectorPath: '.status.selector',
      },
    });
  });

  test('printer columns Engine, Version, Replicas, Ready, Phase, Primary, Timeline, Age', () => {
    const cols = version?.additionalPrinterColumns ?? [];
    const shown = cols.filter((c) => !c.priority).map((c) => [c.name, c.jsonPath, c.type]);
    assert.deepEqual(shown, [
      ['Engine', '.spec.engine', 'string'],
      ['Version', '.spec.version', 'string'],
      ['Replicas', '.spec.replicas', 'integer'],
      ['Ready', '.status.readyReplicas', 'integer'],
      ['Phase', '.status.phase', 'string'],
      ['Primary', '.status.currentPrimary', 'string'],
      ['Timeline', '.status.timeline', 'integer'],
      ['Age', '.metadata.creationTimestamp', 'date'],
    ]);
    const wide = cols.filter((c) => c.priority === 1).map((c) => [c.name, c.jsonPath, c.type]);
    assert.deepEqual(wide, [
      ['Replication', '.status.replicationMode', 'string'],
      ['Message', '.status.conditions[?(@.type=="Ready")].message', 'string'],
    ]);
  });

  test('spec: required fields, enums, defaults and bounds', () => {
    assert.deepEqual(spec.required?.sort(), ['engine', 'storage', 'version']);
    assert.deepEqual(prop(spec, 'engine').enum, ['mysql', 'postgres']);
    const replicas = prop(spec, 'replicas');
    assert.equal(replicas.type, 'integer');
    assert.equal(replicas.minimum, 1);
    assert.equal(replicas.maximum, 5);
    assert.equal(replicas.default, 1);
    assert.deepEqual(prop(spec, 'deletionPolicy').enum, ['Retain', 'Delete']);
    assert.equal(prop(spec, 'deletionPolicy').default, 'Retain');
    assert.deepEqual(prop(spec, 'serviceType').enum, ['ClusterIP', 'NodePort', 'LoadBalancer']);
    assert.equal(prop(spec, 'serviceType').default, 'ClusterIP');
    assert.equal(prop(spec, 'storage')['x-kubernetes-int-or-string'], true);
    assert.ok(prop(spec, 'storage').pattern);
    assert.equal(prop(spec, 'storageClassName').type, 'string');
    assert.ok(prop(prop(spec, 'resources'), 'limits'));
    assert.equal(prop(spec, 'parameters').type, 'object');
    assert.equal(prop(spec, 'podAnnotations').type, 'object');
    assert.equal(prop(spec, 'podLabels').type, 'object');
    assert.equal(prop(spec, 'databaseName').default, 'app');
    assert.equal(prop(spec, 'username').default, 'app');
  });

  test('status: phase, replicas, primary, endpoints, secret, generation, conditions, selector', () => {
    assert.deepEqual(prop(status, 'phase').enum, [
      'Pending',
      'Provisioning',
      'Running',
      'Updating',
      'Degraded',
      'Failed',
      'Deleting',
    ]);
    for (const f of ['replicas', 'readyReplicas', 'observedGeneration'])
      assert.equal(prop(status, f).type, 'integer', f);
    for (const f of ['currentPrimary', 'secretName', 'selector'])
      assert.equal(prop(status, f).type, 'string', f);
    const ep = prop(status, 'endpoints');
    assert.deepEqual(ep.required?.sort(), ['port', 'readWrite']);
    assert.equal(prop(ep, 'readOnly').type, 'string');
    const conditions = prop(status, 'conditions');
    assert.equal(conditions['x-kubernetes-list-type'], 'map');
    assert.deepEqual(conditions['x-kubernetes-list-map-keys'], ['type']);
    assert.equal(status.required, undefined);
  });

  test('engine is immutable', () => {
    const [r, ...rest] = rules(prop(spec, 'engine'));
    assert.deepEqual(rest, []);
    assert.equal(r?.rule, 'self == oldSelf');
    assert.equal(r?.reason, 'FieldValueForbidden');
    assert.match(r?.messageExpression ?? '', /engine is immutable .*create a new Database to change engines/);
  });

  test('storage may not shrink (quantity CEL library) and must be positive', () => {
    const r = rules(prop(spec, 'storage'));
    const shrink = r.find((x) => x.rule.includes('oldSelf'));
    assert.ok(shrink);
    assert.match(shrink.rule, /quantity\(string\(self\)\)\.compareTo\(quantity\(string\(oldSelf\)\)\) >= 0/);
    assert.match(shrink.message ?? '', /may not shrink/);
    assert.ok(r.some((x) => /isGreaterThan\(quantity\('0'\)\)/.test(x.rule)));
  });

  test('the version rule is generated from SUPPORTED_VERSIONS', () => {
    const r = rules(spec).find((x) => x.fieldPath === '.version' && !x.rule.includes('oldSelf'));
    assert.deepEqual(r, supportedVersionRule());
    for (const [engine, versions] of Object.entries(SUPPORTED_VERSIONS)) {
      assert.ok(
        r?.rule.includes(
          `(self.engine == '${engine}' && self.version in [${versions.map((v) => `'${v}'`).join(', ')}])`,
        ),
      );
    }
    assert.deepEqual(SUPPORTED_VERSIONS, { mysql: ['8.0', '8.4'], postgres: ['14', '15', '16', '17'] });
  });

  test('version transitions: postgres majors never change in place; mysql only upgrades, one step', () => {
    const transitions = rules(spec).filter((x) => x.fieldPath === '.version' && x.rule.includes('oldSelf'));
    assert.deepEqual(transitions, versionTransitionRules());
    assert.equal(VERSION_UPGRADES.postgres, 'never');
    for (const t of transitions) assert.equal(t.reason, 'FieldValueForbidden');
    const [down] = transitions;
    assert.match(down?.rule ?? '', /^self\.engine != oldSelf\.engine \|\| !\(self\.version\.matches/);
    assert.match(down?.messageExpression ?? '', /downgrade: ' \+ 'downgrades are not supported/);
    const pg = transitions.filter((x) => x.rule.includes("'postgres'"));
    assert.equal(pg.length, 1);
    assert.ok(
      pg[0]?.rule.startsWith(
        "self.engine != 'postgres' || oldSelf.engine != 'postgres' || self.version == oldSelf.version || ",
      ),
      "a postgres downgrade is the downgrade rule's",
    );
    assert.match(pg[0]?.messageExpression ?? '', /postgres major version changes are not done in place/);
    const my = transitions.filter((x) => x.rule.includes("'mysql'"));
    assert.equal(my.length, 1);
    assert.match(my[0]?.messageExpression ?? '', /one release at a time \(8\.0 -> 8\.4\)/);
    assert.match(my[0]?.rule ?? '', /\[self\.version\] <= \{'8\.0': 0, '8\.4': 1\}\[oldSelf\.version\] \+ 1/);
  });

  test('init-time fields and the storage class are immutable', () => {
    const byField = (f: string) => rules(spec).find((x) => x.fieldPath === f);
    assert.equal(byField('.databaseName')?.rule, 'self.databaseName == oldSelf.databaseName');
    assert.equal(byField('.username')?.rule, 'self.username == oldSelf.username');
    assert.match(
      byField('.storageClassName')?.rule ?? '',
      /has\(self\.storageClassName\) == has\(oldSelf\.storageClassName\)/,
    );
  });

  test('parameters may not set the settings the operator manages; podLabels not its labels', () => {
    const r = rules(spec).find((x) => x.fieldPath === '.parameters');
    for (const key of [...RESERVED_PARAMETERS.mysql, ...RESERVED_PARAMETERS.postgres]) {
      assert.ok(r?.rule.includes(`'${key}'`), key);
    }
    assert.ok(RESERVED_PARAMETERS.mysql.includes('server_id'));
    assert.ok(RESERVED_PARAMETERS.postgres.includes('wal_level'));
    const labels = rules(prop(spec, 'podLabels'));
    for (const key of OPERATOR_LABELS) assert.ok(labels[0]?.rule.includes(`'${key}'`), key);
  });

  test('the object rule limits names to DNS labels of at most 52 characters', () => {
    const r = rules(schema);
    assert.equal(r.length, 1);
    assert.match(r[0]?.rule ?? '', /self\.metadata\.name\.size\(\) <= 52/);
  });

  test('client-side validation and defaulting match the schema', () => {
    const ok = database('postgres');
    assert.deepEqual(Databases.validate(ok), []);
    const defaulted = Databases.applyDefaults(ok);
    assert.equal(defaulted.spec.replicas, 1);
    assert.equal(defaulted.spec.deletionPolicy, 'Retain');
    assert.equal(defaulted.spec.serviceType, 'ClusterIP');
    assert.equal(defaulted.spec.databaseName, 'app');
    const bad = Databases.validate({
      ...ok,
      spec: { engine: 'oracle', version: '19', storage: 'lots', replicas: 9 },
    });
    const paths = bad.map((e) => e.path).sort();
    assert.deepEqual(paths, ['spec.engine', 'spec.replicas', 'spec.storage']);
    const missing = Databases.validate({ ...ok, spec: {} });
    assert.deepEqual(missing.map((e) => e.path).sort(), ['spec.engine', 'spec.storage', 'spec.version']);
  });
});
