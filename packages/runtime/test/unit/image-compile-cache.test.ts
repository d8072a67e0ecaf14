import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  cpSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { CompileCacheError, warmCompileCache } from '../../src/image/compile-cache.ts';
import { runWarmCommand } from '../../src/image/warm-command.ts';

const root = mkdtempSync(join(tmpdir(), 'opkit-compile-cache-'));
chmodSync(root, 0o755);
after(() => rmSync(root, { recursive: true, force: true }));

/** An app: src/main.ts importing src/lib.ts, started only as a program, as `opkit init` writes it. */
function app(name: string, main = ''): string {
  const dir = join(root, name);
  mkdirSync(join(dir, 'src'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
  writeFileSync(join(dir, 'src/lib.ts'), 'export const twice = (x: number): number => x * 2;\n');
  writeFileSync(
    join(dir, 'src/main.ts'),
    main || "import { twice } from './lib.ts';\nif (import.meta.main) console.log('started', twice(21));\n",
  );
  return dir;
}

/**
 * This Node where any uid can run it: the checkout (and so the npm package's node) may sit in a directory
 * only root can enter, such as a fresh clone in a `mktemp -d` directory.
 */
let sharedNode: string | undefined;
function nodeForAnyUid(): string {
  if (sharedNode) return sharedNode;
  const path = join(root, 'node');
  try {
    linkSync(process.execPath, path);
  } catch {
    copyFileSync(process.execPath, path);
  }
  chmodSync(path, 0o755);
  sharedNode = path;
  return path;
}

/** What Node says of its compile cache when it runs the app from `dir` as `uid`. */
function runWithCache(dir: string, cacheDir: string, uid?: number, flags: string[] = []): string {
  const node = uid === undefined ? process.execPath : nodeForAnyUid();
  const r = spawnSync(node, [...flags, 'src/main.ts'], {
    cwd: dir,
    encoding: 'utf8',
    env: {
      ...process.env,
      NODE_COMPILE_CACHE: cacheDir,
      NODE_COMPILE_CACHE_PORTABLE: '1',
      NODE_DEBUG_NATIVE: 'COMPILE_CACHE',
    },
    ...(uid === undefined ? {} : { uid, gid: uid }),
  });
  assert.equal(r.status, 0, `${r.error ?? ''} ${r.stderr}`);
  assert.match(r.stdout, /started 42/);
  return r.stderr;
}

const accepted = (log: string, file: string) =>
  new RegExp(`V8 code cache for ESM file://\\S*/${file} was accepted`).test(log);

describe('warmCompileCache', () => {
  it('warms every module the entry imports, without starting it, readable where the image puts the app', () => {
    const dir = app('moved');
    const warmed = warmCompileCache({ entry: 'src/main.ts', cacheDir: '.node-compile-cache', cwd: dir });
    assert.ok(warmed.entries >= 4, `a stripped-types and a code-cache entry per module: ${warmed.entries}`);
    assert.match(
      basename(warmed.dir),
      new RegExp(`^v${process.versions.node}-${process.arch}-[0-9a-f]+-${warmed.uid}$`),
    );
    // Elsewhere (the image's /app, not the build directory): the paths in the cache are relative.
    const moved = join(root, 'elsewhere');
    cpSync(dir, moved, { recursive: true });
    const log = runWithCache(moved, join(moved, '.node-compile-cache'));
    assert.ok(accepted(log, 'src/main.ts') && accepted(log, 'src/lib.ts'), log);
  });

  it('keys the cache by the V8 flags it is given, as the ENTRYPOINT runs with them', () => {
    const dir = app('flags');
    warmCompileCache({ entry: 'src/main.ts', cacheDir: 'cc', cwd: dir, nodeFlags: ['--max-opt=2'] });
    assert.ok(accepted(runWithCache(dir, join(dir, 'cc'), undefined, ['--max-opt=2']), 'src/main.ts'));
    assert.ok(!accepted(runWithCache(dir, join(dir, 'cc')), 'src/main.ts'), 'other flags: another key');
  });

  it("writes the cache for the image's USER, readable by it (Node keys the directory by uid)", {
    skip: process.getuid?.() === 0 ? false : 'running as another uid needs root',
  }, () => {
    const dir = app('uid');
    chmodSync(dir, 0o755);
    const warmed = warmCompileCache({ entry: 'src/main.ts', cacheDir: 'cc', cwd: dir, uid: 65532 });
    assert.equal(warmed.uid, 65532);
    assert.match(basename(warmed.dir), /-65532$/);
    assert.deepEqual(readdirSync(join(dir, 'cc')), [basename(warmed.dir)], 'no directory left for root');
    for (const f of readdirSync(warmed.dir)) assert.equal(statSync(join(warmed.dir, f)).mode & 0o777, 0o644);
    assert.ok(accepted(runWithCache(dir, join(dir, 'cc'), 65532), 'src/main.ts'));
    // Another uid looks in another directory: nothing there (it cannot write either, and still runs).
    assert.ok(!accepted(runWithCache(dir, join(dir, 'cc'), 1000), 'src/main.ts'));
  });

  it('fails, naming the remedy, when importing the entry starts the operator (it never finishes)', () => {
    const dir = app('starts', 'setInterval(() => {}, 1000);\n');
    assert.throws(
      () => warmCompileCache({ entry: 'src/main.ts', cacheDir: 'cc', cwd: dir, timeoutMs: 1500 }),
      (err: unknown) =>
        err instanceof CompileCacheError &&
        /did not finish in 2 s/.test(err.message) &&
        /import\.meta\.main/.test(err.hint),
    );
  });

  it('fails with what the import said when it throws, and when the entry does not exist', () => {
    const dir = app('throws', "throw new Error('no kubeconfig');\n");
    assert.throws(
      () => warmCompileCache({ entry: 'src/main.ts', cacheDir: 'cc', cwd: dir }),
      (err: unknown) =>
        err instanceof CompileCacheError && /exit code 1\): [\s\S]*no kubeconfig/.test(err.message),
    );
    assert.throws(
      () => warmCompileCache({ entry: 'dist/main.js', cacheDir: 'cc', cwd: dir }),
      (err: unknown) =>
        err instanceof CompileCacheError && /the entry dist\/main\.js does not exist/.test(err.message),
    );
  });
});

describe('opkit-warm-compile-cache', () => {
  const io = () => {
    const out: string[] = [];
    const err: string[] = [];
    return { out, err, io: { out: (l: string) => out.push(l), err: (l: string) => err.push(l) } };
  };

  it('takes the ENTRYPOINT arguments after --, and says what it warmed', () => {
    const dir = app('command');
    const r = io();
    const code = runWarmCommand(
      ['--cache-dir', 'cc', '--', '--max-semi-space-size=4', 'src/main.ts'],
      r.io,
      dir,
    );
    assert.equal(code, 0, r.err.join('\n'));
    assert.match(
      r.out[0]!,
      /^warmed Node's compile cache for src\/main\.ts: \d+ entries in \S+\/cc\/v\S+ \(uid \d+, [\d.]+ s\)$/,
    );
  });

  it('refuses bad arguments with exit code 2, naming them', () => {
    for (const [args, said] of [
      [['--', '--max-opt=2'], /the entry is missing/],
      [['src/main.ts'], /Unexpected argument 'src\/main\.ts'.*: the node flags and the entry go after --/],
      [['--uid', 'nonroot', '--', 'src/main.ts'], /--uid must be a non-negative integer .*"nonroot"/],
      [['--timeout', '0', '--', 'src/main.ts'], /--timeout must be a positive number/],
      [['--bogus', '--', 'src/main.ts'], /Unknown option '--bogus'/],
    ] as const) {
      const r = io();
      assert.equal(runWarmCommand(args, r.io, root), 2, args.join(' '));
      assert.match(r.err[0]!, said);
    }
  });

  it('fails with exit code 1, an error and what to do next', () => {
    const r = io();
    assert.equal(runWarmCommand(['--', 'src/none.ts'], r.io, root), 1);
    assert.deepEqual(
      r.err.map((l) => l.split(':')[0]),
      ['error', 'next'],
    );
  });
});
