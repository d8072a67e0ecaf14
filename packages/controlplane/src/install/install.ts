/**
 * Builds the control plane binaries from the pinned Go modules into the cache directory.
 * Idempotent (a manifest records a verified build), safe across processes (a lock), and talkative
 * during the long cold build (component and elapsed time).
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type BinaryName,
  COMPONENTS,
  GO_MODULES_DIR,
  type GoComponent,
  NODE_COMPONENTS,
  type NodeBinaryName,
  pinnedVersion,
} from './components.ts';
import { withLock } from './lock.ts';
import { binDir, dataDir } from './paths.ts';

export class InstallError extends Error {
  readonly hint: string;
  constructor(message: string, hint: string) {
    super(message);
    this.name = 'InstallError';
    this.hint = hint;
  }
}

export interface Installation {
  binDir: string;
  binaries: Record<BinaryName, string>;
  /** kwok stage configuration (node initialize + heartbeat, pod ready/complete/delete). */
  kwokStages: string;
  versions: Record<string, string>;
}

export interface InstallOptions {
  /** Progress lines for humans; defaults to stderr. */
  log?: (line: string) => void;
  /** Rebuild even when a verified build exists. */
  force?: boolean;
}

/** The real node's binaries (kubelet, kube-proxy, coredns), built by installNode(). */
export interface NodeInstallation {
  binaries: Record<NodeBinaryName, string>;
  versions: Record<string, string>;
}

const MANIFEST = 'manifest.json';
const NODE_MANIFEST = 'node-manifest.json';
const KWOK_STAGE_FILES = [
  'kustomize/stage/node/fast/node-initialize.yaml',
  'kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml',
  'kustomize/stage/pod/fast/pod-ready.yaml',
  'kustomize/stage/pod/fast/pod-complete.yaml',
  'kustomize/stage/pod/fast/pod-delete.yaml',
];

function installation(): Installation {
  const dir = binDir();
  const binaries = {} as Record<BinaryName, string>;
  const versions: Record<string, string> = {};
  for (const c of COMPONENTS) {
    versions[c.upstream] = pinnedVersion(c);
    for (const b of c.binaries) binaries[b.name] = join(dir, b.name);
  }
  return { binDir: dir, binaries, kwokStages: join(dataDir(), 'kwok-stages.yaml'), versions };
}

/** The installed binaries, or undefined when no verified build is cached. Does not build. */
export function findInstallation(): Installation | undefined {
  const inst = installation();
  if (!existsSync(join(dataDir(), MANIFEST))) return undefined;
  if (!Object.values(inst.binaries).every((p) => existsSync(p)) || !existsSync(inst.kwokStages))
    return undefined;
  return inst;
}

export async function install(opts: InstallOptions = {}): Promise<Installation> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  if (!opts.force) {
    const found = findInstallation();
    if (found) return found;
  }
  const goVersion = checkGo();
  mkdirSync(dataDir(), { recursive: true });
  return withLock(
    join(dataDir(), 'install.lock'),
    (pid) => log(`[opkit] another process (pid ${pid}) is building the control plane; waiting for it`),
    async () => {
      if (!opts.force) {
        const found = findInstallation();
        if (found) return found;
      }
      const inst = installation();
      mkdirSync(inst.binDir, { recursive: true });
      log(`[opkit] building the local control plane with ${goVersion} into ${inst.binDir}`);
      const started = Date.now();
      for (const component of COMPONENTS) await buildComponent(component, inst, log, opts.force ?? false);
      writeKwokStages(inst);
      writeFileSync(
        join(dataDir(), MANIFEST),
        `${JSON.stringify({ versions: inst.versions, builtWith: goVersion, builtAt: new Date().toISOString() }, null, 2)}\n`,
      );
      log(`[opkit] control plane ready (${formatElapsed(Date.now() - started)})`);
      return inst;
    },
  );
}

function nodeInstallation(): NodeInstallation {
  const binaries = {} as Record<NodeBinaryName, string>;
  const versions: Record<string, string> = {};
  for (const c of NODE_COMPONENTS) {
    versions[c.upstream] = pinnedVersion(c);
    for (const b of c.binaries) binaries[b.name] = join(binDir(), b.name);
  }
  return { binaries, versions };
}

/** The real node's binaries when a verified build is cached. Does not build. */
export function findNodeInstallation(): NodeInstallation | undefined {
  const inst = nodeInstallation();
  if (!existsSync(join(dataDir(), NODE_MANIFEST))) return undefined;
  return Object.values(inst.binaries).every((p) => existsSync(p)) ? inst : undefined;
}

/**
 * Builds kubelet, kube-proxy and CoreDNS (only needed for real nodes) next to the control plane's
 * binaries, under the same lock and fingerprinted cache directory.
 */
export async function installNode(opts: InstallOptions = {}): Promise<NodeInstallation> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  if (!opts.force) {
    const found = findNodeInstallation();
    if (found) return found;
  }
  const goVersion = checkGo();
  mkdirSync(dataDir(), { recursive: true });
  return withLock(
    join(dataDir(), 'install.lock'),
    (pid) => log(`[opkit] another process (pid ${pid}) is building; waiting for it`),
    async () => {
      if (!opts.force) {
        const found = findNodeInstallation();
        if (found) return found;
      }
      const inst = nodeInstallation();
      const target = { binDir: binDir(), binaries: inst.binaries as Record<string, string> };
      mkdirSync(target.binDir, { recursive: true });
      log(`[opkit] building the real node's components with ${goVersion} into ${target.binDir}`);
      const started = Date.now();
      for (const component of NODE_COMPONENTS)
        await buildComponent(component, target, log, opts.force ?? false);
      writeFileSync(
        join(dataDir(), NODE_MANIFEST),
        `${JSON.stringify({ versions: inst.versions, builtWith: goVersion, builtAt: new Date().toISOString() }, null, 2)}\n`,
      );
      log(`[opkit] real node components ready (${formatElapsed(Date.now() - started)})`);
      return inst;
    },
  );
}

export function checkGo(): string {
  const result = spawnSync('go', ['version'], { encoding: 'utf8' });
  if (result.error || result.status !== 0) {
    throw new InstallError(
      'the Go toolchain was not found (the `go` command is needed to build the control plane)',
      'install Go 1.24 or newer (https://go.dev/doc/install) and make sure `go` is on PATH, then run `npm run setup` again',
    );
  }
  return result.stdout.trim().replace(/^go version /, '');
}

export function formatElapsed(ms: number): string {
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}

export interface BuildTarget {
  binDir: string;
  binaries: Record<string, string>;
}

export async function buildComponent(
  c: GoComponent<string>,
  inst: BuildTarget,
  log: (l: string) => void,
  force: boolean,
) {
  const version = pinnedVersion(c);
  const names = c.binaries.map((b) => b.name);
  if (!force && names.every((n) => verify(inst.binaries[n]!, c, version))) {
    log(`[opkit] ${names.join(', ')} ${version}: already built`);
    return;
  }
  const staging = join(inst.binDir, `.build-${c.module}-${process.pid}`);
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  const args = [
    'build',
    '-trimpath',
    '-ldflags',
    ['-s', '-w', ...c.ldflags(version)].join(' '),
    '-o',
    // One package: name the file (etcd's package path ends in /v3); several: a folder, named by package.
    c.binaries.length === 1 ? join(staging, c.binaries[0]!.name) : `${staging}/`,
    ...c.binaries.map((b) => b.pkg),
  ];
  const label = `${names.join(', ')} ${version}`;
  log(`[opkit] building ${label} ...`);
  const started = Date.now();
  const ticker = setInterval(
    () => log(`[opkit]   still building ${label} (${formatElapsed(Date.now() - started)})`),
    30_000,
  );
  try {
    const { code, output } = await run('go', args, join(GO_MODULES_DIR, c.module), {
      CGO_ENABLED: '0',
      GOFLAGS: '-mod=readonly -buildvcs=false',
    });
    if (code !== 0) {
      throw new InstallError(
        `building ${label} failed (go build exited with ${code}):\n${output.split('\n').slice(-25).join('\n')}`,
        'check that the Go module proxy is reachable (GOPROXY) and that the machine has 4 GB of free memory; ' +
          'then run the command again (finished components are kept)',
      );
    }
  } finally {
    clearInterval(ticker);
  }
  for (const b of c.binaries) {
    const built = join(staging, b.name);
    if (!verify(built, c, version)) {
      throw new InstallError(
        `${b.name} was built but \`${b.name} ${(c.versionArgs ?? ['--version']).join(' ')}\` does not report ${version}`,
        'remove the cache directory (see OPKIT_CACHE_DIR) and run `npm run setup` again',
      );
    }
    renameSync(built, inst.binaries[b.name]!);
  }
  rmSync(staging, { recursive: true, force: true });
  log(`[opkit] built ${label} in ${formatElapsed(Date.now() - started)}`);
}

/** `<binary> --version` (or the component's versionArgs) must run and mention the pinned version. */
function verify(path: string, c: GoComponent<string>, version: string): boolean {
  if (!existsSync(path)) return false;
  const result = spawnSync(path, c.versionArgs ?? ['--version'], { encoding: 'utf8', timeout: 20_000 });
  if (result.status !== 0) return false;
  return `${result.stdout}${result.stderr}`.includes(version.replace(/^v/, ''));
}

function writeKwokStages(inst: Installation) {
  const kwok = COMPONENTS.find((c) => c.module === 'kwok')!;
  const listed = spawnSync('go', ['list', '-m', '-f', '{{.Dir}}', kwok.upstream], {
    cwd: join(GO_MODULES_DIR, kwok.module),
    encoding: 'utf8',
    env: { ...process.env, GOFLAGS: '-mod=readonly' },
  });
  const moduleDir = listed.stdout.trim();
  if (listed.status !== 0 || !moduleDir) {
    throw new InstallError(
      `could not locate the kwok module source: ${listed.stderr}`,
      'run `npm run setup` again',
    );
  }
  const docs = KWOK_STAGE_FILES.map((f) => readFileSync(join(moduleDir, f), 'utf8').trim());
  const tmp = `${inst.kwokStages}.${process.pid}`;
  writeFileSync(tmp, `${docs.join('\n---\n')}\n`);
  renameSync(tmp, inst.kwokStages);
}

function run(cmd: string, args: string[], cwd: string, env: Record<string, string>) {
  return new Promise<{ code: number; output: string }>((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-20_000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, output }));
  });
}
