/**
 * opkit's local volume provisioner, the counterpart of kind's local-path provisioner:
 * - binds each new PVC of its StorageClasses to a PersistentVolume it creates: a hostPath directory
 *   (`standard`), or, in a cluster with real nodes, for the `local-xfs` class (parameter type: loop-xfs) a
 *   loop-mounted XFS file exposed as a `local` PV for the real nodes (loop-volume.ts: the pod sees its
 *   size, fsGroup applies);
 * - grows the PV and the claim's status.capacity when the claim's request grows (online expansion; an XFS
 *   volume's filesystem first);
 * - deletes Released PVs whose reclaim policy is Delete (and their directory or file); keeps Retain ones.
 * kube-controller-manager's PV controller does the binding itself once the PV names the claim.
 */
import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeClient } from '../kube-client.ts';
import { createLoopVolume, growLoopVolume, loopVolume, removeLoopVolume } from './loop-volume.ts';
import { parseQuantity } from './quantity.ts';

export const PROVISIONER_NAME = 'opkit.dev/local-volume';
export const DEFAULT_STORAGE_CLASS = 'standard';
/** With real nodes: volumes that are real filesystems of their size (loop-mounted XFS). */
export const XFS_STORAGE_CLASS = 'local-xfs';
const LOOP_XFS = 'loop-xfs';
const PROVISIONED_BY = 'pv.kubernetes.io/provisioned-by';

interface Meta {
  name: string;
  namespace?: string;
  uid: string;
  resourceVersion: string;
  deletionTimestamp?: string;
  annotations?: Record<string, string>;
}
interface Pvc {
  metadata: Meta;
  spec: {
    storageClassName?: string;
    volumeName?: string;
    accessModes?: string[];
    volumeMode?: string;
    resources?: { requests?: { storage?: string } };
  };
  status?: { phase?: string; capacity?: { storage?: string } };
}
interface Pv {
  metadata: Meta;
  spec: {
    persistentVolumeReclaimPolicy?: string;
    hostPath?: { path: string };
    local?: { path: string };
    capacity?: { storage?: string };
  };
  status?: { phase?: string };
}
interface StorageClass {
  metadata: Meta;
  provisioner: string;
  reclaimPolicy?: string;
  parameters?: Record<string, string>;
}

export function defaultStorageClass(): Record<string, unknown> {
  return {
    apiVersion: 'storage.k8s.io/v1',
    kind: 'StorageClass',
    metadata: {
      name: DEFAULT_STORAGE_CLASS,
      annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' },
    },
    provisioner: PROVISIONER_NAME,
    reclaimPolicy: 'Delete',
    volumeBindingMode: 'Immediate',
    allowVolumeExpansion: true,
  };
}

/** The StorageClass of loop-mounted XFS volumes (a cluster with real nodes has it; not the default). */
export function xfsStorageClass(): Record<string, unknown> {
  return {
    apiVersion: 'storage.k8s.io/v1',
    kind: 'StorageClass',
    metadata: { name: XFS_STORAGE_CLASS },
    provisioner: PROVISIONER_NAME,
    parameters: { type: LOOP_XFS },
    reclaimPolicy: 'Delete',
    volumeBindingMode: 'Immediate',
    allowVolumeExpansion: true,
  };
}

export interface ProvisionerOptions {
  /** Where volume directories (or files and mount points) are created. */
  volumeRoot: string;
  /**
   * Loop-mounted XFS volumes for claims of a class with parameter `type: loop-xfs`, as `local` PVs usable
   * on the nodes with these labels (the real nodes: they share the host's mounts). Without it, such
   * claims are refused (logged) and every volume is a hostPath directory.
   */
  loopXfs?: { nodeLabels: Record<string, string> };
  log?: (msg: string) => void;
}

export class VolumeProvisioner {
  private readonly client: KubeClient;
  private readonly opts: ProvisionerOptions;
  private readonly abort = new AbortController();
  private loops: Promise<void>[] = [];
  private readonly classes = new Map<string, StorageClass>();

  constructor(client: KubeClient, opts: ProvisionerOptions) {
    this.client = client;
    this.opts = opts;
  }

  start(): void {
    mkdirSync(this.opts.volumeRoot, { recursive: true });
    this.loops = [
      this.inform<StorageClass>('/apis/storage.k8s.io/v1/storageclasses', (sc, deleted) => {
        if (deleted) this.classes.delete(sc.metadata.name);
        else this.classes.set(sc.metadata.name, sc);
      }),
      this.inform<Pvc>('/api/v1/persistentvolumeclaims', (pvc, deleted) =>
        deleted ? undefined : this.syncClaim(pvc),
      ),
      this.inform<Pv>('/api/v1/persistentvolumes', (pv, deleted) =>
        deleted ? undefined : this.syncVolume(pv),
      ),
    ];
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await Promise.allSettled(this.loops);
  }

  private ours(className: string | undefined): StorageClass | undefined {
    const sc = className ? this.classes.get(className) : undefined;
    return sc?.provisioner === PROVISIONER_NAME ? sc : undefined;
  }

  private async syncClaim(pvc: Pvc): Promise<void> {
    if (pvc.metadata.deletionTimestamp) return;
    const sc = this.ours(pvc.spec.storageClassName);
    if (!sc) return;
    const requested = pvc.spec.resources?.requests?.storage;
    if (!requested) return;
    if (!pvc.spec.volumeName) {
      await this.provision(pvc, sc, requested);
      return;
    }
    const capacity = pvc.status?.capacity?.storage;
    if (pvc.status?.phase === 'Bound' && capacity && parseQuantity(requested) > parseQuantity(capacity)) {
      await this.expand(pvc, sc, requested);
    }
  }

  /** The volume itself and the PV's source (and node affinity) pointing at it. */
  private async createVolume(sc: StorageClass, name: string, size: string): Promise<Record<string, unknown>> {
    const loop = this.opts.loopXfs;
    if (sc.parameters?.type === LOOP_XFS) {
      if (!loop) throw new Error(`StorageClass ${sc.metadata.name}: loop-xfs volumes need real nodes`);
      const v = loopVolume(this.opts.volumeRoot, name);
      await createLoopVolume(v, parseQuantity(size));
      const matchExpressions = Object.entries(loop.nodeLabels).map(([key, value]) => ({
        key,
        operator: 'In',
        values: [value],
      }));
      return {
        local: { path: v.mountPoint },
        nodeAffinity: { required: { nodeSelectorTerms: [{ matchExpressions }] } },
      };
    }
    const path = join(this.opts.volumeRoot, name);
    mkdirSync(path, { recursive: true });
    // World-writable, as local-path-provisioner makes its directories: the kubelet applies no fsGroup to a
    // hostPath volume, so a pod running as a non-root user (postgres 999) could not write a root-owned 0755
    // directory on a real node.
    chmodSync(path, 0o777);
    return { hostPath: { path, type: 'DirectoryOrCreate' } };
  }

  private async provision(pvc: Pvc, sc: StorageClass, size: string): Promise<void> {
    const name = `pvc-${pvc.metadata.uid}`;
    const source = await this.createVolume(sc, name, size);
    const pv = {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name, annotations: { [PROVISIONED_BY]: PROVISIONER_NAME } },
      spec: {
        capacity: { storage: size },
        accessModes: pvc.spec.accessModes ?? ['ReadWriteOnce'],
        volumeMode: pvc.spec.volumeMode ?? 'Filesystem',
        persistentVolumeReclaimPolicy: sc.reclaimPolicy ?? 'Delete',
        storageClassName: sc.metadata.name,
        ...source,
        claimRef: {
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          namespace: pvc.metadata.namespace,
          name: pvc.metadata.name,
          uid: pvc.metadata.uid,
        },
      },
    };
    const res = await this.client.raw('POST', '/api/v1/persistentvolumes', pv);
    if (res.code === 201)
      this.opts.log?.(`provisioned ${name} (${size}) for ${pvc.metadata.namespace}/${pvc.metadata.name}`);
    else if (res.code !== 409) throw new Error(`creating ${name} failed: HTTP ${res.code} ${res.text}`);
  }

  private async expand(pvc: Pvc, sc: StorageClass, size: string): Promise<void> {
    const pvPath = `/api/v1/persistentvolumes/${pvc.spec.volumeName}`;
    if (sc.parameters?.type === LOOP_XFS) {
      const pv = await this.client.json<Pv>('GET', pvPath);
      if (pv.spec.local?.path.startsWith(this.opts.volumeRoot))
        await growLoopVolume(loopVolume(this.opts.volumeRoot, pv.metadata.name), parseQuantity(size));
    }
    await this.client.json(
      'PATCH',
      pvPath,
      { spec: { capacity: { storage: size } } },
      'application/merge-patch+json',
    );
    const claimPath = `/api/v1/namespaces/${pvc.metadata.namespace}/persistentvolumeclaims/${pvc.metadata.name}/status`;
    await this.client.json(
      'PATCH',
      claimPath,
      { status: { capacity: { storage: size }, conditions: null, allocatedResources: { storage: size } } },
      'application/merge-patch+json',
    );
    this.opts.log?.(`expanded ${pvc.spec.volumeName} to ${size}`);
  }

  private async syncVolume(pv: Pv): Promise<void> {
    if (pv.metadata.annotations?.[PROVISIONED_BY] !== PROVISIONER_NAME) return;
    if (pv.status?.phase !== 'Released' || pv.spec.persistentVolumeReclaimPolicy !== 'Delete') return;
    const res = await this.client.raw('DELETE', `/api/v1/persistentvolumes/${pv.metadata.name}`);
    if (res.code !== 200 && res.code !== 404)
      throw new Error(`deleting ${pv.metadata.name}: HTTP ${res.code}`);
    if (pv.spec.hostPath?.path.startsWith(this.opts.volumeRoot))
      rmSync(pv.spec.hostPath.path, { recursive: true, force: true });
    if (pv.spec.local?.path.startsWith(this.opts.volumeRoot))
      await removeLoopVolume(loopVolume(this.opts.volumeRoot, pv.metadata.name));
    this.opts.log?.(`deleted released volume ${pv.metadata.name}`);
  }

  /** list + watch with relist on any error; every object goes through `handle` (errors retried on the next pass). */
  private async inform<T extends { metadata: Meta }>(
    path: string,
    handle: (obj: T, deleted: boolean) => Promise<void> | void,
  ): Promise<void> {
    const signal = this.abort.signal;
    const safe = async (obj: T, deleted: boolean) => {
      try {
        await handle(obj, deleted);
      } catch (err) {
        if (!signal.aborted) this.opts.log?.(`storage: ${(err as Error).message}`);
      }
    };
    while (!signal.aborted) {
      try {
        const list = await this.client.json<{ metadata: { resourceVersion: string }; items: T[] }>(
          'GET',
          path,
        );
        for (const item of list.items) await safe(item, false);
        let rv = list.metadata.resourceVersion;
        // Re-watch from the last resourceVersion; a periodic relist (every ~30 s) retries failed work.
        const until = Date.now() + 30_000;
        while (!signal.aborted && Date.now() < until) {
          // Events are handled as they arrive, one at a time, in order.
          let chain = Promise.resolve();
          let failed: string | undefined;
          await this.client.watch(
            `${path}?watch=1&allowWatchBookmarks=true&timeoutSeconds=30&resourceVersion=${rv}`,
            (raw) => {
              const e = raw as { type: string; object: T };
              if (e.type === 'ERROR') failed = JSON.stringify(e.object);
              if (failed) return;
              rv = e.object.metadata.resourceVersion;
              if (e.type !== 'BOOKMARK') chain = chain.then(() => safe(e.object, e.type === 'DELETED'));
            },
            signal,
          );
          await chain;
          if (failed) throw new Error(`watch ${path}: ${failed}`);
        }
      } catch (err) {
        if (signal.aborted) return;
        this.opts.log?.(`storage: ${(err as Error).message}; retrying`);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }
}
