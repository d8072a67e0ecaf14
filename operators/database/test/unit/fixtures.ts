/** Databases and helpers shared by the unit tests. */
import type { KubeObject, Resource, Secret } from '@opkit/runtime';
import type { FakeClient } from '@opkit/runtime/testing';
import type { Database, EngineName } from '../../src/api/v1/database.ts';
import { LABEL_MANAGED_BY, MANAGED_BY } from '../../src/api/v1/database.ts';
import { type RandomSource, SECRET_KEYS } from '../../src/controllers/database/desired/index.ts';
import {
  clientReader,
  MANAGED_KINDS,
  type Reader,
  type Recorder,
} from '../../src/controllers/database/index.ts';

export function database(
  engine: EngineName,
  spec: Partial<Database['spec']> = {},
  name = 'orders',
  namespace = 'shop',
): Database {
  return {
    apiVersion: 'myapp.example.com/v1',
    kind: 'Database',
    metadata: { name, namespace, uid: 'db-uid-1', generation: 1 },
    spec: {
      engine,
      version: engine === 'mysql' ? '8.4' : '16',
      storage: '10Gi',
      ...spec,
    },
  };
}

/** The Secret's values, decoded. */
export function decoded(secret: Secret | undefined): Record<string, string> {
  return Object.fromEntries(
    Object.entries(secret?.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
  );
}

export const PASSWORD_KEYS = [
  SECRET_KEYS.adminPassword,
  SECRET_KEYS.appPassword,
  SECRET_KEYS.replicationPassword,
] as const;

/** A deterministic RandomSource: a counter, so every call yields different bytes. */
export function counterRandom(): RandomSource & { calls: number } {
  let next = 0;
  const src = {
    calls: 0,
    randomBytes(size: number): Uint8Array {
      src.calls++;
      const out = new Uint8Array(size);
      for (let i = 0; i < size; i++) out[i] = next++ % 256;
      return out;
    },
  };
  return src;
}

/** Every string anywhere inside a value. */
export function allStrings(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) allStrings(v, out);
  else if (value && typeof value === 'object') for (const v of Object.values(value)) allStrings(v, out);
  return out;
}

export interface Recorded {
  type: 'Normal' | 'Warning';
  reason: string;
  note: string;
  related?: { kind?: string; name?: string };
}

const ref = (o: KubeObject | undefined) => (o ? { kind: o.kind, name: o.metadata.name } : undefined);

export class FakeRecorder implements Recorder {
  readonly events: Recorded[] = [];
  normal(_r: KubeObject, reason: string, _a: string, note: string, related?: KubeObject): void {
    this.events.push({ type: 'Normal', reason, note, ...(related ? { related: ref(related) } : {}) });
  }
  warning(_r: KubeObject, reason: string, _a: string, note: string, related?: KubeObject): void {
    this.events.push({ type: 'Warning', reason, note, ...(related ? { related: ref(related) } : {}) });
  }
}

/**
 * A Reader like the manager's cache: the child kinds (MANAGED_KINDS) only show objects labelled
 * app.kubernetes.io/managed-by=opkit-database-operator; Databases are all visible.
 */
export function managedOnlyReader(client: FakeClient): Reader {
  const inner = clientReader(client);
  const filtered = (res: Resource) =>
    MANAGED_KINDS.some((k) => k.group === res.group && k.plural === res.plural);
  const visible = (res: Resource, o: KubeObject) =>
    !filtered(res) || o.metadata.labels?.[LABEL_MANAGED_BY] === MANAGED_BY;
  return {
    async get<T extends KubeObject>(res: Resource<T>, key: { namespace?: string; name: string }) {
      const o = await inner.get(res, key);
      return o && visible(res, o) ? o : undefined;
    },
    async list<T extends KubeObject>(res: Resource<T>, opts: { namespace: string; labelSelector?: string }) {
      return (await inner.list(res, opts)).filter((o) => visible(res, o));
    },
  };
}
