/**
 * The flagship Database operator (operators/database) is laid out as `opkit init` + `opkit create api`
 * would lay it out, so the scaffold and the flagship cannot drift apart: every path the scaffold creates
 * for the Database kind exists in the flagship, the modules export what the scaffold's code relies on,
 * PROJECT is what the scaffold writes, and config/ is exactly what `opkit generate` makes of the flagship's
 * code (the drift check CI runs).
 *
 * A scaffold path the flagship does not have fails the test, unless it is in NOT_EXPECTED: the few files
 * that cannot apply to a project inside this monorepo. Each exception states why, and the test checks that
 * the reason holds (so an exception cannot outlive its reason).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { parse } from 'yaml';
import { isSchemaDefinition } from '../../src/generate/crd.ts';
import { packageVersion } from '../../src/packages.ts';
import { opkit, REPO_ROOT, scaffold, tempDir } from '../helpers.ts';

const FLAGSHIP = join(REPO_ROOT, 'operators/database');

interface PackageJson {
  name: string;
  workspaces?: string[];
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

const readJson = <T>(file: string): T => JSON.parse(readFileSync(file, 'utf8')) as T;

/**
 * Scaffold paths that cannot apply to a project inside this monorepo: why, and a check that the reason
 * holds. Nothing else may be missing.
 */
const NOT_EXPECTED: Record<string, { why: string; holds(scaffolded: string): void }> = {
  // vendor/ is where `opkit init --runtime tarball` unpacks the packed @opkit packages (and where
  // `opkit build` packs `file:` dependencies). The flagship is an npm workspace of this repository: it
  // depends on the workspace packages by version, npm links them, and nothing is vendored.
  'vendor/README.md': {
    why: 'the flagship depends on the workspace @opkit packages (npm workspaces), nothing is vendored',
    holds() {
      const root = readJson<PackageJson>(join(REPO_ROOT, 'package.json'));
      assert.ok(root.workspaces?.includes('operators/database'), 'operators/database is a workspace');
      const pkg = readJson<PackageJson>(join(FLAGSHIP, 'package.json'));
      const deps = { ...pkg.dependencies, ...pkg.devDependencies };
      for (const name of ['@opkit/runtime', '@opkit/controlplane', '@opkit/cli'] as const) {
        assert.equal(deps[name], packageVersion(name), `${name} is the workspace package's version`);
      }
      assert.ok(!existsSync(join(FLAGSHIP, 'vendor')), 'no vendor/ folder');
    },
  },
  // A per-project .gitignore would repeat the monorepo root's: every pattern the scaffold ignores is
  // ignored there already (for the whole tree, operators/database included).
  '.gitignore': {
    why: "the monorepo root's .gitignore ignores everything the scaffold's does",
    holds(scaffolded) {
      const rootLines = new Set(
        readFileSync(join(REPO_ROOT, '.gitignore'), 'utf8')
          .split('\n')
          .map((l) => l.trim()),
      );
      for (const line of scaffolded.split('\n').map((l) => l.trim())) {
        if (line && !line.startsWith('#')) assert.ok(rootLines.has(line), `the root .gitignore has ${line}`);
      }
      assert.ok(!existsSync(join(FLAGSHIP, '.gitignore')), 'no per-project .gitignore to keep in sync');
    },
  },
};

function walk(dir: string, root = dir): string[] {
  return readdirSync(dir).flatMap((e) => {
    const p = join(dir, e);
    return statSync(p).isDirectory() ? walk(p, root) : [relative(root, p).split('\\').join('/')];
  });
}

/** A tsconfig's compilerOptions and include, with `extends` resolved (relative paths only). */
function effectiveTsconfig(file: string): { compilerOptions: Record<string, unknown>; include?: string[] } {
  const config = readJson<{
    extends?: string;
    compilerOptions?: Record<string, unknown>;
    include?: string[];
  }>(file);
  const base = config.extends ? effectiveTsconfig(resolve(dirname(file), config.extends)) : undefined;
  return {
    compilerOptions: { ...base?.compilerOptions, ...config.compilerOptions },
    ...(config.include ? { include: config.include } : {}),
  };
}

describe('the flagship operator has the scaffold layout', () => {
  let paths: string[] = [];
  const tmp = tempDir('opkit-flagship-');
  const scaffolded = (p: string) => readFileSync(join(tmp.dir, p), 'utf8');
  const flagship = (p: string) => readFileSync(join(FLAGSHIP, p), 'utf8');

  before(async () => {
    // The flagship's API: myapp.example.com/v1 Database, i.e. domain example.com + group myapp.
    await scaffold(tmp.dir, {
      domain: 'example.com',
      name: 'database-operator',
      api: ['--group', 'myapp', '--version', 'v1', '--kind', 'Database', '--resource', '--controller'],
    });
    paths = walk(tmp.dir).sort();
  });
  after(() => tmp[Symbol.dispose]());

  test('the scaffold creates the layout the flagship is meant to have', () => {
    for (const p of [
      'PROJECT',
      'tsconfig.json',
      '.dockerignore',
      'src/main.ts',
      'src/api/v1/database.ts',
      'src/controllers/database/controller.ts',
      'src/controllers/database/reconcile.ts',
      'config/crd/bases/myapp.example.com_databases.yaml',
      'config/rbac/role.yaml',
      'config/manager/manager.yaml',
      'config/manager/metrics_service.yaml',
      'config/samples/myapp_v1_database.yaml',
      'config/default/kustomization.yaml',
      'scripts/generate.ts',
      'Dockerfile',
      'test/unit/database.test.ts',
      'test/integration/database.test.ts',
    ]) {
      assert.ok(paths.includes(p), p);
    }
    for (const p of Object.keys(NOT_EXPECTED)) {
      assert.ok(paths.includes(p), `NOT_EXPECTED lists ${p}, which the scaffold does not write any more`);
    }
  });

  test('every scaffold path exists in operators/database', async (t) => {
    assert.ok(existsSync(FLAGSHIP), 'operators/database exists');
    for (const p of paths) {
      await t.test(p, () => {
        const exception = NOT_EXPECTED[p];
        if (exception) {
          exception.holds(scaffolded(p));
          return;
        }
        assert.ok(existsSync(join(FLAGSHIP, p)), `operators/database/${p} is missing`);
        assert.ok(statSync(join(FLAGSHIP, p)).isFile(), `operators/database/${p} is a file`);
      });
    }
  });

  test('PROJECT is what opkit init + create api write (the repository aside)', () => {
    const ours = parse(flagship('PROJECT')) as Record<string, unknown>;
    const theirs = parse(scaffolded('PROJECT')) as Record<string, unknown>;
    assert.equal(typeof ours.repo, 'string', 'the flagship names its repository');
    delete ours.repo;
    delete theirs.repo;
    assert.deepEqual(ours, theirs);
  });

  test('tsconfig.json: the scaffold compiler options, for src, test and scripts', () => {
    const ours = effectiveTsconfig(join(FLAGSHIP, 'tsconfig.json'));
    const theirs = effectiveTsconfig(join(tmp.dir, 'tsconfig.json'));
    for (const [option, value] of Object.entries(theirs.compilerOptions)) {
      assert.deepEqual(ours.compilerOptions[option], value, `compilerOptions.${option}`);
    }
    assert.deepEqual(ours.include, theirs.include);
  });

  test('.dockerignore ignores what the scaffold ignores', () => {
    const ours = new Set(flagship('.dockerignore').split('\n'));
    for (const line of scaffolded('.dockerignore').split('\n').filter(Boolean)) {
      assert.ok(ours.has(line), line);
    }
  });

  test('the schema module defines the kind the scaffold would define', async () => {
    const mod = (await import(pathToFileURL(join(FLAGSHIP, 'src/api/v1/database.ts')).href)) as Record<
      string,
      unknown
    >;
    const defs = Object.values(mod).filter(isSchemaDefinition);
    const generated = (await import(pathToFileURL(join(tmp.dir, 'src/api/v1/database.ts')).href)) as Record<
      string,
      unknown
    >;
    const expected = Object.values(generated).filter(isSchemaDefinition)[0]!;
    const found = defs.find((d) => d.kind === expected.kind);
    assert.ok(found, 'it exports a defineCustomResource result for Database');
    const names = (d: typeof expected) => ({
      group: d.group,
      version: d.version,
      kind: d.kind,
      plural: d.plural,
      crdName: d.crdName,
    });
    assert.deepEqual(names(found), names(expected));
    assert.ok('Databases' in mod, 'the definition has the name the scaffold gives it (Databases)');
  });

  test('the controller module exports what the scaffold exports, and main.ts registers it', () => {
    const source = flagship('src/controllers/database/controller.ts');
    assert.match(source, /export function setupDatabaseController\(/);
    assert.match(
      source,
      /export const rbac: RbacRule\[\] = \[/,
      'the rbac opkit generate derives role.yaml from',
    );
    assert.match(source, /import type \{ RbacRule \} from '@opkit\/cli\/rbac';/);
    assert.match(flagship('src/main.ts'), /setupDatabaseController\(/);
  });

  test('opkit generate --check: the flagship config/ is what opkit generate makes of its code', async () => {
    const r = await opkit(FLAGSHIP, ['generate', '--check']);
    assert.equal(r.code, 0, `run npm run generate -w operators/database: ${r.stderr}`);
    assert.match(r.stdout, /config\/ is up to date \(Database; \d+ RBAC rules\)/);
  });

  test('what opkit generate derives from PROJECT alone is byte-identical to the scaffold', () => {
    for (const p of [
      'config/rbac/service_account.yaml',
      'config/rbac/role_binding.yaml',
      'config/rbac/leader_election_role.yaml',
      'config/rbac/leader_election_role_binding.yaml',
      'config/rbac/kustomization.yaml',
      'config/manager/manager.yaml',
      'config/manager/metrics_service.yaml',
      'config/crd/kustomization.yaml',
      'config/samples/kustomization.yaml',
    ]) {
      assert.equal(flagship(p), scaffolded(p), p);
    }
    // The manager kustomization differs in its images only (kustomize edit set image keeps the real one).
    const ours = parse(flagship('config/manager/kustomization.yaml')) as Record<string, unknown>;
    const theirs = parse(scaffolded('config/manager/kustomization.yaml')) as Record<string, unknown>;
    assert.deepEqual(ours.images, [
      { name: 'controller', newName: 'opkit/database-operator', newTag: '0.1.0' },
    ]);
    delete ours.images;
    delete theirs.images;
    assert.deepEqual(ours, theirs);
  });

  test("the sample is the flagship's kind", () => {
    const text = flagship('config/samples/myapp_v1_database.yaml');
    assert.match(text, /^apiVersion: myapp\.example\.com\/v1$/m);
    assert.match(text, /^kind: Database$/m);
  });
});
