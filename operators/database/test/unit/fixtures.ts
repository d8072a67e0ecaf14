/** Databases and helpers shared by the unit tests. */
import type { Secret } from '@opkit/runtime';
import type { Database, EngineName } from '../../src/api/v1/database.ts';
import { type RandomSource, SECRET_KEYS } from '../../src/controllers/database/desired/index.ts';

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
