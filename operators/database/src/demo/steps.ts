/**
 * The demo's observing steps: a line per status and pod change until the Databases are Running, then the
 * PostgreSQL Database's instances and the row through both Services. A step that fails throws DemoFailure
 * with the commands to look further.
 */
import { POSTGRES_IMAGE } from '@opkit/controlplane';
import { type Condition, type RestClient, sleep } from '@opkit/runtime';
import { type Database, Databases, ROLE_LABEL } from '../api/v1/database.ts';
import { describeStatus } from '../controllers/database/status.ts';
import type { Say } from './cluster.ts';
import { instanceTable, podProgress, stamp } from './format.ts';
import { databasePods, instanceRows, kubectlFor, rowCheck } from './postgres.ts';

/** A Database the demo waits for, and whether its pods run for real. */
export interface Target {
  name: string;
  real: boolean;
}

export class DemoFailure extends Error {
  readonly hints: string[];
  constructor(message: string, hints: string[]) {
    super(message);
    this.name = 'DemoFailure';
    this.hints = hints;
  }
}

function conditionsOf(db: Database | undefined): Condition[] {
  return (db?.status?.conditions as Condition[] | undefined) ?? [];
}
/** Prints a line per status change (and, for real pods, per pod change) until every target is Running. */
export async function waitRunning(
  client: RestClient,
  namespace: string,
  targets: Target[],
  timeoutMs: number,
  say: Say,
  kubeconfig: string,
): Promise<Map<string, Database>> {
  const started = Date.now();
  // Never silent for long: a line at least every 30 s while nothing changes.
  let said = started;
  const print = say;
  say = (line) => {
    said = Date.now();
    print(line);
  };
  const last = new Map<string, string>();
  const lastPods = new Map<string, string>();
  const done = new Map<string, Database>();
  const width = Math.max(...targets.map((t) => t.name.length));
  for (;;) {
    for (const t of targets) {
      if (done.has(t.name)) continue;
      const db = await client.get(Databases.resource, { namespace, name: t.name });
      const line = describeStatus(db.status, db.spec.replicas ?? 1);
      if (line !== last.get(t.name)) {
        say(`${stamp(started)} ${t.name.padEnd(width)} ${line}`);
        for (const c of conditionsOf(db).filter((c) =>
          c.type === 'Ready' ? c.status !== 'True' : c.status === 'True',
        ))
          say(`${' '.repeat(9 + width)} ${c.type}=${c.status} ${c.reason}: ${c.message}`);
        last.set(t.name, line);
      }
      if (t.real) {
        const pods = podProgress(await databasePods(client, namespace, t.name));
        if (pods !== lastPods.get(t.name)) {
          say(`${stamp(started)} ${t.name.padEnd(width)}   pods: ${pods}`);
          lastPods.set(t.name, pods);
        }
      }
      if (db.status?.phase === 'Running' && db.status.observedGeneration === db.metadata.generation)
        done.set(t.name, db);
    }
    if (done.size === targets.length) return done;
    if (Date.now() - said >= 30_000)
      say(
        `${stamp(started)} ... still waiting for ${targets
          .filter((t) => !done.has(t.name))
          .map((t) => t.name)
          .join(', ')}`,
      );
    if (Date.now() - started > timeoutMs) {
      const waiting = targets.filter((t) => !done.has(t.name));
      throw new DemoFailure(
        `not Running after ${Math.round(timeoutMs / 1000)} s: ${waiting.map((t) => `${namespace}/${t.name} (last: ${last.get(t.name) || 'no status'})`).join('; ')}`,
        [
          ...waiting.map((t) => `kubectl --kubeconfig ${kubeconfig} describe db ${t.name} -n ${namespace}`),
          `kubectl --kubeconfig ${kubeconfig} get pods -n ${namespace} -o wide; kubectl --kubeconfig ${kubeconfig} logs -n ${namespace} <pod> --all-containers`,
          `kubectl --kubeconfig ${kubeconfig} get events -n ${namespace} --sort-by=.metadata.creationTimestamp`,
          'a longer --timeout (seconds) if the machine is busy',
        ],
      );
    }
    await sleep(500);
  }
}

/** The per-instance table, then the row written through the read-write Service and read through the read-only one. */
export async function showPostgres(
  client: RestClient,
  db: Database,
  kubeconfig: string,
  timeoutMs: number,
  say: Say,
): Promise<void> {
  const name = db.metadata.name ?? '';
  const namespace = db.metadata.namespace ?? 'default';
  say(
    `\n${name}: Running ${db.status?.readyReplicas}/${db.spec.replicas}, primary ${db.status?.currentPrimary ?? '-'}, system identifier ${db.status?.systemIdentifier ?? '-'}`,
  );
  const { rows, note } = await instanceRows(client, db, kubectlFor(kubeconfig));
  say(instanceTable(rows));
  if (note) say(`(${note})`);

  const ro = `${name}-ro`;
  say(
    `\nA row written through the read-write Service ${name}, read back through the read-only Service ${ro}`,
  );
  say(
    `  (a psql pod on ${POSTGRES_IMAGE}, the application user's password as env from Secret ${db.status?.secretName ?? `${name}-credentials`}):`,
  );
  const text = `hello from the demo at ${new Date().toISOString()}`;
  let check: Awaited<ReturnType<typeof rowCheck>>;
  try {
    check = await rowCheck(client, db, POSTGRES_IMAGE, text, Math.min(timeoutMs, 300_000));
  } catch (err) {
    const hint = (err as { hint?: string }).hint;
    throw new DemoFailure((err as Error).message, hint ? [hint] : []);
  }
  const pods = await databasePods(client, namespace, name);
  const who = (ip: string | undefined) =>
    pods.find((p) => p.status?.podIP === ip)?.metadata.name ?? ip ?? '-';
  const { written, read } = check;
  if (!written || !read || read.note !== text)
    throw new DemoFailure(
      `the psql pod did not report the row written and read back: ${JSON.stringify(check)}`,
      [`kubectl --kubeconfig ${kubeconfig} get pods -n ${namespace}`],
    );
  say(
    `  written: id ${written.id} through ${name}, answered by ${who(written.server)} (${written.recovery ? 'in recovery!' : 'the primary'})` +
      `${written.tries > 1 ? ` after ${written.tries} tries` : ''}`,
  );
  say(
    `  read:    "${read.note}" through ${ro}, answered by ${who(read.server)} (${read.recovery ? 'a replica, in recovery' : 'not in recovery!'})` +
      `${read.tries > 1 ? ` after ${read.tries} tries` : ''}`,
  );
  if (written.recovery || !read.recovery)
    throw new DemoFailure(
      'the Services did not reach the roles they select (read-write: the primary; read-only: a replica)',
      [`kubectl --kubeconfig ${kubeconfig} get pods,endpoints -n ${namespace} -L ${ROLE_LABEL}`],
    );
}
