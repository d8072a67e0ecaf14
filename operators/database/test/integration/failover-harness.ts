/**
 * The harness of the failover scenarios on real pods (postgres-failover.test.ts, issue 12): a cluster of two
 * real nodes, the operator as its own process (so that it can be SIGKILLed), a 3-instance PostgreSQL 15
 * Database, a writer pod committing numbered rows through the read-write Service and printing every
 * acknowledged id, a sampler, and the figures of each scenario.
 *
 * The sampler, every 500 ms: from the writer pod, `SELECT pg_is_in_recovery()` over TCP on every instance's
 * pod IP (what a client reaching a pod directly sees, also on a node whose kubelet is dead, where exec no
 * longer reaches), and the pods labelled primary. Two instances out of recovery, or two pods labelled
 * primary, is a two-primary sample.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { copyFileSync, createWriteStream, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { POSTGRES_IMAGE } from '@opkit/controlplane';
import { loadConfig, newPodExecutor, type Pod, type PodExecutor, Pods } from '@opkit/runtime';
import { Databases } from '../../src/api/v1/database.ts';
import {
  type Cluster,
  createNamespace,
  eventually,
  getDb,
  OPERATOR_DIR,
  sample,
  sleep,
  startCluster,
  waitForPhase,
} from './helpers.ts';
import { kubectlFor, secretValue } from './pg-pods.ts';

export const NS = 'failover';
export const NAME = 'pg';
export const PODS = [0, 1, 2].map((i) => `${NAME}-${i}`);
/** The writer's label: a drain of its node leaves it (--pod-selector), so that its log stays readable. */
export const WRITER_LABEL = 'opkit-test';

export interface Figures {
  scenario: string;
  writesAgainMs: number;
  lost: number;
  acknowledged: number;
  /** Samples with two instances out of recovery (by pod IP) or two pods labelled primary. */
  twoPrimaries: number;
  rejoinMs: number;
  note?: string;
}

export interface ScenarioOptions {
  /** Assert 0 acknowledged rows lost (switchover, synchronous mode). */
  zeroLoss: boolean;
  /** The primary must change: wait for the failover or switchover to complete. */
  moves: boolean;
  /** Assert 0 two-primary samples (default true). */
  onePrimary?: boolean;
  /** After the writes resumed and before the rejoin is awaited (e.g. start the kubelet again). */
  afterWrites?: () => Promise<void>;
}

export class FailoverBench {
  readonly figures: Figures[] = [];
  cluster!: Cluster;
  exec!: PodExecutor;
  private operator: { child: ChildProcess; exited: Promise<unknown> } | undefined;
  private operators = 0;
  private saved = 0;

  kubectl(args: string[], timeoutMs = 60_000): { code: number; out: string; stdout: string } {
    return kubectlFor(this.cluster)(args, { timeoutMs });
  }

  diagnose(): string {
    return [
      this.kubectl(['get', 'nodes,pods,endpoints', '-n', NS, '-o', 'wide', '--show-labels']).out,
      this.kubectl(['get', 'db', '-n', NS, '-o', 'yaml']).out.slice(-4000),
      ...PODS.map((p) => this.kubectl(['logs', '-n', NS, p, '-c', 'postgres', '--tail', '30']).out),
      // The primary lease: the Lease and what each sidecar said (lease.sh logs only when it acts).
      this.kubectl(['get', 'lease', '-n', NS, `${NAME}-primary`, '-o', 'yaml']).out.slice(-1500),
      ...PODS.map((p) =>
        this.kubectl(['logs', '-n', NS, p, '-c', 'credentials'])
          .out.split('\n')
          .filter((l) => l.startsWith('lease:'))
          .slice(-10)
          .map((l) => `${p} ${l}`)
          .join('\n'),
      ),
      this.kubectl(['get', 'events', '-n', NS, '--sort-by=.lastTimestamp']).out.slice(-4000),
    ].join('\n');
  }

  /**
   * OPKIT_FAILOVER_LOGS=<dir>: after each scenario, every container's log (the previous instance's too),
   * the pods, the Database, the Lease, the Events and the operator's log so far, in
   * `<dir>/<n>-<scenario>/`. Kept after the test removes its cluster.
   */
  saveLogs(scenario: string): void {
    const root = process.env.OPKIT_FAILOVER_LOGS;
    if (!root) return;
    const dir = join(root, `${++this.saved}-${scenario.replace(/[^a-z0-9]+/gi, '-')}`);
    mkdirSync(dir, { recursive: true });
    const save = (file: string, args: string[]) =>
      writeFileSync(join(dir, file), this.kubectl(args, 120_000).out);
    save('pods.yaml', ['get', 'pods', '-n', NS, '-o', 'yaml']);
    save('database.yaml', ['get', 'db', '-n', NS, '-o', 'yaml']);
    save('lease.yaml', ['get', 'lease', '-n', NS, `${NAME}-primary`, '-o', 'yaml']);
    save('events.txt', ['get', 'events', '-n', NS, '--sort-by=.lastTimestamp']);
    for (const p of PODS) {
      for (const c of ['bootstrap', 'postgres', 'credentials']) {
        save(`${p}-${c}.log`, ['logs', '-n', NS, p, '-c', c, '--timestamps']);
        save(`${p}-${c}.previous.log`, ['logs', '-n', NS, p, '-c', c, '--timestamps', '--previous']);
      }
    }
    for (let n = 1; n <= this.operators; n++) {
      const log = join(this.cluster.cp.dir, `operator-${n}.log`);
      if (existsSync(log)) copyFileSync(log, join(dir, `operator-${n}.log`));
    }
    process.stdout.write(`# ${scenario}: logs in ${dir}\n`);
  }

  /** The operator as its own process (`node src/main.ts`), its output in the cluster's directory. */
  startOperator(): void {
    const n = ++this.operators;
    const log = createWriteStream(join(this.cluster.cp.dir, `operator-${n}.log`));
    const child = spawn(
      process.execPath,
      [
        join(OPERATOR_DIR, 'src', 'main.ts'),
        '--kubeconfig',
        this.cluster.kubeconfig,
        '--metrics-bind-address',
        '0',
        '--health-probe-bind-address',
        '0',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LOG_LEVEL: 'info' } },
    );
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    // Never left behind when the test process ends early.
    const kill = () => child.kill('SIGKILL');
    process.once('exit', kill);
    this.operator = {
      child,
      exited: new Promise((r) =>
        child.once('exit', () => {
          process.off('exit', kill);
          r(undefined);
        }),
      ),
    };
  }
  async killOperator(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const op = this.operator;
    this.operator = undefined;
    if (!op || op.child.exitCode !== null || op.child.signalCode !== null) return;
    op.child.kill(signal);
    await op.exited;
  }

  /** SQL as the superuser over the pod's socket (pods/exec, as the operator does); undefined on failure. */
  async sql(pod: string, query: string, dbname = 'postgres'): Promise<string | undefined> {
    try {
      const r = await this.exec.exec(
        { namespace: NS, name: pod },
        {
          container: 'postgres',
          command: ['psql', '-XAtq', '-U', 'postgres', '-d', dbname, '-c', query],
          timeoutMs: 5000,
        },
      );
      return r.exitCode === 0 ? r.stdout.trim() : undefined;
    } catch {
      return undefined;
    }
  }

  async pods(): Promise<Pod[]> {
    return (await this.cluster.client.list(Pods, { namespace: NS })).items;
  }
  async nodeOf(pod: string): Promise<string> {
    const p = (await this.pods()).find((x) => x.metadata.name === pod);
    return p?.spec?.nodeName ?? '';
  }

  async start(): Promise<void> {
    this.cluster = await startCluster({ nodes: 0, realNodes: 2, images: [POSTGRES_IMAGE] });
    this.exec = newPodExecutor(await loadConfig({ kubeconfig: this.cluster.kubeconfig }));
    await createNamespace(this.cluster.client, NS);
    this.startOperator();
    await this.cluster.client.create(
      Databases.resource,
      sample(NS, NAME, {
        engine: 'postgres',
        version: '15',
        storage: '1Gi',
        replicas: 3,
        image: POSTGRES_IMAGE,
        failoverDelay: 10,
      }),
    );
    try {
      await waitForPhase(this.cluster.client, NS, NAME, 'Running', 600_000);
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${this.diagnose()}`);
    }
    const first = await this.primaryNow();
    const app = await secretValue(this.cluster, NS, NAME, 'app-username');
    // Retried: sql() gives up after 5 s, which an exec on a loaded machine (load 40) can take.
    await eventually(
      'the table w created',
      async () =>
        (await this.sql(
          first,
          `CREATE TABLE IF NOT EXISTS w (id int PRIMARY KEY); ALTER TABLE w OWNER TO ${app}; SELECT 1`,
          'app',
        )) === '1',
      60_000,
      1000,
    );
    await this.cluster.client.create(Pods, writerPod(app, this.cluster.cp.realNodes[1] ?? '') as never);
    try {
      await eventually('the writer acknowledging rows', () => this.writerLog().ok.size >= 20, 300_000, 2000);
    } catch (err) {
      const tail = this.kubectl(['logs', '-n', NS, 'writer', '--tail', '20']).out;
      throw new Error(`${(err as Error).message}\nwriter: ${tail}\n${this.diagnose()}`);
    }
  }

  async stop(): Promise<void> {
    if (this.figures.length > 0) process.stdout.write(figuresTable(this.figures));
    await this.killOperator('SIGTERM');
    await this.cluster?.stop();
  }

  /** Every 500 ms: instances out of recovery (by pod IP, from the writer pod), pods labelled primary. */
  sampler() {
    let stop = false;
    let samples = 0;
    let twoWritable = 0;
    let twoLabelled = 0;
    /** When two instances were first and last seen out of recovery, and which (by pod name). */
    let firstTwo = 0;
    let lastTwo = 0;
    const twoSeen: string[] = [];
    const run = (async () => {
      while (!stop) {
        const pods = (await this.pods()).filter((p) => PODS.includes(p.metadata.name ?? ''));
        const ips = pods.map((p) => p.status?.podIP).filter((ip): ip is string => !!ip);
        const byIp = new Map(pods.map((p) => [p.status?.podIP, p.metadata.name]));
        let writable = 0;
        let writableOnes: string[] = [];
        try {
          const r = await this.exec.exec(
            { namespace: NS, name: 'writer' },
            {
              container: 'writer',
              command: [
                'sh',
                '-c',
                `for h in ${ips.join(' ')}; do (echo "$h $(psql "host=$h connect_timeout=1" -XAtqc 'SELECT pg_is_in_recovery()' 2>/dev/null || echo -)") & done; wait`,
              ],
              timeoutMs: 10_000,
            },
          );
          writableOnes = r.stdout
            .split('\n')
            .map((l) => l.trim().split(' '))
            .filter(([, answer]) => answer === 'f')
            .map(([ip]) => byIp.get(ip) ?? ip ?? '?');
          writable = writableOnes.length;
        } catch {
          // The writer's node unreachable for a moment: no sample.
        }
        const labelled = pods.filter(
          (p) => !p.metadata.deletionTimestamp && p.metadata.labels?.['myapp.example.com/role'] === 'primary',
        );
        samples++;
        if (writable > 1) {
          twoWritable++;
          firstTwo ||= Date.now();
          lastTwo = Date.now();
          twoSeen.push(`${new Date().toISOString()} ${writableOnes.join(',')}`);
        }
        if (labelled.length > 1) twoLabelled++;
        await sleep(500);
      }
    })();
    return {
      async stop() {
        stop = true;
        await run;
        return { samples, twoWritable, twoLabelled, twoWritableMs: lastTwo - firstTwo, twoSeen };
      },
    };
  }

  /** The writer's log: acknowledged ids with their time, and the time of the last failure. */
  writerLog(): { ok: Map<number, number>; lastFail: number } {
    const out = this.kubectl(['logs', '-n', NS, 'writer', '--tail', '-1'], 120_000).stdout;
    const ok = new Map<number, number>();
    let lastFail = 0;
    for (const line of out.split('\n')) {
      const [what, id, at] = line.trim().split(' ');
      if (what === 'ok') ok.set(Number(id), Number(at));
      else if (what === 'fail') lastFail = Math.max(lastFail, Number(at));
    }
    return { ok, lastFail };
  }
  /** Writes succeed again after `since` (ms): the first acknowledged id after the last failure. */
  async writesAgain(since: number): Promise<number> {
    return eventually(
      'writes acknowledged again after the fault',
      () => {
        const { ok, lastFail } = this.writerLog();
        const from = Math.max(lastFail, since);
        const after = [...ok.values()].filter((t) => t > from).sort((a, b) => a - b);
        if (after.length < 5) return undefined;
        // No failure since the fault: the writes never stopped.
        return lastFail >= since ? (after[0] as number) : since;
      },
      300_000,
      2000,
    );
  }
  /** Acknowledged ids missing from the table (read on the primary), up to the table's highest id. */
  async lostRows(primary: string): Promise<{ lost: number; acknowledged: number }> {
    const { ok } = this.writerLog();
    const ids = new Set(
      ((await this.sql(primary, "SELECT string_agg(id::text, ' ') FROM w", 'app')) ?? '')
        .split(' ')
        .filter(Boolean)
        .map(Number),
    );
    const maxInTable = Math.max(0, ...ids);
    let lost = 0;
    let acknowledged = 0;
    for (const id of ok.keys()) {
      if (id > maxInTable) continue;
      acknowledged++;
      if (!ids.has(id)) lost++;
    }
    return { lost, acknowledged };
  }
  async primaryNow(): Promise<string> {
    return eventually(
      'a primary recorded and ready',
      async () => {
        const db = await getDb(this.cluster.client, NS, NAME);
        return !db.status?.failover && db.status?.currentPrimary ? db.status.currentPrimary : undefined;
      },
      300_000,
      1000,
    );
  }
  /** The former primary streams from the new one (pg_stat_replication on the new primary). */
  async rejoined(former: string, primary: string, since: number): Promise<number> {
    await eventually(
      `${former} streaming from ${primary}`,
      async () =>
        (await this.sql(
          primary,
          `SELECT state FROM pg_stat_replication WHERE application_name = '${former}'`,
        )) === 'streaming',
      600_000,
      1000,
    );
    return Date.now() - since;
  }
  /** Every instance Ready and streaming from the primary: the start of each scenario. */
  async settled(): Promise<string> {
    const primary = await this.primaryNow();
    await eventually(
      'every replica streaming',
      async () =>
        (await this.sql(primary, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")) ===
        String(PODS.length - 1),
      600_000,
      1000,
    );
    return primary;
  }

  async scenario(
    name: string,
    fault: (primary: string) => Promise<string | undefined>,
    opts: ScenarioOptions,
  ): Promise<{ former: string; primary: string }> {
    const former = await this.settled();
    const completedBefore = (await getDb(this.cluster.client, NS, NAME)).status?.lastFailover?.completedAt;
    const s = this.sampler();
    const at = Date.now();
    let note: string | undefined;
    let writes: number;
    let primary: string;
    let rejoinMs: number;
    try {
      note = await fault(former);
      if (opts.moves) {
        await eventually(
          'the failover or switchover completed',
          async () => {
            const d = await getDb(this.cluster.client, NS, NAME);
            return !d.status?.failover && d.status?.lastFailover?.completedAt !== completedBefore;
          },
          300_000,
          1000,
        );
      }
      writes = await this.writesAgain(at);
      primary = await this.primaryNow();
      await opts.afterWrites?.();
      rejoinMs = primary === former ? 0 : await this.rejoined(former, primary, at);
    } catch (err) {
      const seen = await s.stop();
      // Recorded all the same: a scenario that did not finish is a figure too.
      this.figures.push({
        scenario: name,
        writesAgainMs: Number.NaN,
        lost: Number.NaN,
        acknowledged: 0,
        twoPrimaries: seen.twoWritable + seen.twoLabelled,
        rejoinMs: Number.NaN,
        note: `FAILED: ${(err as Error).message.split('\n')[0]}`,
      });
      this.saveLogs(name);
      throw new Error(`${name}: ${(err as Error).message}\n${this.diagnose()}`);
    }
    const seen = await s.stop();
    const { lost, acknowledged } = await this.lostRows(primary);
    this.figures.push({
      scenario: name,
      writesAgainMs: writes - at,
      lost,
      acknowledged,
      twoPrimaries: seen.twoWritable + seen.twoLabelled,
      rejoinMs,
      ...(note ? { note } : {}),
    });
    if (seen.twoWritable > 0) {
      const f = this.figures.at(-1) as Figures;
      f.note = `${f.note ?? ''}; two out of recovery by pod IP in ${seen.twoWritable} samples over ${(seen.twoWritableMs / 1000).toFixed(1)} s`;
    }
    process.stdout.write(`# ${name}: ${JSON.stringify(this.figures.at(-1))} (${seen.samples} samples)\n`);
    const failures = [
      (opts.onePrimary ?? true) && seen.twoWritable > 0
        ? `two instances out of recovery in ${seen.twoWritable} samples (${seen.twoSeen.join('; ')})`
        : '',
      seen.twoLabelled > 0 ? `two pods labelled primary in ${seen.twoLabelled} samples` : '',
      opts.zeroLoss && lost > 0 ? `${lost} acknowledged rows lost` : '',
    ].filter(Boolean);
    this.saveLogs(name);
    // What CI keeps of a failed run is its output: the diagnosis goes with the failure.
    assert.deepEqual(failures, [], `${name}: ${failures.join('; ')}\n${this.diagnose()}`);
    return { former, primary };
  }
}

/**
 * The writer: a numbered row per transaction through the read-write Service (a new connection each time),
 * every acknowledged id printed with its time. On `node` (never the node a scenario stops the kubelet of).
 */
function writerPod(app: string, node: string) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'writer', namespace: NS, labels: { [WRITER_LABEL]: 'writer' } },
    spec: {
      restartPolicy: 'Never',
      nodeSelector: { 'kubernetes.io/hostname': node },
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'writer',
          image: POSTGRES_IMAGE,
          command: [
            'sh',
            '-c',
            `i=0; while :; do i=$((i+1));
  if psql "host=${NAME} connect_timeout=2" -XAtq -c "INSERT INTO w VALUES ($i)" >/dev/null 2>&1;
  then echo "ok $i $(date +%s%3N)"; else echo "fail $i $(date +%s%3N) $(psql "host=${NAME} connect_timeout=2" -XAtq -c 'SELECT 1' 2>&1 | head -1)"; fi; sleep 0.02; done`,
          ],
          env: [
            { name: 'PGUSER', value: app },
            { name: 'PGDATABASE', value: 'app' },
            { name: 'PGPORT', value: '5432' },
            {
              name: 'PGPASSWORD',
              valueFrom: { secretKeyRef: { name: `${NAME}-credentials`, key: 'app-password' } },
            },
          ],
        },
      ],
    },
  };
}

function figuresTable(figures: Figures[]): string {
  const rows = figures.map(
    (f) =>
      `| ${f.scenario} | ${(f.writesAgainMs / 1000).toFixed(1)} s | ${f.lost} / ${f.acknowledged} | ${f.twoPrimaries} | ${(f.rejoinMs / 1000).toFixed(1)} s | ${f.note ?? ''} |`,
  );
  return `\nfailover figures (this machine, ${new Date().toISOString()}):\n| scenario | time to writes again | rows lost / acknowledged | two-primary samples | rejoin | note |\n| --- | --- | --- | --- | --- | --- |\n${rows.join('\n')}\n`;
}
