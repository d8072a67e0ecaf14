/**
 * Builds opkit's images into the cache (~/.cache/opkit/images) by a content key: the recipe, the
 * pause source and the apt sources (a mirror or suite change means a new image). Safe across
 * processes (a lock), so two test files building the same image wait for one build.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatElapsed } from '../install/install.ts';
import { withLock } from '../install/lock.ts';
import { cacheRoot } from '../install/paths.ts';
import { writeOciArchive } from './oci.ts';
import { type ImageRecipe, RECIPES, shellQuote } from './recipes.ts';

export class ImageBuildError extends Error {
  readonly hint: string;
  constructor(message: string, hint: string) {
    super(message);
    this.name = 'ImageBuildError';
    this.hint = hint;
  }
}

const PAUSE_SOURCE = fileURLToPath(new URL('./pause.c', import.meta.url));
const APT_SOURCES = ['/etc/apt/sources.list', '/etc/apt/sources.list.d'];

/** The apt source files mmdebstrap should use: the machine's own configured mirror. */
export function aptSourceFiles(): string[] {
  const files: string[] = [];
  for (const p of APT_SOURCES) {
    if (!existsSync(p)) continue;
    if (p.endsWith('.d')) {
      for (const f of readdirSync(p).sort())
        if (f.endsWith('.list') || f.endsWith('.sources')) files.push(join(p, f));
    } else if (
      readFileSync(p, 'utf8')
        .split('\n')
        .some((l) => /^\s*deb\s/.test(l))
    )
      files.push(p);
  }
  return files;
}

function debianSuite(): string {
  const osRelease = existsSync('/etc/os-release') ? readFileSync('/etc/os-release', 'utf8') : '';
  const codename = /^VERSION_CODENAME=(\S+)/m.exec(osRelease)?.[1];
  if (!codename) {
    throw new ImageBuildError(
      'cannot tell the Debian suite to build images from (/etc/os-release has no VERSION_CODENAME)',
      'real nodes need a Debian host: run on Debian 12 (bookworm) or newer',
    );
  }
  return codename;
}

/** The Node binary of the npm `node` package (the one the repository's scripts run) and its version. */
export function nodePackageBinary(): { path: string; version: string } {
  let pkgJson: string;
  try {
    pkgJson = createRequire(import.meta.url).resolve('node/package.json');
  } catch {
    throw new ImageBuildError(
      'the npm package `node` is not installed: opkit.local/node:24 takes its Node binary from it',
      'run npm install at the repository root (the root package.json depends on node)',
    );
  }
  const { version } = JSON.parse(readFileSync(pkgJson, 'utf8')) as { version: string };
  return { path: join(dirname(pkgJson), 'bin', 'node'), version };
}

export function imageKey(recipe: ImageRecipe): string {
  const hash = createHash('sha256').update(JSON.stringify(recipe));
  if (recipe.kind === 'pause') hash.update(readFileSync(PAUSE_SOURCE));
  else {
    hash.update(debianSuite());
    for (const f of aptSourceFiles()) hash.update(readFileSync(f));
  }
  if (recipe.nodeBinary) hash.update(nodePackageBinary().version);
  return hash.digest('hex').slice(0, 16);
}

export function imageArchivePath(name: string): string {
  const recipe = RECIPES[name];
  if (!recipe) throw new Error(`opkit has no recipe for image ${name}`);
  const file = `${name.replace(/[^a-zA-Z0-9.-]+/g, '_')}-${imageKey(recipe)}.tar`;
  return join(cacheRoot(), 'images', file);
}

/** The image's OCI archive, building it first when it is not cached. */
export async function ensureImage(name: string, log: (line: string) => void): Promise<string> {
  const out = imageArchivePath(name);
  if (existsSync(out)) return out;
  const recipe = RECIPES[name]!;
  mkdirSync(join(cacheRoot(), 'images'), { recursive: true });
  return withLock(
    `${out}.lock`,
    (pid) => log(`[opkit] another process (pid ${pid}) is building ${name}; waiting for it`),
    async () => {
      if (existsSync(out)) return out;
      const work = `${out}.work-${process.pid}`;
      rmSync(work, { recursive: true, force: true });
      mkdirSync(work, { recursive: true });
      const started = Date.now();
      log(`[opkit] building image ${name} ...`);
      try {
        const rootfs = join(work, 'rootfs.tar');
        if (recipe.kind === 'pause') await buildPauseRootfs(work, rootfs);
        else await buildDebianRootfs(recipe, rootfs);
        await writeOciArchive(rootfs, name, recipe.config, join(work, 'oci'), out);
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
      log(`[opkit] built image ${name} in ${formatElapsed(Date.now() - started)}`);
      return out;
    },
  );
}

async function buildPauseRootfs(work: string, rootfs: string) {
  const dir = join(work, 'pause-root');
  mkdirSync(dir);
  await run('gcc', ['-static', '-Os', '-s', '-o', join(dir, 'pause'), PAUSE_SOURCE], 'gcc and libc6-dev');
  await run('tar', ['-C', dir, '--numeric-owner', '--owner=0', '--group=0', '-cf', rootfs, 'pause'], 'tar');
}

async function buildDebianRootfs(recipe: ImageRecipe, rootfs: string) {
  const args = [
    '--quiet',
    '--mode=root',
    '--variant=essential',
    '--format=tar',
    // Smaller images: no documentation, manuals or translations.
    '--dpkgopt=path-exclude=/usr/share/doc/*',
    '--dpkgopt=path-exclude=/usr/share/man/*',
    '--dpkgopt=path-exclude=/usr/share/info/*',
    '--dpkgopt=path-exclude=/usr/share/locale/*',
    '--customize-hook=rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*',
  ];
  if (recipe.include?.length) args.push(`--include=${recipe.include.join(',')}`);
  if (recipe.essentialHook) args.push(`--essential-hook=${recipe.essentialHook}`);
  if (recipe.customizeHook) args.push(`--customize-hook=${recipe.customizeHook}`);
  if (recipe.nodeBinary) {
    const node = nodePackageBinary().path;
    args.push(`--customize-hook=install -D -m 755 ${shellQuote(node)} "$1/usr/local/bin/node"`);
  }
  const sources = aptSourceFiles();
  if (sources.length === 0) {
    throw new ImageBuildError(
      'no apt sources are configured (/etc/apt/sources.list{,.d}): images are built from the Debian mirror apt uses',
      'configure a Debian mirror for apt, then try again',
    );
  }
  await run('mmdebstrap', [...args, debianSuite(), rootfs, ...sources], 'mmdebstrap');
}

function run(cmd: string, args: string[], pkg: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const keep = (c: Buffer) => {
      output = (output + c.toString()).slice(-8000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('error', (err) =>
      reject(
        new ImageBuildError(
          `${cmd} could not run (${err.message})`,
          `install ${pkg} (scripts/system-packages.sh installs it)`,
        ),
      ),
    );
    child.on('close', (code) =>
      code === 0
        ? resolve()
        : reject(
            new ImageBuildError(
              `${cmd} exited with ${code}:\n${output.split('\n').slice(-20).join('\n')}`,
              'check that the Debian mirror of apt is reachable, then try again',
            ),
          ),
    );
  });
}
