/** Helpers shared by the engine modules: env from the Secret, probes, SQL/shell quoting snippets. */
import type { DefaultedDatabase } from '../../../api/v1/database.ts';
import { childNames, type DerivedSecretKey, type SecretKey } from '../desired/names.ts';
import type { EnvVar, Probe } from './types.ts';

/** An env var read from the credentials Secret (never an inline value). */
export function secretEnv(name: string, db: DefaultedDatabase, key: SecretKey | DerivedSecretKey): EnvVar {
  return { name, valueFrom: { secretKeyRef: { name: childNames(db).secret, key } } };
}

/** An env var from a key of the Database's ConfigMap, read when the container starts (no roll on change). */
export function configEnv(name: string, db: DefaultedDatabase, key: string): EnvVar {
  return { name, valueFrom: { configMapKeyRef: { name: childNames(db).configMap, key } } };
}

/** An env var from the pod's own metadata (downward API). */
export function fieldEnv(name: string, fieldPath: string): EnvVar {
  return { name, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath } } };
}

/** A plain env var: only for values that are not secrets (paths, host names, ports). */
export function valueEnv(name: string, value: string | number): EnvVar {
  return { name, value: String(value) };
}

export interface ProbeTiming {
  periodSeconds: number;
  timeoutSeconds: number;
  failureThreshold: number;
  initialDelaySeconds?: number;
}

/** An exec probe. */
export function execProbe(command: string[], timing: ProbeTiming): Probe {
  return { exec: { command }, successThreshold: 1, ...timing };
}

/**
 * Startup may take long (initdb, crash recovery, a large buffer pool): 2 s x 900 = 30 minutes before the
 * kubelet gives up. Liveness and readiness only start once startup succeeded (the kubelet then runs the
 * readiness probe at once). Every 2 s, not 10: a server that crashed and restarts in its container is
 * back within seconds, and the probe's period was the bulk of it (up to 10 s), longer than a failover's
 * failoverDelay counts: the restart in place, which loses nothing, lost the race to a failover.
 */
export const STARTUP_TIMING: ProbeTiming = { periodSeconds: 2, timeoutSeconds: 5, failureThreshold: 900 };
export const READINESS_TIMING: ProbeTiming = { periodSeconds: 10, timeoutSeconds: 5, failureThreshold: 3 };
/** A minute of failures before a restart: a busy server is not a dead one. */
export const LIVENESS_TIMING: ProbeTiming = { periodSeconds: 10, timeoutSeconds: 5, failureThreshold: 6 };

/** Every env var name a script requires with `${NAME:?}`: the tests check the pod provides them. */
export function requiredEnv(script: string): string[] {
  return [...new Set([...script.matchAll(/\$\{([A-Z_][A-Z0-9_]*):\?/g)].map((m) => m[1] ?? ''))].sort();
}

/** Single-quotes a value for POSIX sh. */
export function shQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
