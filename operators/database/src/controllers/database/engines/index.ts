/** The engine modules, by spec.engine. */
import type { EngineName } from '../../../api/v1/database.ts';
import { mysql } from './mysql.ts';
import { postgres } from './postgres.ts';
import type { Engine } from './types.ts';

export const ENGINE_MODULES: Readonly<Record<EngineName, Engine>> = { mysql, postgres };

/** The engine module of a Database's spec.engine. */
export function engineFor(engine: EngineName): Engine {
  const e = ENGINE_MODULES[engine];
  if (!e) throw new Error(`unknown engine: ${String(engine)}`);
  return e;
}

export * from './common.ts';
export * from './mysql.ts';
export * from './postgres.ts';
export type * from './types.ts';
