/** The command line: help for every command, exit codes, error and next lines, build without an engine. */
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { COMMANDS } from '../../src/cli.ts';
import { memoryIo } from '../../src/io.ts';
import { resolveTarget } from '../../src/kube/target.ts';
import { opkit, opkitProcess, read, scaffold, tempDir } from '../helpers.ts';

describe('help', () => {
  test('opkit --help lists every command with examples; no command is a usage error', async () => {
    const help = await opkit(process.cwd(), ['--help']);
    assert.equal(help.code, 0);
    for (const c of COMMANDS) assert.match(help.stdout, new RegExp(`^ {2}${c.name} +\\S`, 'm'), c.name);
    assert.match(help.stdout, /Examples:\n {2}mkdir database-operator/);
    assert.match(help.stdout, /Exit codes: 0 ok, 1 failure, 2 usage error/);
    const none = await opkit(process.cwd(), []);
    assert.equal(none.code, 2);
    assert.match(none.stdout, /Usage: opkit <command>/);
  });

  test('every command has --help with usage, flags and examples, and the global flags', async () => {
    for (const c of COMMANDS) {
      const args = [...c.name.split(' '), '--help'];
      const r = await opkit(process.cwd(), args);
      assert.equal(r.code, 0, c.name);
      assert.match(r.stdout, new RegExp(`^Usage: opkit ${c.name}`), c.name);
      assert.match(r.stdout, /\nExamples:\n {2}\S/, `${c.name} has examples`);
      const examples = r.stdout.split('\nExamples:\n')[1]!.split('\n\n')[0]!;
      assert.ok(
        examples.split('\n').some((l) => l.includes(`opkit ${c.name}`)),
        `${c.name}'s examples use it`,
      );
      assert.match(
        r.stdout,
        /Global flags:\n {2}--kubeconfig <path>.*\n {2}--context <name>.*\n {2}-n, --namespace <ns>/,
        c.name,
      );
      assert.deepEqual(await opkit(process.cwd(), ['help', ...c.name.split(' ')]), r, `opkit help ${c.name}`);
    }
  });
});

describe('exit codes and messages', () => {
  test('usage errors exit 2 with error: and next: lines', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['frobnicate'], /error: unknown command "frobnicate"\nnext: see: opkit --help/],
      [['create', 'thing'], /error: unknown command "create thing"\nnext: did you mean: opkit create api/],
      [
        ['generate', '--bogus'],
        /error: opkit generate: unknown flag --bogus\nnext: see: opkit generate --help/,
      ],
      [['create', 'api', '--namespaced=maybe'], /error: --namespaced takes true or false, not "maybe"/],
      [['deploy'], /error: opkit deploy needs --image\nnext: e\.g\. opkit deploy --image/],
      [
        ['cluster'],
        /error: opkit cluster needs a command\nnext: one of: opkit cluster up \| down \| status \| kubeconfig \| install/,
      ],
      [['cluster', 'sideways'], /error: unknown cluster command "sideways"/],
      [['build', '--engine', 'lxc'], /error: --engine must be one of docker, podman, buildah/],
      [['install', 'extra'], /error: unexpected argument "extra"/],
    ];
    for (const [args, message] of cases) {
      const r = await opkit(process.cwd(), args);
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.stderr, message, args.join(' '));
    }
  });

  test('as a process too: the shebang entry point, stdout for results, stderr for diagnostics', async () => {
    assert.match(
      readFileSync(new URL('../../src/main.ts', import.meta.url), 'utf8'),
      /^#!\/usr\/bin\/env node\n/,
    );
    const ok = await opkitProcess(process.cwd(), ['--version']);
    assert.equal(ok.code, 0);
    assert.match(ok.stdout, /^opkit \d+\.\d+\.\d+\n$/);
    const bad = await opkitProcess(process.cwd(), ['init']);
    assert.equal(bad.code, 2);
    assert.equal(bad.stdout, '');
    assert.match(
      bad.stderr,
      /^error: opkit init needs --domain\nnext: e\.g\. opkit init --domain example\.com\n$/,
    );
  });

  test('cluster commands reach @opkit/controlplane', async () => {
    const r = await opkit(process.cwd(), ['cluster', 'kubeconfig', '--name', `absent-${process.pid}`]);
    assert.equal(r.code, 1);
  });

  test('a cluster that is not running: the hint starts that cluster, --name included', async () => {
    using cache = tempDir('opkit-cache-');
    const env = { ...process.env, OPKIT_CACHE_DIR: cache.dir };
    const status = await opkitProcess(process.cwd(), ['cluster', 'status', '--name', 'dev'], env);
    assert.equal(status.code, 1);
    assert.match(
      status.stdout,
      /cluster "dev" is not running \(start it with: opkit cluster up --name dev\)/,
    );
    const kc = await opkitProcess(process.cwd(), ['cluster', 'kubeconfig', '--name', 'dev'], env);
    assert.equal(kc.code, 1);
    assert.match(kc.stderr, /next: opkit cluster up --name dev$/m);
    const plain = await opkitProcess(process.cwd(), ['cluster', 'status'], env);
    assert.match(plain.stdout, /\(start it with: opkit cluster up\)/);
    // helm's arguments after -- are helm's (its -n is not opkit's); without the cluster nothing is built.
    const helm = await opkitProcess(
      process.cwd(),
      ['cluster', 'helm', '--name', 'dev', '--', 'list', '-n', 'x'],
      env,
    );
    assert.equal(helm.code, 1);
    assert.match(helm.stderr, /cluster "dev" is not running\nnext: opkit cluster up --name dev$/m);
  });

  test('commands that need a cluster say which kubeconfig they would use, or what to do', () => {
    using tmp = tempDir('opkit-target-');
    const io = memoryIo();
    const none = () => undefined;
    assert.throws(
      () => resolveTarget({}, io, { HOME: tmp.dir }, none),
      /no cluster configured: no --kubeconfig, no \$KUBECONFIG, no ~\/\.kube\/config and no local cluster running/,
    );
    assert.throws(
      () => resolveTarget({ kubeconfig: join(tmp.dir, 'nope') }, io, {}, none),
      /--kubeconfig .*nope: no such file/,
    );
    assert.throws(
      () => resolveTarget({ local: true }, io, {}, none),
      /--local: the local cluster "opkit" is not running/,
    );
    assert.deepEqual(resolveTarget({ context: 'c' }, io, { KUBECONFIG: '/x', HOME: tmp.dir }, none), {
      context: 'c',
      source: '$KUBECONFIG',
    });
    mkdirSync(join(tmp.dir, '.kube'));
    writeFileSync(join(tmp.dir, '.kube/config'), '');
    assert.equal(resolveTarget({}, io, { HOME: tmp.dir }, none).kubeconfig, join(tmp.dir, '.kube/config'));
    const local = () => ({ kubeconfigPath: '/local/kubeconfig', server: 'https://127.0.0.1:1' });
    assert.equal(
      resolveTarget({}, io, { HOME: join(tmp.dir, 'nohome') }, local).kubeconfig,
      '/local/kubeconfig',
    );
    assert.match(
      io.stderr.join('\n'),
      /no kubeconfig configured: using the local cluster "opkit" \(https:\/\/127\.0\.0\.1:1\)/,
    );
    assert.equal(
      resolveTarget({ local: true, kubeconfig: '/ignored' }, io, {}, local).kubeconfig,
      '/local/kubeconfig',
    );
  });

  test('install without CRDs, run without node_modules: errors that say what to do next', async () => {
    using tmp = tempDir('opkit-cli-');
    assert.equal((await opkit(tmp.dir, ['init', '--domain', 'example.com', '--name', 'x'])).code, 0);
    const install = await opkit(tmp.dir, ['install']);
    assert.equal(install.code, 1);
    assert.match(
      install.stderr,
      /error: there are no CRDs in config\/crd\/bases\nnext: add a kind \(opkit create api \.\.\.\) and run opkit generate/,
    );
    const run = await opkit(tmp.dir, ['run']);
    assert.equal(run.code, 1);
    assert.match(
      run.stderr,
      /error: the project has no node_modules\nnext: install its dependencies first: npm install/,
    );
  });
});

/** A PATH with fake engines first: docker that is installed but has no daemon, podman and buildah absent. */
function fakeEngines(dir: string, docker: 'broken' | 'working'): NodeJS.ProcessEnv {
  const bin = join(dir, 'fake-bin');
  mkdirSync(bin, { recursive: true });
  const log = join(dir, 'docker.log');
  const script =
    docker === 'broken'
      ? '#!/bin/sh\ncase "$1" in --version) echo "Docker version 29.0.0"; exit 0;; info) echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2; exit 1;; esac\nexit 1\n'
      : `#!/bin/sh\ncase "$1" in --version|info) echo ok; exit 0;; esac\necho "$@" >> ${log}\nexit 0\n`;
  writeFileSync(join(bin, 'docker'), script);
  for (const missing of ['podman', 'buildah']) writeFileSync(join(bin, missing), '#!/bin/sh\nexit 127\n');
  for (const f of ['docker', 'podman', 'buildah']) chmodSync(join(bin, f), 0o755);
  return { ...process.env, PATH: `${bin}:${process.env.PATH}` };
}

describe('opkit build', () => {
  test('--engine any without a working engine: says so plainly, leaves a ready build context, exit 0 (1 with --require-engine)', async () => {
    using tmp = tempDir('opkit-build-');
    await scaffold(tmp.dir);
    const env = fakeEngines(tmp.dir, 'broken');
    const r = await opkit(tmp.dir, ['build', '--image', 'db-op:dev', '--engine', 'any'], env);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      /no working container engine: docker is installed but cannot build \(docker info: Cannot connect to the Docker daemon.*\); podman is not installed; buildah is not installed/,
    );
    assert.match(r.stdout, /the build context is ready in \.opkit\/build-context/);
    assert.match(
      r.stdout,
      /next: build the ready context where an engine runs: docker build -t db-op:dev \.opkit\/build-context/,
    );
    assert.match(r.stderr, /==> preparing the build context/);
    const ctx = join(tmp.dir, '.opkit/build-context');
    assert.equal(read(ctx, 'Dockerfile'), read(tmp.dir, 'Dockerfile'));
    assert.equal(read(ctx, 'src/main.ts'), read(tmp.dir, 'src/main.ts'));
    assert.ok(existsSync(join(ctx, 'src/controllers/database/reconcile.ts')));
    const pkg = JSON.parse(read(ctx, 'package.json')) as Record<string, unknown>;
    assert.deepEqual(pkg.dependencies, { '@opkit/runtime': 'file:vendor/opkit-runtime' });
    assert.equal(pkg.devDependencies, undefined);
    assert.deepEqual(pkg.scripts, { start: 'node --max-semi-space-size=4 src/main.ts' });
    const runtime = JSON.parse(read(ctx, 'vendor/opkit-runtime/package.json')) as Record<string, unknown>;
    assert.equal(runtime.name, '@opkit/runtime');
    assert.equal(runtime.devDependencies, undefined, 'installed as from a registry');
    assert.ok(existsSync(join(ctx, 'vendor/opkit-runtime/src/index.ts')));

    const strict = await opkit(tmp.dir, ['build', '--require-engine'], env);
    assert.equal(strict.code, 1);
    assert.match(strict.stderr, /error: no working container engine: docker is installed but cannot build/);
    assert.match(
      strict.stderr,
      /next: build the ready context where an engine runs: docker build -t controller:latest/,
    );
  });

  test('--engine any with a working engine: builds the context with it', async () => {
    using tmp = tempDir('opkit-build-');
    await scaffold(tmp.dir);
    const r = await opkit(
      tmp.dir,
      ['build', '--image', 'db-op:dev', '--engine', 'any', '--output', join(tmp.dir, 'ctx')],
      fakeEngines(tmp.dir, 'working'),
    );
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /built db-op:dev with docker/);
    assert.equal(
      readFileSync(join(tmp.dir, 'docker.log'), 'utf8'),
      `build -t db-op:dev ${join(tmp.dir, 'ctx')}\n`,
    );
  });
});
