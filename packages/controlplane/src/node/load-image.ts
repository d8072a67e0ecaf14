/** `opkit cluster load-image`: imports a user's OCI image into real nodes' containerd (what `kind load` does). */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nodePaths } from './configs.ts';
import { readRecords } from './network.ts';
import { sh } from './sys.ts';

export class LoadImageError extends Error {
  readonly hint: string;
  constructor(message: string, hint: string) {
    super(message);
    this.name = 'LoadImageError';
    this.hint = hint;
  }
}

export function importArchive(containerdSock: string, archive: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('ctr', ['-a', containerdSock, '-n', 'k8s.io', 'images', 'import', archive], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve()
        : reject(
            new LoadImageError(
              `ctr images import ${archive} failed: ${err.trim()}`,
              'pass an OCI archive (tar of an OCI layout, e.g. from `buildah push ... oci-archive:x.tar`) or a layout directory',
            ),
          ),
    );
  });
}

/** Imports an OCI archive, or a directory holding an OCI layout, into every given containerd. */
export async function loadImage(sockets: string[], source: string): Promise<void> {
  if (!existsSync(source))
    throw new LoadImageError(`${source} does not exist`, 'pass the path of an OCI archive or layout');
  let archive = source;
  let tmp: string | undefined;
  if (existsSync(join(source, 'index.json'))) {
    tmp = mkdtempSync(join(tmpdir(), 'opkit-image-'));
    archive = join(tmp, 'image.tar');
    sh('tar', ['-C', source, '-cf', archive, '.']);
  }
  try {
    for (const s of sockets) await importArchive(s, archive);
  } finally {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  }
}

/** The containerd sockets of the real nodes whose state lives under `clusterDir`. */
export function nodeSockets(clusterDir: string): string[] {
  const record = readRecords().find((r) => r.dirs.some((d) => d.startsWith(clusterDir)));
  if (!record) {
    throw new LoadImageError(
      `no real nodes run under ${clusterDir}`,
      'start the cluster with real nodes: opkit cluster up --real-nodes 1',
    );
  }
  return record.network.nodes.map((n) => nodePaths(join(record.dirs[0]!, n.name)).containerdSock);
}
