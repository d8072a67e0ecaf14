/**
 * An OCI image layout written by opkit, without a registry or an image tool: one uncompressed layer
 * (a rootfs tar), its config, a manifest and an index naming the image, tarred as one archive that
 * `ctr images import` loads. The JSON builders are pure; writeOciArchive() does the file work.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, mkdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface ImageConfig {
  env?: string[];
  entrypoint?: string[];
  cmd?: string[];
  workingDir?: string;
  user?: string;
  stopSignal?: string;
  exposedPorts?: string[];
  volumes?: string[];
}

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
  platform?: { architecture: string; os: string };
}

export const MEDIA = {
  layer: 'application/vnd.oci.image.layer.v1.tar',
  config: 'application/vnd.oci.image.config.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  index: 'application/vnd.oci.image.index.v1+json',
} as const;

const sha256 = (data: string | Buffer) => `sha256:${createHash('sha256').update(data).digest('hex')}`;

/** Go's architecture name for this machine, as OCI platforms spell it. */
export function ociArch(arch: string = process.arch): string {
  return arch === 'x64' ? 'amd64' : arch === 'ia32' ? '386' : arch;
}

/** The image config: the container defaults and the rootfs diff ids (uncompressed layer = its digest). */
export function imageConfigJson(
  config: ImageConfig,
  layerDigests: string | string[],
  arch = ociArch(),
): string {
  const diffIds = typeof layerDigests === 'string' ? [layerDigests] : layerDigests;
  const set = (list?: string[]) => (list ? Object.fromEntries(list.map((k) => [k, {}])) : undefined);
  return JSON.stringify({
    architecture: arch,
    os: 'linux',
    created: '1970-01-01T00:00:00Z',
    config: {
      Env: config.env,
      Entrypoint: config.entrypoint,
      Cmd: config.cmd,
      WorkingDir: config.workingDir,
      User: config.user,
      StopSignal: config.stopSignal,
      ExposedPorts: set(config.exposedPorts),
      Volumes: set(config.volumes),
    },
    rootfs: { type: 'layers', diff_ids: diffIds },
    history: diffIds.map(() => ({ created: '1970-01-01T00:00:00Z', created_by: 'opkit image build' })),
  });
}

export function manifestJson(config: Descriptor, layers: Descriptor | Descriptor[]): string {
  const list = Array.isArray(layers) ? layers : [layers];
  return JSON.stringify({ schemaVersion: 2, mediaType: MEDIA.manifest, config, layers: list });
}

/** `name` is the full reference (opkit.local/shell:1); containerd reads io.containerd.image.name. */
export function indexJson(manifest: Descriptor, name: string, arch = ociArch()): string {
  const tag = name.slice(name.lastIndexOf(':') + 1);
  return JSON.stringify({
    schemaVersion: 2,
    mediaType: MEDIA.index,
    manifests: [
      {
        ...manifest,
        platform: { architecture: arch, os: 'linux' },
        annotations: { 'io.containerd.image.name': name, 'org.opencontainers.image.ref.name': tag },
      },
    ],
  });
}

async function fileDigest(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return `sha256:${hash.digest('hex')}`;
}

/**
 * Turns a rootfs tar (or several, bottom layer first) into an OCI archive at `out` (the tars are moved
 * into the layout, not copied). `work` is a scratch directory, removed afterwards.
 */
export async function writeOciArchive(
  rootfsTars: string | string[],
  name: string,
  config: ImageConfig,
  work: string,
  out: string,
): Promise<void> {
  const blobs = join(work, 'layout', 'blobs', 'sha256');
  mkdirSync(blobs, { recursive: true });
  const blob = (data: string, mediaType: string): Descriptor => {
    const digest = sha256(data);
    writeFileSync(join(blobs, digest.slice(7)), data);
    return { mediaType, digest, size: Buffer.byteLength(data) };
  };
  const layers: Descriptor[] = [];
  for (const tar of typeof rootfsTars === 'string' ? [rootfsTars] : rootfsTars) {
    const digest = await fileDigest(tar);
    layers.push({ mediaType: MEDIA.layer, digest, size: statSync(tar).size });
    renameSync(tar, join(blobs, digest.slice(7)));
  }
  const configDesc = blob(
    imageConfigJson(
      config,
      layers.map((l) => l.digest),
    ),
    MEDIA.config,
  );
  const manifest = blob(manifestJson(configDesc, layers), MEDIA.manifest);
  writeFileSync(join(work, 'layout', 'index.json'), indexJson(manifest, name));
  writeFileSync(join(work, 'layout', 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  const tmp = `${out}.${process.pid}.tmp`;
  const tar = spawnSync('tar', ['-C', join(work, 'layout'), '-cf', tmp, '.'], { encoding: 'utf8' });
  if (tar.status !== 0) throw new Error(`writing the OCI archive ${out} failed: ${tar.stderr}`);
  renameSync(tmp, out);
  rmSync(work, { recursive: true, force: true });
}
