/**
 * opkit's own image builder: follows the Dockerfile of a build context without a container engine.
 * Each stage is a directory standing for its filesystem (only what the Dockerfile adds), COPY copies into
 * it, RUN npm ... runs the host's npm in the stage's WORKDIR (with the image's Node first on PATH), and the
 * last stage's directory becomes one layer on top of the local base image (opkit.local/node:24 for
 * node:24*): an OCI archive that `ctr images import` and load-image take.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { basename, delimiter, dirname, isAbsolute, join, posix, relative } from 'node:path';
import {
  ensureImage,
  type ImageConfig,
  NODE_IMAGE,
  nodePackageBinary,
  writeDerivedImage,
} from '@opkit/controlplane';
import { CliError } from '../errors.ts';
import { type Io, step } from '../io.ts';
import { DockerfileError, localBaseFor, npmCommands, parseDockerfile, type Stage } from './dockerfile.ts';

export interface LocalBuild {
  archive: string;
  /** The official base the Dockerfile names, and the local image used for it. */
  base: { named: string; used: string };
}

interface StageState {
  root: string;
  workdir: string;
  config: ImageConfig;
}

function inside(root: string, path: string): string {
  return join(root, path.replace(/^\/+/, ''));
}

function copyStep(state: StageState, sources: string[], dest: string, from: string, io: Io): void {
  const target = inside(state.root, posix.isAbsolute(dest) ? dest : posix.join(state.workdir, dest));
  const intoDir = dest.endsWith('/') || sources.length > 1;
  for (const src of sources) {
    const path = join(from, src);
    const rel = relative(from, path);
    if (rel.startsWith('..') || isAbsolute(rel))
      throw new CliError(`COPY ${src}: outside the build context`, 'copy only files of the build context');
    if (!existsSync(path))
      throw new CliError(
        `COPY ${src}: not found in the build context`,
        'check the Dockerfile against the context',
      );
    if (statSync(path).isDirectory()) {
      mkdirSync(target, { recursive: true });
      cpSync(path, target, { recursive: true, verbatimSymlinks: true });
    } else {
      const file = intoDir ? join(target, basename(path)) : target;
      mkdirSync(join(file, '..'), { recursive: true });
      cpSync(path, file);
    }
  }
  io.err(`    COPY ${sources.join(' ')} ${dest}`);
}

function runStep(
  state: StageState,
  command: string,
  line: string,
  env: NodeJS.ProcessEnv,
  io: Io,
  skipUnsupported: boolean,
): void {
  const npm = npmCommands(command);
  if (!npm && skipUnsupported) {
    io.err(`    RUN ${line}: skipped (--skip-unsupported-run: the image lacks what this step would add)`);
    return;
  }
  if (!npm)
    throw new DockerfileError(
      0,
      `RUN ${line}: opkit's builder runs only npm commands (on the host); --skip-unsupported-run builds without this step`,
    );
  const cwd = inside(state.root, state.workdir);
  mkdirSync(cwd, { recursive: true });
  for (const args of npm) {
    // The host's npm cache is not part of the image: cleaning it would only slow the next build.
    if (args[0] === 'cache' && args[1] === 'clean') continue;
    io.err(`    RUN npm ${args.join(' ')} (on the host, in the layer)`);
    // The host's npm cache first (no registry may be reachable), unless the user says otherwise. The image's
    // Node first on PATH: what npm runs (a compile-cache warm-up) must be the Node the image runs.
    const npmEnv = {
      ...env,
      PATH: `${dirname(nodePackageBinary().path)}${delimiter}${env.PATH ?? ''}`,
      npm_config_prefer_offline: env.npm_config_prefer_offline ?? 'true',
    };
    const r = spawnSync('npm', args, { cwd, env: npmEnv, encoding: 'utf8' });
    if (r.status !== 0) {
      throw new CliError(
        `npm ${args.join(' ')} failed (exit code ${r.status}):\n${(r.stderr || r.stdout).trim().split('\n').slice(-15).join('\n')}`,
        'fix the dependencies in package.json (the same command fails in docker build), then build again',
      );
    }
    const said = r.stdout.trim().split('\n').at(-1);
    if (said) io.err(`      ${said}`);
  }
}

/** Builds the image `image` from `dockerfile` and the `context` directory into `archive`. */
export async function buildLocally(
  context: string,
  dockerfile: string,
  image: string,
  archive: string,
  env: NodeJS.ProcessEnv,
  io: Io,
  opts: { skipUnsupportedRun?: boolean } = {},
): Promise<LocalBuild> {
  const stages: Stage[] = parseDockerfile(readFileSync(dockerfile, 'utf8'));
  const work = join(archive, '..', `.build-${process.pid}`);
  rmSync(work, { recursive: true, force: true });
  const states = new Map<string, StageState>();
  let last: StageState | undefined;
  let official: { named: string; used: string } | undefined;
  try {
    for (const [i, stage] of stages.entries()) {
      const parent = states.get(stage.base);
      const state: StageState = parent
        ? { root: join(work, `stage-${i}`), workdir: parent.workdir, config: { ...parent.config } }
        : { root: join(work, `stage-${i}`), workdir: '/', config: {} };
      mkdirSync(state.root, { recursive: true });
      if (parent) cpSync(parent.root, state.root, { recursive: true, verbatimSymlinks: true });
      else {
        const used = localBaseFor(stage.base, NODE_IMAGE);
        if (!used) {
          throw new CliError(
            `FROM ${stage.base}: opkit's builder has no local image for it (it has ${NODE_IMAGE} for node:24*)`,
            'base the image on node:24-slim, or build with --engine docker|podman|buildah where a registry is reachable',
          );
        }
        official = { named: stage.base, used };
      }
      step(io, `stage ${i + 1}/${stages.length}: FROM ${stage.base}${stage.name ? ` AS ${stage.name}` : ''}`);
      for (const s of stage.steps) {
        switch (s.op) {
          case 'WORKDIR':
            state.workdir = posix.resolve(state.workdir, s.path);
            mkdirSync(inside(state.root, state.workdir), { recursive: true });
            state.config.workingDir = state.workdir;
            break;
          case 'ENV':
            state.config.env = [...(state.config.env ?? []), ...s.pairs.map(([k, v]) => `${k}=${v}`)];
            break;
          case 'COPY': {
            const from = s.from === undefined ? context : states.get(s.from)?.root;
            if (!from)
              throw new CliError(`COPY --from=${s.from}: no such stage`, 'name the stage with FROM ... AS');
            copyStep(state, s.sources, s.dest, from, io);
            break;
          }
          case 'RUN':
            runStep(state, s.command, s.command, env, io, opts.skipUnsupportedRun === true);
            break;
          case 'USER':
            state.config.user = s.user;
            break;
          case 'ENTRYPOINT':
            state.config.entrypoint = s.argv;
            delete state.config.cmd;
            break;
          case 'CMD':
            state.config.cmd = s.argv;
            break;
          case 'EXPOSE':
            state.config.exposedPorts = [...(state.config.exposedPorts ?? []), ...s.ports];
            break;
          case 'STOPSIGNAL':
            state.config.stopSignal = s.signal;
            break;
        }
      }
      states.set(String(i), state);
      if (stage.name) states.set(stage.name, state);
      last = state;
    }
    if (!last || !official)
      throw new CliError('the Dockerfile builds nothing', 'add a FROM node:24-slim stage');
    const baseArchive = await ensureImage(official.used, (l) => io.err(l));
    const layer = join(work, 'layer.tar');
    const tar = spawnSync(
      'tar',
      ['-C', last.root, '--numeric-owner', '--owner=0', '--group=0', '--sort=name', '-cf', layer, '.'],
      { encoding: 'utf8' },
    );
    if (tar.status !== 0)
      throw new CliError(`tar of the image layer failed: ${tar.stderr}`, 'install GNU tar');
    mkdirSync(join(archive, '..'), { recursive: true });
    await writeDerivedImage(baseArchive, layer, image, last.config, join(work, 'oci'), archive);
    return { archive, base: official };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
