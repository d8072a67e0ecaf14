/**
 * opkit build: the operator image. The build context is prepared first, in .opkit/build-context: the
 * Dockerfile, package.json (production dependencies only, local ones packed into vendor/) and src/. Then
 * opkit's own builder follows the Dockerfile onto the local base opkit.local/node:24 and writes an OCI
 * archive (--load imports it into the real nodes of the local cluster); with --engine, docker, podman or
 * buildah builds it instead, if installed and working; otherwise the context is left for a machine that has one.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { runClusterCommand } from '@opkit/controlplane';
import { bool, str } from '../args.ts';
import { buildLocally } from '../build/local.ts';
import { CliError, UsageError } from '../errors.ts';
import { type Io, step } from '../io.ts';
import { packFolder } from '../packages.ts';
import { readProject } from '../project.ts';
import type { Command } from './command.ts';

export const ENGINES = ['docker', 'podman', 'buildah'] as const;
export type Engine = (typeof ENGINES)[number];

export interface EngineProbe {
  engine: Engine;
  installed: boolean;
  working: boolean;
  /** Why it does not work (the first line of what `<engine> info` said). */
  problem?: string;
}

/** `<engine> --version` says whether it is installed; `<engine> info` whether it can build. */
export function probeEngine(engine: Engine, env: NodeJS.ProcessEnv = process.env): EngineProbe {
  const version = spawnSync(engine, ['--version'], { encoding: 'utf8', env, timeout: 15_000 });
  if (version.error || version.status !== 0) return { engine, installed: false, working: false };
  const info = spawnSync(engine, ['info'], { encoding: 'utf8', env, timeout: 30_000 });
  if (info.status === 0) return { engine, installed: true, working: true };
  const said = `${info.stderr ?? ''}\n${info.stdout ?? ''}`
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const problem =
    said.find((l) => /cannot|error|denied|not running|failed/i.test(l)) ??
    said[0] ??
    `exit code ${info.status}`;
  return { engine, installed: true, working: false, problem };
}

interface PackageJson {
  name?: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  scripts?: Record<string, string>;
  allowScripts?: unknown;
  [key: string]: unknown;
}

/** Writes a self-contained build context; returns its path. */
export function prepareBuildContext(dir: string, out: string, io: Io): string {
  readProject(dir);
  for (const needed of ['Dockerfile', 'package.json', 'src']) {
    if (!existsSync(join(dir, needed)))
      throw new CliError(`${needed} is missing`, 'restore it (opkit init writes it)');
  }
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  cpSync(join(dir, 'Dockerfile'), join(out, 'Dockerfile'));
  if (existsSync(join(dir, '.dockerignore'))) cpSync(join(dir, '.dockerignore'), join(out, '.dockerignore'));
  cpSync(join(dir, 'src'), join(out, 'src'), { recursive: true });
  if (existsSync(join(dir, 'vendor'))) cpSync(join(dir, 'vendor'), join(out, 'vendor'), { recursive: true });
  mkdirSync(join(out, 'vendor'), { recursive: true });

  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as PackageJson;
  const deps: Record<string, string> = {};
  for (const [name, spec] of Object.entries(pkg.dependencies ?? {})) {
    if (!spec.startsWith('file:')) {
      deps[name] = spec;
      continue;
    }
    const source = resolve(dir, spec.slice('file:'.length));
    const inside = relative(dir, source);
    if (!inside.startsWith('..') && !isAbsolute(inside)) {
      if (!existsSync(join(out, inside))) cpSync(source, join(out, inside), { recursive: true });
      deps[name] = `file:${inside.split('\\').join('/')}`;
      continue;
    }
    const folder = name.replace('@', '').replace('/', '-');
    step(io, `packing ${name} from ${source} into the build context (npm pack)`);
    packFolder(source, join(out, 'vendor'), folder);
    deps[name] = `file:vendor/${folder}`;
  }
  const { devDependencies: _dev, allowScripts: _allow, scripts, ...rest } = pkg;
  const production: PackageJson = { ...rest, dependencies: deps };
  if (scripts?.start) production.scripts = { start: scripts.start };
  writeFileSync(join(out, 'package.json'), `${JSON.stringify(production, null, 2)}\n`);
  return out;
}

async function loadIntoCluster(cluster: string, archive: string): Promise<void> {
  try {
    const code = await runClusterCommand('load-image', { name: cluster }, { args: [archive] });
    if (code !== 0)
      throw new CliError(`loading ${archive} failed (exit code ${code})`, 'read the output above');
  } catch (err) {
    if (err instanceof CliError) throw err;
    const hint = (err as { hint?: unknown }).hint;
    throw new CliError(
      `loading ${archive} into cluster "${cluster}" failed: ${(err as Error).message}`,
      typeof hint === 'string'
        ? hint
        : `start it with real nodes: opkit cluster up --real-nodes 1${cluster === 'opkit' ? '' : ` --name ${cluster}`}`,
    );
  }
}

export const buildCommand: Command = {
  name: 'build',
  summary: 'build the operator image (without a container engine, or with docker, podman or buildah)',
  options: {
    image: { type: 'string' },
    engine: { type: 'string' },
    output: { type: 'string' },
    archive: { type: 'string' },
    context: { type: 'string' },
    file: { type: 'string' },
    load: { type: 'boolean' },
    cluster: { type: 'string' },
    'require-engine': { type: 'boolean' },
    'skip-unsupported-run': { type: 'boolean' },
  },
  help: `Usage: opkit build [--image <img>] [--archive <file>] [--load [--cluster <name>]]
       opkit build --engine docker|podman|buildah|any [--image <img>] [--require-engine]

Prepares a self-contained build context (default .opkit/build-context: the Dockerfile, src/, package.json
with the production dependencies, the local @opkit packages packed into vendor/), then builds the image
without a container engine: it follows the Dockerfile (COPY, WORKDIR, ENV, USER, ENTRYPOINT, CMD; RUN npm
runs npm on the host into the layer) on top of a local base, opkit.local/node:24 for node:24* (Debian slim
from apt's mirror + the Node 24 binary of the npm node package; built once, cached), and writes an OCI
archive (default .opkit/image.oci.tar). The Dockerfile stays valid for docker build with the official base.

With --engine, that engine builds the context instead, if it is installed and working (\`<engine> info\`
answers); without a working one it says so and leaves the context ready: exit code 0, or 1 with --require-engine.

Flags:
  --image <img>         the image to build (default controller:latest, the placeholder of config/manager)
  --archive <file>      where opkit's builder writes the OCI archive (default .opkit/image.oci.tar)
  --context <dir>       use this directory as the build context as it is (no preparation), e.g. a monorepo root
  --file <Dockerfile>   with --context: the Dockerfile (default ./Dockerfile)
  --load                import the image into the real nodes of the local cluster (opkit cluster up --real-nodes 1)
  --cluster <name>      with --load: the local cluster's name (default opkit)
  --skip-unsupported-run  opkit's builder skips (and names) the RUN steps it cannot follow instead of failing:
                        only for steps the image works without (a cache warm-up, say)
  --engine <engine>     build with docker, podman or buildah instead (machines that have one); any: the
                        first of them that works
  --output <dir>        where to write the build context (default .opkit/build-context)
  --require-engine      build with an engine (like --engine any) and fail (exit 1) when none can build

Examples:
  opkit build --image opkit.local/database-operator:dev --load && opkit deploy --local --image opkit.local/database-operator:dev
  opkit build --image registry.example.com/database-operator:v0.1.0 --engine docker
  opkit build --context ../.. --file Dockerfile --image opkit.local/database-operator:dev   # operators/database
  opkit build --image database-operator:dev --engine podman
  opkit build --output /tmp/ctx && docker build -t my-operator:dev /tmp/ctx   # on a machine with an engine`,

  async run(ctx, { values }) {
    const image = str(values, 'image') ?? 'controller:latest';
    const wanted = str(values, 'engine');
    if (wanted !== undefined && wanted !== 'any' && !(ENGINES as readonly string[]).includes(wanted)) {
      throw new UsageError(
        `--engine must be one of ${ENGINES.join(', ')} or any, not "${wanted}"`,
        'e.g. opkit build --engine podman',
      );
    }
    const requireEngine = bool(values, 'require-engine', false);
    const given = str(values, 'context');
    if (given !== undefined && (wanted !== undefined || requireEngine))
      throw new UsageError(
        "--context works with opkit's builder",
        `with an engine: ${wanted ?? 'docker'} build -f <Dockerfile> <context>`,
      );
    const out = resolve(ctx.cwd, given ?? str(values, 'output') ?? '.opkit/build-context');
    if (given === undefined) {
      step(ctx.io, `preparing the build context in ${relative(ctx.cwd, out) || out}`);
      prepareBuildContext(ctx.cwd, out, ctx.io);
    }
    if (wanted === undefined && !requireEngine) {
      const archive = resolve(ctx.cwd, str(values, 'archive') ?? '.opkit/image.oci.tar');
      step(ctx.io, `building ${image} from the Dockerfile with opkit's builder (no container engine)`);
      const dockerfile = resolve(
        ctx.cwd,
        str(values, 'file') ?? (given === undefined ? join(out, 'Dockerfile') : 'Dockerfile'),
      );
      const built = await buildLocally(out, dockerfile, image, archive, ctx.env, ctx.io, {
        skipUnsupportedRun: bool(values, 'skip-unsupported-run', false),
      });
      const rel = relative(ctx.cwd, archive);
      const shownArchive = rel && !rel.startsWith('..') ? rel : archive;
      ctx.io.out(
        `built ${image} on ${built.base.used} (the local stand-in for ${built.base.named}: Debian + Node ${process.version}) into ${shownArchive}`,
      );
      if (bool(values, 'load', false)) {
        const cluster = str(values, 'cluster') ?? 'opkit';
        step(ctx.io, `loading ${image} into the real nodes of cluster "${cluster}"`);
        await loadIntoCluster(cluster, archive);
        ctx.io.out(`loaded ${image} into cluster "${cluster}"`);
        ctx.io.out(`next: opkit deploy --image ${image}`);
      } else
        ctx.io.out(
          `next: opkit cluster load-image ${shownArchive} (or build --load), then opkit deploy --image ${image}`,
        );
      return 0;
    }
    if (bool(values, 'load', false))
      throw new UsageError(
        "--load works with opkit's builder, not with --engine",
        `build without --engine to load it, or push it with the engine (docker push ${image})`,
      );

    const only = wanted === undefined || wanted === 'any' ? undefined : (wanted as Engine);
    step(ctx.io, `looking for a container engine (${only ?? ENGINES.join(', ')})`);
    const probes = (only ? [only] : [...ENGINES]).map((e) => probeEngine(e, ctx.env));
    const engine = probes.find((p) => p.working);
    const shown = relative(ctx.cwd, out) || out;
    if (!engine) {
      const why = probes
        .map((p) =>
          p.installed
            ? `${p.engine} is installed but cannot build (${p.engine} info: ${p.problem})`
            : `${p.engine} is not installed`,
        )
        .join('; ');
      const next = `build the ready context where an engine runs: docker build -t ${image} ${shown}`;
      if (requireEngine) throw new CliError(`no working container engine: ${why}`, next);
      ctx.io.out(`no working container engine: ${why}`);
      ctx.io.out(`the build context is ready in ${shown} (Dockerfile, package.json, src/, vendor/)`);
      ctx.io.out(`next: ${next}`);
      return 0;
    }
    const args = engine.engine === 'buildah' ? ['bud', '-t', image, out] : ['build', '-t', image, out];
    step(ctx.io, `${engine.engine} ${args.join(' ')}`);
    const built = spawnSync(engine.engine, args, { stdio: 'inherit', env: ctx.env });
    if (built.status !== 0) {
      throw new CliError(
        `${engine.engine} build failed (exit code ${built.status})`,
        `read the output above; the context is in ${shown}`,
      );
    }
    ctx.io.out(`built ${image} with ${engine.engine}`);
    ctx.io.out(
      `next: push it (${engine.engine === 'buildah' ? 'buildah' : engine.engine} push ${image}), then opkit deploy --image ${image}`,
    );
    return 0;
  },
};
