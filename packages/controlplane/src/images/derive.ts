/**
 * An image on top of another (what a Dockerfile's FROM does): the base's layers and config, then one
 * more layer (a tar of the files the build adds) and the build's config over the base's. Used by
 * `opkit build` to put an operator on opkit.local/node:24 without an image tool.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { type ImageConfig, writeOciArchive } from './oci.ts';

interface RawDescriptor {
  digest: string;
  mediaType: string;
}

interface RawConfig {
  config?: {
    Env?: string[];
    Entrypoint?: string[];
    Cmd?: string[];
    WorkingDir?: string;
    User?: string;
    StopSignal?: string;
    ExposedPorts?: Record<string, unknown>;
    Volumes?: Record<string, unknown>;
  };
}

/** The config of an image from its OCI config JSON (the inverse of imageConfigJson). */
export function imageConfigOf(json: string): ImageConfig {
  const c = (JSON.parse(json) as RawConfig).config ?? {};
  const out: ImageConfig = {};
  if (c.Env) out.env = c.Env;
  if (c.Entrypoint) out.entrypoint = c.Entrypoint;
  if (c.Cmd) out.cmd = c.Cmd;
  if (c.WorkingDir) out.workingDir = c.WorkingDir;
  if (c.User) out.user = c.User;
  if (c.StopSignal) out.stopSignal = c.StopSignal;
  if (c.ExposedPorts) out.exposedPorts = Object.keys(c.ExposedPorts);
  if (c.Volumes) out.volumes = Object.keys(c.Volumes);
  return out;
}

/**
 * The build's config over the base's, as Docker merges them: ENV by name (the build's wins), ENTRYPOINT
 * set without CMD clears the base's CMD, the rest replaces when set.
 */
export function mergeImageConfig(base: ImageConfig, over: ImageConfig): ImageConfig {
  const env = new Map<string, string>();
  for (const e of [...(base.env ?? []), ...(over.env ?? [])]) env.set(e.split('=')[0]!, e);
  const merged: ImageConfig = { ...base, ...over };
  if (env.size) merged.env = [...env.values()];
  if (over.entrypoint && !over.cmd) delete merged.cmd;
  const ports = [...new Set([...(base.exposedPorts ?? []), ...(over.exposedPorts ?? [])])];
  if (ports.length) merged.exposedPorts = ports;
  return merged;
}

/**
 * Writes `out`: the image `name` = the base archive's layers + `layerTar` (moved, not copied), with
 * `config` merged over the base's. `work` is a scratch directory, removed afterwards.
 */
export async function writeDerivedImage(
  baseArchive: string,
  layerTar: string,
  name: string,
  config: ImageConfig,
  work: string,
  out: string,
): Promise<void> {
  const base = join(work, 'base');
  rmSync(work, { recursive: true, force: true });
  mkdirSync(base, { recursive: true });
  try {
    const tar = spawnSync('tar', ['-C', base, '-xf', baseArchive], { encoding: 'utf8' });
    if (tar.status !== 0) throw new Error(`reading the base image ${baseArchive} failed: ${tar.stderr}`);
    const blob = (d: RawDescriptor) => join(base, 'blobs', 'sha256', d.digest.slice('sha256:'.length));
    const index = JSON.parse(readFileSync(join(base, 'index.json'), 'utf8')) as {
      manifests: RawDescriptor[];
    };
    const manifest = JSON.parse(readFileSync(blob(index.manifests[0]!), 'utf8')) as {
      config: RawDescriptor;
      layers: RawDescriptor[];
    };
    const baseConfig = imageConfigOf(readFileSync(blob(manifest.config), 'utf8'));
    const layers = [...manifest.layers.map(blob), layerTar];
    await writeOciArchive(layers, name, mergeImageConfig(baseConfig, config), join(work, 'oci'), out);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
