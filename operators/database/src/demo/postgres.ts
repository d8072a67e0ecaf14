/**
 * The demo's real part: a PostgreSQL 15 Database on real pods, the per-instance replication status read on
 * the primary, and a row written through the read-write Service and read back through the read-only one by a
 * short-lived psql pod (the application user's password reaches it as env from the Secret, never printed).
 */
import { spawnSync } from 'node:child_process';
import { type Client, NotFoundError, type Pod, Pods, sleep } from '@opkit/runtime';
import {
  type Database,
  LABEL_INSTANCE,
  LABEL_MANAGED_BY,
  ROLE_LABEL,
  ROLE_PRIMARY,
} from '../api/v1/database.ts';
import { childNames, SECRET_KEYS } from '../controllers/database/desired/names.ts';
import { compareStrings } from '../controllers/database/order.ts';
import { type InstanceRow, parseReplication, parseRowCheck, type RowCheck } from './format.ts';

export const PG_DEMO_NAME = 'demo-pg';
/** The label of the demo's own psql pods (so a run cleans up what an interrupted one left). */
export const DEMO_CLIENT_LABEL = 'opkit.dev/demo-client';

/** The real part's Database: postgres 15, 3 instances, on the locally built image. */
export function postgresDatabase(namespace: string, image: string): Database {
  return {
    apiVersion: 'myapp.example.com/v1',
    kind: 'Database',
    metadata: { name: PG_DEMO_NAME, namespace },
    spec: { engine: 'postgres', version: '15', storage: '1Gi', replicas: 3, image },
  };
}

/**
 * The seed's sample for a mixed cluster: its pods pinned to the simulated (kwok) nodes, tolerating their
 * taint (there is no MySQL image for the real node). Unchanged when the cluster has no real node.
 */
export function onSimulatedNodes(sample: Database, mixed: boolean): Database {
  if (!mixed) return sample;
  return {
    ...sample,
    spec: {
      ...sample.spec,
      nodeSelector: { ...sample.spec.nodeSelector, type: 'kwok' },
      tolerations: [
        ...(sample.spec.tolerations ?? []),
        { key: 'opkit.dev/simulated', operator: 'Exists', effect: 'NoSchedule' },
      ],
    },
  };
}

export type Kubectl = (args: string[]) => { code: number; stdout: string; stderr: string };

export function kubectlFor(kubeconfig: string): Kubectl | undefined {
  if (spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status !== 0) return undefined;
  return (args) => {
    const r = spawnSync('kubectl', ['--kubeconfig', kubeconfig, ...args], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    return { code: r.status ?? -1, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
  };
}

const REPLICATION_SQL =
  'SELECT application_name, state, pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), ' +
  'extract(epoch FROM replay_lag) FROM pg_stat_replication ORDER BY application_name';

/**
 * The instances of a Database: role and readiness from the pods, streaming and replay lag from the
 * primary's pg_stat_replication (psql over the local socket in the primary's container: the superuser is
 * reachable there only). Without kubectl the replication columns stay empty and `note` says why.
 */
export async function instanceRows(
  client: Client,
  db: Database,
  kubectl: Kubectl | undefined,
): Promise<{ rows: InstanceRow[]; note?: string }> {
  const namespace = db.metadata.namespace ?? 'default';
  const pods = await databasePods(client, namespace, db.metadata.name ?? '');
  const primary = pods.find((p) => p.metadata.labels?.[ROLE_LABEL] === ROLE_PRIMARY)?.metadata.name;
  let replication: ReturnType<typeof parseReplication> = [];
  let note: string | undefined;
  if (!kubectl) note = 'kubectl is not installed: the streaming columns need `kubectl exec` on the primary';
  else if (!primary) note = 'no pod is labelled primary yet';
  else {
    const r = kubectl([
      'exec',
      '-n',
      namespace,
      primary,
      '-c',
      'postgres',
      '--',
      'psql',
      '-X',
      '-At',
      '-F',
      '|',
      '-h',
      '/var/run/postgresql',
      '-U',
      'postgres',
      '-d',
      'postgres',
      '-c',
      REPLICATION_SQL,
    ]);
    if (r.code === 0) replication = parseReplication(r.stdout);
    else note = `pg_stat_replication on ${primary} could not be read: ${r.stderr.trim() || `exit ${r.code}`}`;
  }
  const rows = pods.map((p) => {
    const name = p.metadata.name ?? '';
    const rep = replication.find((r) => r.name === name);
    return {
      name,
      role: p.metadata.labels?.[ROLE_LABEL] ?? '-',
      ready: p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true,
      ...(rep ? { replication: rep } : {}),
    };
  });
  return { rows, ...(note ? { note } : {}) };
}

export async function databasePods(client: Client, namespace: string, name: string): Promise<Pod[]> {
  const list = await client.list(Pods, {
    namespace,
    labelSelector: `${LABEL_INSTANCE}=${name},${LABEL_MANAGED_BY}`,
  });
  return list.items.sort((a, b) => compareStrings(a.metadata.name ?? '', b.metadata.name ?? ''));
}

/**
 * The script of the psql pod: writes a row (the note) through the read-write Service, then reads it back
 * through the read-only Service, and reports both with the address of the server that answered, whether it
 * was in recovery (a replica) and how many tries it took. A client retries: the write while the primary does
 * not accept connections (up to 30 times, 2 s apart: a restarting primary shows as tries, not as a failure),
 * the read while replication catches up (up to 60 times, 1 s apart). psql reads the SQL from stdin, so the
 * note is a psql variable, quoted by psql (`:'note'`).
 */
export const ROW_CHECK_SCRIPT = `set -u
report=\${REPORT:-/dev/termination-log}
q() { psql -X -q -At -F '|' -v ON_ERROR_STOP=1 -v note="$NOTE" -h "$1"; }
tries=0
while :; do
  tries=$((tries + 1))
  got=$(q "$RW_HOST" <<'SQL' 2>&1 || true
CREATE TABLE IF NOT EXISTS demo_rows (id bigserial PRIMARY KEY, note text NOT NULL, written_at timestamptz NOT NULL DEFAULT now());
WITH w AS (INSERT INTO demo_rows (note) VALUES (:'note') RETURNING id)
SELECT 'written', id, host(inet_server_addr()), pg_is_in_recovery() FROM w;
SQL
)
  case "$got" in written\\|*) printf '%s|%s\\n' "$got" "$tries" >>"$report"; break ;; esac
  if [ "$tries" -ge 30 ]; then echo "no write through $RW_HOST after $tries tries: $got" >&2; exit 1; fi
  sleep 2
done
tries=0
while :; do
  tries=$((tries + 1))
  got=$(q "$RO_HOST" <<'SQL' 2>&1 || true
SELECT 'read', note, host(inet_server_addr()), pg_is_in_recovery() FROM demo_rows WHERE note = :'note' LIMIT 1;
SQL
)
  case "$got" in read\\|*) printf '%s|%s\\n' "$got" "$tries" >>"$report"; exit 0 ;; esac
  if [ "$tries" -ge 60 ]; then echo "the row did not reach $RO_HOST after $tries tries: $got" >&2; exit 1; fi
  sleep 1
done`;

/** The psql pod: the local postgres image, the app user's credentials as env from the Secret. */
export function rowCheckPod(db: Database, image: string, note: string, podName: string): Pod {
  const names = childNames(db);
  const namespace = db.metadata.namespace ?? 'default';
  const fromSecret = (name: string, key: string) => ({
    name,
    valueFrom: { secretKeyRef: { name: names.secret, key } },
  });
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: podName, namespace, labels: { [DEMO_CLIENT_LABEL]: db.metadata.name ?? '' } },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 1,
      securityContext: {
        runAsUser: 999,
        runAsGroup: 999,
        runAsNonRoot: true,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [
        {
          name: 'psql',
          image,
          imagePullPolicy: 'IfNotPresent',
          command: ['bash', '-c', ROW_CHECK_SCRIPT],
          env: [
            fromSecret('PGUSER', SECRET_KEYS.appUsername),
            fromSecret('PGPASSWORD', SECRET_KEYS.appPassword),
            fromSecret('PGDATABASE', SECRET_KEYS.database),
            { name: 'RW_HOST', value: `${names.readWrite}.${namespace}.svc.cluster.local` },
            { name: 'RO_HOST', value: `${names.readOnly}.${namespace}.svc.cluster.local` },
            { name: 'NOTE', value: note },
          ],
          terminationMessagePolicy: 'FallbackToLogsOnError',
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
        },
      ],
    },
  };
}

export class RowCheckError extends Error {
  readonly hint: string;
  constructor(message: string, hint: string) {
    super(message);
    this.name = 'RowCheckError';
    this.hint = hint;
  }
}

/**
 * Runs the psql pod to completion and returns its report; the pod is deleted afterwards (and the demo's
 * psql pods an interrupted run left, before).
 */
export async function rowCheck(
  client: Client,
  db: Database,
  image: string,
  note: string,
  timeoutMs: number,
): Promise<RowCheck & { pod: string }> {
  const namespace = db.metadata.namespace ?? 'default';
  const left = await client.list(Pods, { namespace, labelSelector: DEMO_CLIENT_LABEL });
  for (const p of left.items) await deletePod(client, namespace, p.metadata.name ?? '');
  const name = `${db.metadata.name}-psql-${Date.now().toString(36)}`;
  await client.create(Pods, rowCheckPod(db, image, note, name));
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const pod = await client.get(Pods, { namespace, name });
      const terminated = pod.status?.containerStatuses?.[0]?.state?.terminated;
      if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') {
        const message = terminated?.message ?? '';
        if (pod.status.phase === 'Failed')
          throw new RowCheckError(
            `the psql pod ${namespace}/${name} failed (exit ${terminated?.exitCode ?? '?'}): ${message.trim()}`,
            `see kubectl describe db ${db.metadata.name} -n ${namespace} and the pods' logs`,
          );
        return { ...parseRowCheck(message), pod: name };
      }
      if (Date.now() > deadline) {
        const waiting = pod.status?.containerStatuses?.[0]?.state?.waiting;
        throw new RowCheckError(
          `the psql pod ${namespace}/${name} did not finish in ${Math.round(timeoutMs / 1000)} s (phase ${pod.status?.phase ?? '-'}${waiting ? `, ${waiting.reason}: ${waiting.message ?? ''}` : ''})`,
          `kubectl describe pod ${name} -n ${namespace}`,
        );
      }
      await sleep(500);
    }
  } finally {
    await deletePod(client, namespace, name);
  }
}

async function deletePod(client: Client, namespace: string, name: string): Promise<void> {
  try {
    await client.delete(Pods, { namespace, name });
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
  }
}
