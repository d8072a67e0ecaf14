/** The demo's pure parts: its flags, what it prints, the psql pod it runs and the sample it pins to kwok nodes. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import type { Pod } from '@opkit/runtime';
import { parse } from 'yaml';
import type { Database } from '../../src/api/v1/database.ts';
import { nodeHasImage, realNodesBlocked } from '../../src/demo/cluster.ts';
import {
  instanceTable,
  parseReplication,
  parseRowCheck,
  podProgress,
  podState,
  printerTable,
} from '../../src/demo/format.ts';
import { IN_CLUSTER_IMAGE, inClusterCommands } from '../../src/demo/in-cluster.ts';
import { demo, SAMPLE } from '../../src/demo/main.ts';
import { parseDemoArgs } from '../../src/demo/options.ts';
import {
  onSimulatedNodes,
  postgresDatabase,
  ROW_CHECK_SCRIPT,
  rowCheckPod,
} from '../../src/demo/postgres.ts';
import { elapsed } from '../../src/demo/progress.ts';

describe('demo flags', () => {
  it('defaults: the configured or local "opkit" cluster, namespace default, 600 s, real pods, in-process', () => {
    assert.deepEqual(parseDemoArgs([]), {
      local: false,
      kubeconfig: undefined,
      cluster: 'opkit',
      namespace: 'default',
      timeoutMs: 600_000,
      simulated: false,
      inCluster: false,
      verbose: false,
      help: false,
    });
  });

  it('keeps the existing flags and adds --cluster, --simulated, --in-cluster', () => {
    const o = parseDemoArgs([
      '--local',
      '--namespace',
      'team-a',
      '--timeout',
      '90',
      '--verbose',
      '--cluster',
      'x1',
    ]);
    assert.equal(o.local, true);
    assert.equal(o.namespace, 'team-a');
    assert.equal(o.timeoutMs, 90_000);
    assert.equal(o.verbose, true);
    assert.equal(o.cluster, 'x1');
    assert.equal(parseDemoArgs(['--kubeconfig', '/tmp/kc']).kubeconfig, '/tmp/kc');
    assert.equal(parseDemoArgs(['--simulated']).simulated, true);
    assert.equal(parseDemoArgs(['--in-cluster']).inCluster, true);
    assert.equal(parseDemoArgs(['-h']).help, true);
  });

  it('refuses bad values, naming the flag', () => {
    assert.throws(
      () => parseDemoArgs(['--timeout', 'soon']),
      /--timeout must be a number of seconds > 0, not "soon"/,
    );
    assert.throws(() => parseDemoArgs(['--timeout', '0']), /--timeout/);
    assert.throws(() => parseDemoArgs(['--timeout', '-5']), /--timeout/);
    assert.throws(() => parseDemoArgs(['--namespace', 'Team_A']), /--namespace must be a DNS label/);
    assert.throws(() => parseDemoArgs(['--cluster', 'a/b']), /--cluster must be a name/);
    assert.throws(() => parseDemoArgs(['--local', '--kubeconfig', 'kc']), /--local and --kubeconfig/);
    assert.throws(() => parseDemoArgs(['--in-cluster', '--simulated']), /--in-cluster and --simulated/);
    assert.throws(() => parseDemoArgs(['--replicas', '3']), /Unknown option '--replicas'/);
    assert.throws(() => parseDemoArgs(['extra']), /positional/);
  });

  it('demo() prints the usage with the error and exits 2 on a bad flag, 0 for --help, touching no cluster', async () => {
    const lines: string[] = [];
    assert.equal(await demo(['--timeout', 'x'], (l) => lines.push(l)), 2);
    assert.match(lines.join('\n'), /^error: --timeout must be/);
    assert.match(lines.join('\n'), /Usage: npm run demo/);
    const help: string[] = [];
    assert.equal(await demo(['--help'], (l) => help.push(l)), 0);
    assert.match(help.join('\n'), /--in-cluster/);
  });
});

const pod = (name: string, status: Pod['status'], spec: Partial<NonNullable<Pod['spec']>> = {}): Pod => ({
  metadata: { name },
  spec: { containers: [{ name: 'postgres' }], ...spec },
  status,
});

describe('demo printing', () => {
  it('a pod in a word, like kubectl: init, waiting reasons, Ready with restarts', () => {
    const init = { initContainers: [{ name: 'bootstrap' }] };
    assert.equal(podState(pod('p', { phase: 'Pending' }, init)), 'Init:0/1');
    assert.equal(
      podState(
        pod(
          'p',
          {
            phase: 'Pending',
            initContainerStatuses: [
              {
                name: 'bootstrap',
                image: '',
                imageID: '',
                ready: false,
                restartCount: 0,
                state: { terminated: { exitCode: 1 } },
              },
            ],
          },
          init,
        ),
      ),
      'Init:Error(bootstrap)',
    );
    assert.equal(
      podState(
        pod('p', {
          phase: 'Pending',
          containerStatuses: [
            {
              name: 'postgres',
              image: '',
              imageID: '',
              ready: false,
              restartCount: 0,
              state: { waiting: { reason: 'ErrImageNeverPull' } },
            },
          ],
        }),
      ),
      'ErrImageNeverPull',
    );
    const running = (ready: boolean, restarts = 0) =>
      pod('p', {
        phase: 'Running',
        conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }],
        containerStatuses: [
          { name: 'postgres', image: '', imageID: '', ready, restartCount: restarts, state: { running: {} } },
        ],
      });
    assert.equal(podState(running(true)), 'Ready');
    assert.equal(podState(running(false, 2)), 'Running, not ready (2 restarts)');
    assert.equal(
      podState({ ...running(true), metadata: { name: 'p', deletionTimestamp: '2026-01-01T00:00:00Z' } }),
      'Terminating',
    );
  });

  it('the pods of a Database on one line, by name', () => {
    assert.equal(podProgress([]), 'no pods yet');
    assert.equal(
      podProgress([pod('pg-1', { phase: 'Pending' }), pod('pg-0', { phase: 'Pending' })]),
      'pg-0 Pending, pg-1 Pending',
    );
  });

  it("pg_stat_replication's unaligned rows, and the per-instance table", () => {
    const rep = parseReplication('demo-pg-1|streaming|0|0.000812\ndemo-pg-2|catchup|16777216|\n\n');
    assert.deepEqual(rep, [
      { name: 'demo-pg-1', state: 'streaming', lagBytes: 0, lagSeconds: 0.000812 },
      { name: 'demo-pg-2', state: 'catchup', lagBytes: 16777216, lagSeconds: 0 },
    ]);
    const out = instanceTable([
      { name: 'demo-pg-0', role: 'primary', ready: true },
      { name: 'demo-pg-1', role: 'replica', ready: true, replication: rep[0]! },
      { name: 'demo-pg-2', role: 'replica', ready: false, replication: rep[1]! },
      { name: 'demo-pg-3', role: '-', ready: false },
    ]);
    assert.equal(
      out,
      [
        'INSTANCE    ROLE      READY   STREAMING            REPLAY LAG',
        'demo-pg-0   primary   yes     -                    -',
        'demo-pg-1   replica   yes     yes                  0 B, 0.0 s',
        'demo-pg-2   replica   no      no (catchup)         16.0 MiB, 0.0 s',
        'demo-pg-3   -         no      no (not connected)   -',
      ].join('\n'),
    );
  });

  it("the psql pod's report: the row written and where it was read", () => {
    assert.deepEqual(parseRowCheck('written|7|10.232.0.5|f|1\nread|hello|10.232.0.6|t|3\n'), {
      written: { id: '7', server: '10.232.0.5', recovery: false, tries: 1 },
      read: { note: 'hello', server: '10.232.0.6', recovery: true, tries: 3 },
    });
    assert.deepEqual(parseRowCheck('psql: error: connection refused'), {});
  });

  it("the Databases' printer columns (without kubectl)", () => {
    const now = Date.parse('2026-12-04T18:00:00Z');
    const db = postgresDatabase('default', 'opkit.local/postgres:15');
    db.metadata.creationTimestamp = '2026-12-04T17:59:30Z';
    db.status = { phase: 'Running', readyReplicas: 3 };
    assert.equal(
      printerTable({ items: [db] }, now),
      'NAME      ENGINE     VERSION   REPLICAS   READY   PHASE     AGE\n' +
        'demo-pg   postgres   15        3          3       Running   30s',
    );
  });

  it('elapsed times of long steps', () => {
    assert.equal(elapsed(4_400), '4s');
    assert.equal(elapsed(95_000), '1m35s');
  });
});

describe('demo: what it applies and runs', () => {
  const seed = parse(readFileSync(SAMPLE, 'utf8')) as Database;

  it('the seed sample is pinned to the kwok nodes only in a mixed cluster, otherwise unchanged', () => {
    assert.deepEqual(onSimulatedNodes(seed, false), seed);
    const mixed = onSimulatedNodes(seed, true);
    assert.deepEqual(mixed.spec.nodeSelector, { type: 'kwok' });
    assert.deepEqual(mixed.spec.tolerations, [
      { key: 'opkit.dev/simulated', operator: 'Exists', effect: 'NoSchedule' },
    ]);
    assert.equal(mixed.spec.engine, 'mysql');
    assert.equal(seed.spec.tolerations, undefined, 'the parsed sample is not modified');
  });

  it('the PostgreSQL Database: postgres 15, 3 instances, the given image', () => {
    assert.deepEqual(postgresDatabase('ns1', 'opkit.local/postgres:15').spec, {
      engine: 'postgres',
      version: '15',
      storage: '1Gi',
      replicas: 3,
      image: 'opkit.local/postgres:15',
    });
  });

  it('the psql pod takes the credentials as env from the Secret: no password in the pod', () => {
    const db = postgresDatabase('ns1', 'opkit.local/postgres:15');
    const p = rowCheckPod(db, 'opkit.local/postgres:15', 'hello', 'demo-pg-psql-1');
    const env = p.spec!.containers[0]!.env!;
    const ref = (n: string) => env.find((e) => e.name === n)?.valueFrom?.secretKeyRef;
    assert.deepEqual(ref('PGPASSWORD'), { name: 'demo-pg-credentials', key: 'app-password' });
    assert.deepEqual(ref('PGUSER'), { name: 'demo-pg-credentials', key: 'app-username' });
    assert.deepEqual(ref('PGDATABASE'), { name: 'demo-pg-credentials', key: 'database' });
    assert.equal(env.find((e) => e.name === 'RW_HOST')?.value, 'demo-pg.ns1.svc.cluster.local');
    assert.equal(env.find((e) => e.name === 'RO_HOST')?.value, 'demo-pg-ro.ns1.svc.cluster.local');
    assert.ok(env.every((e) => e.name !== 'PGPASSWORD' || e.value === undefined));
    assert.equal(p.spec!.restartPolicy, 'Never');
    assert.equal(p.metadata.namespace, 'ns1');
  });

  it("the psql pod's script is valid bash", () => {
    const r = spawnSync('bash', ['-n', '-c', ROW_CHECK_SCRIPT], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
  });

  it('--in-cluster runs opkit build --load and opkit deploy as a user would', () => {
    const [build, deploy] = inClusterCommands('opkit', '/kc', '/tmp/op.tar', 600);
    assert.deepEqual(build, [
      'build',
      '--context',
      '../..',
      '--file',
      'Dockerfile',
      '--image',
      IN_CLUSTER_IMAGE,
      '--archive',
      '/tmp/op.tar',
      '--load',
      '--cluster',
      'opkit',
    ]);
    assert.deepEqual(deploy, [
      'deploy',
      '--image',
      IN_CLUSTER_IMAGE,
      '--kubeconfig',
      '/kc',
      '--timeout',
      '600',
    ]);
  });

  it('real nodes: root only (saying why), and the image as the kubelet reports it', () => {
    assert.equal(realNodesBlocked(0), undefined);
    assert.match(realNodesBlocked(1000)!.why, /need root/);
    assert.match(realNodesBlocked(1000)!.hint, /sudo npm run demo/);
    const node = {
      metadata: { name: 'n' },
      status: { images: [{ names: ['opkit.local/postgres:15', 'sha256:ab'] }] },
    };
    assert.equal(nodeHasImage(node, 'opkit.local/postgres:15'), true);
    assert.equal(nodeHasImage(node, 'opkit.local/mariadb:10.11'), false);
    assert.equal(nodeHasImage({ metadata: { name: 'n' } }, 'opkit.local/postgres:15'), false);
  });
});
