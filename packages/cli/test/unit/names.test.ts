/** Name validation: what create api and init accept, and the messages for what they don't. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  pluralize,
  pluralizeKind,
  suggestLabel,
  toPascalCase,
  validateDnsLabel,
  validateDomain,
  validateGroup,
  validateKind,
  validateVersion,
} from '../../src/names.ts';
import { opkit, tempDir } from '../helpers.ts';

describe('group (DNS-1123 label)', () => {
  test('accepts lower-case labels', () => {
    for (const g of ['myapp', 'my-app', 'a', 'app2', '0x', 'a'.repeat(63)])
      assert.equal(validateGroup(g, 'example.com'), undefined, g);
  });
  test('rejects the rest and says why, with a suggestion', () => {
    assert.match(validateGroup('MyApp', 'example.com')!, /not a DNS-1123 label.*e\.g\. "myapp"/);
    assert.match(validateGroup('my_app', 'example.com')!, /e\.g\. "my-app"/);
    assert.match(validateGroup('-app', 'example.com')!, /starting and ending with a letter or digit/);
    assert.match(validateGroup('app-', 'example.com')!, /not a DNS-1123 label/);
    assert.match(validateGroup('', 'example.com')!, /must not be empty/);
    assert.match(validateGroup('a'.repeat(64), 'example.com')!, /64 characters long; at most 63/);
  });
  test('a dotted group is refused with a hint that the domain is appended', () => {
    assert.match(
      validateGroup('myapp.example.com', 'example.com')!,
      /the domain \(example\.com\) is appended for you/,
    );
  });
  test('the full group must fit 253 characters', () => {
    const domain = Array.from({ length: 4 }, () => 'd'.repeat(62)).join('.');
    assert.match(validateGroup('a'.repeat(10), domain)!, /longer than 253/);
  });
});

describe('version', () => {
  test('accepts v1, v1beta1, v2alpha3, v10', () => {
    for (const v of ['v1', 'v2', 'v10', 'v1beta1', 'v1alpha1', 'v2alpha3', 'v3beta12'])
      assert.equal(validateVersion(v), undefined, v);
  });
  test('rejects anything else with the expected forms', () => {
    for (const v of ['1', 'V1', 'v0', 'v01', 'v1beta', 'v1beta0', 'v1gamma1', 'v1-beta1', 'version1', '']) {
      assert.match(
        validateVersion(v)!,
        /is not a Kubernetes API version: use v<N>, v<N>alpha<M> or v<N>beta<M>.*"v1beta1"/,
        v,
      );
    }
  });
});

describe('kind (PascalCase)', () => {
  test('accepts PascalCase', () => {
    for (const k of ['Database', 'DB', 'MySQLCluster', 'Backup2'])
      assert.equal(validateKind(k), undefined, k);
  });
  test('rejects the rest and suggests the PascalCase form', () => {
    assert.match(validateKind('database')!, /not PascalCase.*e\.g\. "Database"/);
    assert.match(validateKind('my-database')!, /e\.g\. "MyDatabase"/);
    assert.match(validateKind('2Fast')!, /not PascalCase/);
    assert.match(validateKind('Data_base')!, /not PascalCase/);
    assert.match(validateKind('')!, /must not be empty/);
    assert.match(validateKind('DatabaseList')!, /must not end in "List"/);
  });
});

describe('domain and project name', () => {
  test('domains are DNS subdomains', () => {
    for (const d of ['example.com', 'my.domain', 'localhost', 'a-b.c-d.io'])
      assert.equal(validateDomain(d), undefined, d);
    assert.match(validateDomain('Example.com')!, /not a DNS-1123 subdomain/);
    assert.match(validateDomain('example..com')!, /not a DNS-1123 subdomain/);
    assert.match(validateDomain('')!, /must not be empty/);
  });
  test('project names are labels; folder names are turned into one', () => {
    assert.equal(validateDnsLabel('the project name', 'database-operator'), undefined);
    assert.equal(suggestLabel('My Operator!'), 'my-operator');
    assert.equal(suggestLabel('__'), '');
    assert.equal(suggestLabel('Database_Operator.v2'), 'database-operator-v2');
    assert.equal(toPascalCase('my-database'), 'MyDatabase');
  });
});

describe('plurals', () => {
  test('the common English rules, as kubebuilder makes them', () => {
    const cases: Record<string, string> = {
      Database: 'databases',
      Policy: 'policies',
      NetworkPolicy: 'networkpolicies',
      Proxy: 'proxies',
      Key: 'keys',
      Class: 'classes',
      Box: 'boxes',
      Match: 'matches',
      Mesh: 'meshes',
      Person: 'people',
      Status: 'statuses',
      Endpoints: 'endpoints',
    };
    for (const [kind, plural] of Object.entries(cases)) assert.equal(pluralize(kind), plural, kind);
  });
  test('pluralizeKind keeps the capitals (the identifier of the definition)', () => {
    assert.equal(pluralizeKind('Database'), 'Databases');
    assert.equal(pluralizeKind('NetworkPolicy'), 'NetworkPolicies');
    assert.equal(pluralizeKind('SalesPerson'), 'SalesPeople');
  });
});

describe('create api reports bad names as usage errors (exit code 2), writing nothing', () => {
  test('each name, with error: and next: lines', async () => {
    using tmp = tempDir('opkit-names-');
    assert.equal((await opkit(tmp.dir, ['init', '--domain', 'example.com', '--name', 'x'])).code, 0);
    const cases: Array<[string[], RegExp]> = [
      [
        ['--group', 'My.App', '--version', 'v1', '--kind', 'Database'],
        /error: the group "My\.App" is not a DNS-1123 label/,
      ],
      [
        ['--group', 'myapp', '--version', '1', '--kind', 'Database'],
        /error: the version "1" is not a Kubernetes API version/,
      ],
      [
        ['--group', 'myapp', '--version', 'v1', '--kind', 'database'],
        /error: the kind "database" is not PascalCase/,
      ],
      [
        ['--group', 'myapp', '--version', 'v1', '--kind', 'Database', '--plural', 'Databases'],
        /error: the plural "Databases"/,
      ],
      [['--version', 'v1', '--kind', 'Database'], /error: opkit create api needs --group/],
    ];
    for (const [args, message] of cases) {
      const r = await opkit(tmp.dir, ['create', 'api', ...args]);
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.stderr, message);
      assert.match(r.stderr, /\nnext: /);
    }
    const project = await opkit(tmp.dir, ['generate', '--check']);
    assert.equal(project.code, 0, 'nothing was written');
    assert.match(project.stdout, /no kinds yet/);
  });
});
