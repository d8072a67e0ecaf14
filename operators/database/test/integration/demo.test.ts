/**
 * The demo's main flow, as `npm run demo -- --local` runs it (root only: real nodes): it starts its own local
 * cluster (3 kwok nodes + 1 real node) under a name of its own, puts opkit.local/postgres:15 on the real node,
 * runs the operator in-process, and must print the PostgreSQL Database Running 3/3 with its replicas
 * streaming, the row read back through the read-only Service from a replica, and the mysql sample Running on
 * the simulated nodes, saying so. Then `--in-cluster` on the same cluster, in another namespace: the operator
 * built by `opkit build`, loaded and deployed, reconciles a new PostgreSQL Database to the same end.
 * Cost, warm caches: the cluster ~1 min, each run ~2-4 min (measured times are in the README).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, describe, test } from 'node:test';
import { clusterDown, runningCluster } from '@opkit/controlplane';
import { demo } from '../../src/demo/main.ts';

const CLUSTER = `demo-test-${process.pid}`;
const SIMULATED = `demo-test-sim-${process.pid}`;

describe('the demo on a mixed cluster (real PostgreSQL pods, simulated mysql)', {
  timeout: 3_600_000,
  skip: process.getuid?.() === 0 ? false : 'real nodes need root',
}, () => {
  after(async () => {
    await clusterDown(CLUSTER);
    await clusterDown(SIMULATED);
  });

  /** Runs the demo in this process; its output, printed as it comes (so a slow step shows), and its exit code. */
  const run = async (args: string[]): Promise<{ code: number; out: string }> => {
    const lines: string[] = [];
    const started = Date.now();
    const code = await demo(args, (l) => {
      lines.push(l);
      process.stdout.write(`# ${l.replaceAll('\n', '\n# ')}\n`);
    });
    process.stdout.write(
      `# demo ${args.join(' ')}: exit ${code} after ${((Date.now() - started) / 1000).toFixed(0)} s\n`,
    );
    return { code, out: lines.join('\n') };
  };

  const expectDemoOutput = (out: string) => {
    // The Database reached Running 3/3 and each replica streams from the primary.
    assert.match(out, /demo-pg\s+Running ready 3\/3/);
    assert.match(out, /^demo-pg-\d\s+primary\s+yes\s+-\s+-$/m);
    assert.equal(out.match(/^demo-pg-\d\s+replica\s+yes\s+yes\s+\S+ \S*B, [\d.]+ s$/gm)?.length, 2, out);
    // The row written through the read-write Service was read back through the read-only one, on a replica.
    assert.match(out, /written: id \d+ through demo-pg, answered by demo-pg-\d \(the primary\)/);
    assert.match(
      out,
      /read: {4}"hello from the demo at [^"]+" through demo-pg-ro, answered by demo-pg-\d \(a replica, in recovery\)/,
    );
    // The seed's sample ran too, on the simulated nodes, and the demo said so.
    assert.match(out, /production-db\s+Running ready 3\/3/);
    assert.match(out, /SIMULATED: its pods go to kwok nodes/);
    assert.match(out, /no MySQL server can be installed on these machines/);
    // No password in the output.
    assert.doesNotMatch(out, /PGPASSWORD=|password:/i);
  };

  // Per-test bounds: generous safety bounds for a loaded 2-core machine (the runner's default is 10 minutes).
  test('npm run demo -- --local: Running 3/3 streaming, the row read back through the read-only Service', {
    timeout: 1_200_000,
  }, async () => {
    const { code, out } = await run([
      '--local',
      '--cluster',
      CLUSTER,
      '--namespace',
      'demo',
      '--timeout',
      '900',
    ]);
    assert.equal(code, 0, out);
    assert.match(
      out,
      /Starting the local cluster "demo-test-\d+": 3 simulated \(kwok\) nodes and 1 real node/,
    );
    assert.match(out, /Operator running in this process/);
    expectDemoOutput(out);
    // The mysql pods ran on kwok nodes, the postgres pods on the real node (kubectl get pods -o wide).
    assert.match(out, /^production-db-0\s.*\skwok-node-\d/m);
    assert.match(out, /^demo-pg-0\s.*\sreal-node-0\s/m);
  });

  test("an orphaned process exiting in the primary's container does not restart PostgreSQL (pause is PID 1)", async () => {
    // What the demo met on a loaded machine: exec probes that time out leave orphans; one dying by a signal
    // made the postmaster (then PID 1) restart as after a crash. Here an exec leaves an orphan that kills itself.
    const kubeconfig = runningCluster(CLUSTER)!.kubeconfigPath;
    const kubectl = (...args: string[]) =>
      spawnSync('kubectl', ['--kubeconfig', kubeconfig, '-n', 'demo', ...args], {
        encoding: 'utf8',
        timeout: 60_000,
      });
    const exec = kubectl(
      'exec',
      'demo-pg-0',
      '-c',
      'postgres',
      '--',
      'sh',
      '-c',
      'sh -c "sleep 1; kill -USR2 \\$\\$" >/dev/null 2>&1 &',
    );
    assert.equal(exec.status, 0, exec.stderr);
    await new Promise((r) => setTimeout(r, 5000));
    const logs = kubectl('logs', 'demo-pg-0', '-c', 'postgres', '--since=30s');
    assert.equal(logs.status, 0, logs.stderr);
    assert.doesNotMatch(logs.stdout, /terminated by signal 12|reinitializing/);
    const pid1 = kubectl('exec', 'demo-pg-0', '-c', 'postgres', '--', 'cat', '/proc/1/cmdline');
    assert.doesNotMatch(pid1.stdout, /^postgres/, 'PID 1 is not the postmaster');
  });

  test('--in-cluster: the operator built, loaded and deployed reconciles a new PostgreSQL Database', {
    timeout: 1_800_000,
  }, async () => {
    const { code, out } = await run([
      '--local',
      '--cluster',
      CLUSTER,
      '--namespace',
      'demo-in-cluster',
      '--timeout',
      '900',
      '--in-cluster',
    ]);
    assert.equal(code, 0, out);
    assert.match(out, /loaded opkit\.local\/database-operator:demo into cluster/);
    assert.match(
      out,
      /Operator running in the cluster: deployment database-operator-system\/database-operator-controller-manager/,
    );
    assert.doesNotMatch(out, /Operator running in this process/);
    expectDemoOutput(out);
  });

  test('--simulated: a cluster without a real node, saying so; the sample Running on kwok nodes', async () => {
    const { code, out } = await run(['--local', '--cluster', SIMULATED, '--simulated', '--timeout', '300']);
    assert.equal(code, 0, out);
    assert.match(out, /No real node: --simulated\./);
    assert.match(out, /with 3 simulated \(kwok\) nodes only/);
    assert.match(out, /production-db\s+Running ready 3\/3/);
    assert.match(out, /Only the simulated part ran: no pod executed a container/);
    assert.doesNotMatch(out, /demo-pg/);
  });
});
