/**
 * The ConfigMap mirror example, run as its binary (examples/configmap-mirror/main.ts) against a real
 * kube-apiserver: create, update, tamper, unlabel, relabel and delete, each observed through the API,
 * with the number of successful reconciles on /metrics checked after each step against the binary's
 * own log, /readyz and /healthz,
 * leader election and a graceful SIGTERM that releases the Lease.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, start } from '@opkit/controlplane';
import {
  type ConfigMap,
  ConfigMaps,
  createClient,
  Events,
  isNotFound,
  LeaseResource,
  loadConfig,
  Namespaces,
  type RestClient,
} from '@opkit/runtime';
import {
  MANAGED_BY,
  MANAGED_BY_LABEL,
  MIRROR_LABEL,
  SOURCE_ANNOTATION,
} from '../../examples/configmap-mirror/mirror.ts';
import { eventually } from '../../src/testing/eventually.ts';

const MAIN = join(import.meta.dirname, '../../examples/configmap-mirror/main.ts');
const SRC = 'team-a';
const DST = 'mirror';
const LEASE = 'configmap-mirror.opkit.dev';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface LogLine {
  msg?: string;
  level?: string;
  [key: string]: unknown;
}

/** The binary as a child process, with its JSON log lines parsed. */
class Binary {
  readonly child: ChildProcess;
  readonly lines: LogLine[] = [];
  readonly stderr: string[] = [];
  readonly exited: Promise<number | null>;

  constructor(args: string[]) {
    this.child = spawn(process.execPath, [MAIN, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LOG_LEVEL: 'debug' },
    });
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      try {
        this.lines.push(JSON.parse(line) as LogLine);
      } catch {
        this.lines.push({ msg: line });
      }
    });
    createInterface({ input: this.child.stderr! }).on('line', (line) => this.stderr.push(line));
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code)));
  }

  find(msg: string): LogLine | undefined {
    return this.lines.find((l) => l.msg === msg);
  }

  /**
   * Successful reconciles of the mirror controller, counted from the binary's own log: with
   * LOG_LEVEL=debug the controller logs one 'Reconcile successful' line per successful reconcile.
   */
  successes(): number {
    return this.lines.filter((l) => l.controller === 'configmap-mirror' && l.msg === 'Reconcile successful')
      .length;
  }

  /** The last log lines and stderr, for assertion messages (debug lines of requests left out). */
  output(): string {
    const lines = this.lines.filter((l) => l.level !== 'debug' || l.reconcileID !== undefined);
    return [...lines.map((l) => JSON.stringify(l)), ...this.stderr].slice(-40).join('\n');
  }
}

describe('example: configmap-mirror against a real API server', { timeout: 300_000 }, () => {
  let cp: ControlPlane;
  let client: RestClient;
  let bin: Binary | undefined;

  before(
    async () => {
      cp = await start({ mode: 'apiserver' });
      client = createClient(loadConfig({ kubeconfig: cp.kubeconfigPath }), { fieldManager: 'example-test' });
      for (const name of [SRC, DST]) await client.create(Namespaces, { metadata: { name } });
    },
    { timeout: 180_000 },
  );

  after(async () => {
    if (bin && bin.child.exitCode === null) {
      bin.child.kill('SIGKILL');
      await bin.exited;
    }
    client?.close();
    await cp?.stop();
  });

  test('mirrors, follows and cleans up; metrics, probes, leader election, graceful shutdown', async () => {
    const b = new Binary([
      '--kubeconfig',
      cp.kubeconfigPath,
      '--source',
      SRC,
      '--target',
      DST,
      '--health-probe-bind-address',
      '127.0.0.1:0',
      '--metrics-bind-address',
      '127.0.0.1:0',
      '--leader-elect',
      '--leader-election-namespace',
      'default',
    ]);
    bin = b;
    const running = await eventually('the binary to report it is running', async () => {
      if (b.child.exitCode !== null) assert.fail(`the binary exited early:\n${b.output()}`);
      return b.find('configmap-mirror is running');
    });
    const probes = String(running.healthProbeAddress);
    const metricsAt = String(running.metricsAddress);

    const http = async (address: string, path: string) => {
      const res = await fetch(`http://${address}${path}`);
      return { status: res.status, body: await res.text() };
    };
    // Caches synced (the controller only starts after that), so ready.
    assert.deepEqual(await http(probes, '/readyz'), { status: 200, body: 'ok' });
    assert.deepEqual(await http(probes, '/healthz'), { status: 200, body: 'ok' });

    const reconciles = async (result: string): Promise<number> => {
      const { body } = await http(metricsAt, '/metrics');
      const m = new RegExp(
        `^controller_runtime_reconcile_total\\{controller="configmap-mirror",result="${result}"\\} (\\d+)$`,
        'm',
      ).exec(body);
      assert.ok(m, `controller_runtime_reconcile_total{result="${result}"} is exported`);
      return Number(m[1]);
    };
    /**
     * Waits for the copy to satisfy `check`, then for the reconciles to settle: the success count on
     * /metrics stops changing and equals the number of successful reconciles the binary logged. Each
     * step takes at least two: the one that writes the copy, and the one its own write wakes up (the
     * copies are watched), which finds nothing left to do. A reconcile storm would never settle.
     */
    let total = 0;
    const step = async (what: string, check: (copy: ConfigMap | undefined) => boolean) => {
      await eventually(`${what}: the copy`, async () => {
        const copy = await client.get(ConfigMaps, { namespace: DST, name: 'app' }).catch((err: unknown) => {
          if (isNotFound(err)) return undefined;
          throw err;
        });
        return check(copy) ? true : undefined;
      });
      let last = -1;
      let since = Date.now();
      const count = await eventually(`${what}: the reconciles to settle`, async () => {
        const n = await reconciles('success');
        if (n !== last) {
          last = n;
          since = Date.now();
          return undefined;
        }
        return n === b.successes() && Date.now() - since >= 750 ? n : undefined;
      }).catch((err: unknown) =>
        assert.fail(`${String(err)} (/metrics ${last}, logged ${b.successes()})\n${b.output()}`),
      );
      assert.ok(count - total >= 2, `${what}: ${count - total} successful reconciles, expected at least 2`);
      total = count;
    };
    const source = () => client.get(ConfigMaps, { namespace: SRC, name: 'app' });
    assert.equal(await reconciles('success'), 0, 'nothing to do at start');
    assert.equal(await reconciles('error'), 0);

    // 1. A labelled source is copied (reconcile 1 writes the copy, reconcile 2 is woken by the copy's
    //    ADDED event and finds nothing to do). An unlabelled one is not even watched.
    await client.create(ConfigMaps, { metadata: { namespace: SRC, name: 'plain' }, data: { a: '1' } });
    await client.create(ConfigMaps, {
      metadata: { namespace: SRC, name: 'app', labels: { [MIRROR_LABEL]: 'true', tier: 'web' } },
      data: { a: '1', gone: 'soon' },
    });
    await step('create', (copy) => copy?.data?.a === '1');
    const copy = (await client.get(ConfigMaps, { namespace: DST, name: 'app' })) as ConfigMap;
    assert.equal(copy.metadata.annotations?.[SOURCE_ANNOTATION], `${SRC}/app`);
    assert.deepEqual(copy.metadata.labels, { tier: 'web', [MANAGED_BY_LABEL]: MANAGED_BY });
    assert.deepEqual(copy.data, { a: '1', gone: 'soon' });

    // 2. The source changes: the copy follows, removed keys included.
    await client.update(ConfigMaps, { ...(await source()), data: { a: '2', b: 'new' } });
    await step('update', (c) => c?.data?.a === '2' && c.data.b === 'new' && !('gone' in c.data));

    // 3. Someone deletes the copy: it comes back.
    await client.delete(ConfigMaps, { namespace: DST, name: 'app' });
    await step('copy deleted', (c) => c !== undefined && c.metadata.uid !== copy.metadata.uid);

    // 4. Someone edits the copy: the edit is reverted.
    const current = await client.get(ConfigMaps, { namespace: DST, name: 'app' });
    await client.update(ConfigMaps, { ...current, data: { a: 'tampered' } });
    await step('copy edited', (c) => c?.data?.a === '2' && c.data.b === 'new');

    // 5. The source loses its label: the copy is deleted (the source left the labelled informer).
    const labelled = await source();
    await client.update(ConfigMaps, {
      ...labelled,
      metadata: { ...labelled.metadata, labels: { tier: 'web' } },
    });
    await step('unlabelled', (c) => c === undefined);

    // 6. Labelled again: copied again.
    const unlabelled = await source();
    await client.update(ConfigMaps, {
      ...unlabelled,
      metadata: { ...unlabelled.metadata, labels: { tier: 'web', [MIRROR_LABEL]: 'true' } },
    });
    await step('relabelled', (c) => c?.data?.a === '2');

    // 7. The source is deleted: so is the copy.
    await client.delete(ConfigMaps, { namespace: SRC, name: 'app' });
    await step('source deleted', (c) => c === undefined);

    // Nothing else happens afterwards; no errors at any point; the unlabelled source never got a copy.
    await sleep(1_000);
    assert.equal(await reconciles('success'), total);
    assert.equal(b.successes(), total);
    assert.equal(await reconciles('error'), 0);
    await assert.rejects(client.get(ConfigMaps, { namespace: DST, name: 'plain' }), isNotFound);
    const { body } = await http(metricsAt, '/metrics');
    assert.match(body, /^leader_election_master_status\{name="configmap-mirror\.opkit\.dev"\} 1$/m);
    assert.match(
      body,
      /^workqueue_adds_total\{name="configmap-mirror",controller="configmap-mirror"\} \d+$/m,
    );
    assert.match(body, /^controller_runtime_max_concurrent_reconciles\{controller="configmap-mirror"\} 1$/m);
    const events = await eventually('the Mirrored events', async () => {
      const list = await client.list(Events, { namespace: SRC });
      return list.items.some((e) => e.reason === 'Mirrored') ? list.items : undefined;
    });
    assert.ok(
      events.every((e) => e.regarding?.name === 'app' && e.reportingController === 'configmap-mirror'),
    );

    // Graceful shutdown on SIGTERM: exit 0, the Lease released for the next replica.
    b.child.kill('SIGTERM');
    const code = await Promise.race([b.exited, sleep(30_000).then(() => 'timeout' as const)]);
    assert.equal(code, 0, `exit code after SIGTERM\n${b.output()}`);
    const lease = await client.get(LeaseResource, { namespace: 'default', name: LEASE });
    assert.equal(lease.spec?.holderIdentity ?? '', '', 'the Lease is released on shutdown');
    assert.ok(b.find('configmap-mirror is running'));
  });
});
