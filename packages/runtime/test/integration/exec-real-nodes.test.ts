/**
 * PodExecutor against a real cluster: kube-apiserver, a real node (kubelet + containerd + runc) running
 * opkit.local/shell:1, and a kwok node whose pods run nowhere. Needs root (real nodes); skipped elsewhere,
 * saying why.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type ControlPlane, SHELL_IMAGE, SIMULATED_TAINT, start } from '@opkit/controlplane';
import { parse, stringify } from 'yaml';
import {
  Namespaces,
  Nodes,
  type Pod,
  Pods,
  RoleBindings,
  Roles,
  ServiceAccounts,
} from '../../src/api/builtin.ts';
import {
  ApiError,
  createClient,
  ForbiddenError,
  loadConfig,
  NotFoundError,
  type RestClient,
  type RestConfig,
  ServerError,
} from '../../src/client/index.ts';
import {
  ContainerNotFoundError,
  ContainerNotRunningError,
  ExecTimeoutError,
  NodeUnreachableError,
  newPodExecutor,
  type PodExecutor,
} from '../../src/exec/index.ts';
import { MetricsRegistry } from '../../src/metrics/registry.ts';
import { eventually } from '../../src/testing/eventually.ts';
import { FakeClient, FakePodExecutor } from '../../src/testing/index.ts';

const NS = 'exec';
const needsRoot = process.getuid?.() === 0 ? false : 'real nodes need root';

const shellPod = (name: string, image = SHELL_IMAGE): Pod => ({
  metadata: { namespace: NS, name },
  spec: {
    nodeSelector: { 'opkit.dev/node': 'real' },
    terminationGracePeriodSeconds: 1,
    containers: [{ name: 'main', image, imagePullPolicy: 'Never', command: ['sleep', '3600'] }],
  },
});

describe('PodExecutor on a real node', { timeout: 900_000, skip: needsRoot }, () => {
  let cp: ControlPlane;
  let config: RestConfig;
  let client: RestClient;
  let exec: PodExecutor;
  let metrics: MetricsRegistry;
  let dir: string;
  const pod = { namespace: NS, name: 'shell' };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'opkit-exec-'));
    cp = await start({ mode: 'cluster', nodes: 1, realNodes: 1 });
    config = loadConfig({ kubeconfig: cp.kubeconfigPath });
    client = createClient(config);
    metrics = new MetricsRegistry();
    exec = newPodExecutor(config, { onRequest: metrics.restClientObserver() });
    await client.create(Namespaces, { metadata: { name: NS } });
    await eventually(
      'the default ServiceAccount',
      () => client.get(ServiceAccounts, { namespace: NS, name: 'default' }),
      { timeoutMs: 60_000 },
    );
    await client.create(Pods, shellPod('shell'));
    // A container that never starts: its image is not on the node and may not be pulled.
    await client.create(Pods, shellPod('never-starts', 'opkit.local/missing:1'));
    const nodes = await client.list(Nodes);
    const kwok = nodes.items.find((n) => n.metadata.name?.startsWith('kwok-'));
    assert.ok(kwok, 'a kwok node');
    await client.create(Pods, {
      metadata: { namespace: NS, name: 'simulated' },
      spec: {
        nodeName: kwok.metadata.name,
        tolerations: [{ key: SIMULATED_TAINT.key, operator: 'Exists' }],
        containers: [{ name: 'main', image: SHELL_IMAGE }],
      },
    });
    await eventually(
      'pods shell and simulated Running',
      async () => {
        const pods = await client.list(Pods, { namespace: NS });
        const phase = (n: string) => pods.items.find((p) => p.metadata.name === n)?.status?.phase;
        return phase('shell') === 'Running' && phase('simulated') === 'Running';
      },
      { timeoutMs: 180_000, intervalMs: 500 },
    );
  });
  after(async () => {
    client?.close();
    await cp?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('echo: stdout and exit code 0, counted in rest_client_requests_total as GET 101', async () => {
    assert.deepEqual(await exec.exec(pod, { command: ['echo', 'hello'] }), {
      stdout: 'hello\n',
      stderr: '',
      exitCode: 0,
    });
    const text = await metrics.text();
    assert.match(
      text,
      new RegExp(`rest_client_requests_total\\{code="101",method="GET",host="${config.host}"\\} \\d+`),
    );
  });

  test('stderr and a non-zero exit code come back as a result, not an error', async () => {
    const result = await exec.exec(pod, {
      container: 'main',
      command: ['sh', '-c', 'echo out; echo err >&2; exit 3'],
    });
    assert.deepEqual(result, { stdout: 'out\n', stderr: 'err\n', exitCode: 3 });
  });

  test('stdin round trip: the command reads it to EOF (text, and 1 MiB of bytes)', async () => {
    const text = 'line 1\nline 2 with ü\n';
    assert.equal((await exec.exec(pod, { command: ['cat'], stdin: text })).stdout, text);
    const bytes = new Uint8Array(1024 * 1024).map((_, i) => i % 251);
    const counted = await exec.exec(pod, { command: ['sh', '-c', 'wc -c; echo done >&2'], stdin: bytes });
    assert.equal(counted.stdout.trim(), String(bytes.length));
    assert.equal(counted.stderr, 'done\n');
  });

  test('large output: 3 MiB arrives whole; 10 MB is cut at 4 MiB and flagged truncated', async () => {
    const whole = await exec.exec(pod, { command: ['sh', '-c', "head -c 3145728 /dev/zero | tr '\\0' b"] });
    assert.equal(whole.stdout.length, 3 * 1024 * 1024);
    assert.ok(/^b+$/.test(whole.stdout));
    assert.equal(whole.truncated, undefined);
    const cut = await exec.exec(pod, {
      command: ['sh', '-c', "head -c 10000000 /dev/zero | tr '\\0' a; exit 4"],
    });
    assert.equal(cut.stdout.length, 4 * 1024 * 1024);
    assert.deepEqual(cut.truncated, { stdout: true, stderr: false });
    assert.equal(cut.exitCode, 4, 'the exit status still arrives after the dropped output');
  });

  test('refusals are typed: missing pod, missing container, a container that never started, no executable', async () => {
    await assert.rejects(
      exec.exec({ namespace: NS, name: 'missing' }, { command: ['true'] }),
      (e: unknown) => {
        assert.ok(e instanceof NotFoundError, String(e));
        assert.equal(e.message, 'pods "missing" not found');
        return true;
      },
    );
    await assert.rejects(exec.exec(pod, { container: 'nope', command: ['true'] }), (e: unknown) => {
      assert.ok(e instanceof ContainerNotFoundError, String(e));
      assert.equal(e.message, 'container nope is not valid for pod shell');
      return true;
    });
    await assert.rejects(
      exec.exec({ namespace: NS, name: 'never-starts' }, { command: ['true'] }),
      (e: unknown) => {
        assert.ok(e instanceof ContainerNotRunningError, String(e));
        assert.match(e.message, /container not found \("main"\)/);
        return true;
      },
    );
    await assert.rejects(exec.exec(pod, { command: ['no-such-program'] }), (e: unknown) => {
      assert.ok(e instanceof ServerError, String(e));
      assert.match(e.message, /"no-such-program": executable file not found/);
      return true;
    });
  });

  test('FakePodExecutor refuses the same execs with the same errors, given the same pods', async () => {
    const pods = await client.list(Pods, { namespace: NS });
    const fake = new FakePodExecutor({
      client: new FakeClient({ objects: pods.items.map((object) => ({ resource: Pods, object })) }),
    }).on({}, { stdout: 'ran' });
    const cases: [string, { container?: string }][] = [
      ['missing', {}],
      ['shell', { container: 'nope' }],
      ['never-starts', {}],
    ];
    for (const [name, opts] of cases) {
      const real = await exec
        .exec({ namespace: NS, name }, { ...opts, command: ['true'] })
        .catch((e: unknown) => e);
      const faked = await fake
        .exec({ namespace: NS, name }, { ...opts, command: ['true'] })
        .catch((e: unknown) => e);
      assert.ok(
        real instanceof ApiError && faked instanceof ApiError,
        `${name}: ${String(real)} / ${String(faked)}`,
      );
      assert.equal(faked.constructor, real.constructor, name);
      assert.equal(faked.message, real.message, name);
      assert.equal(faked.code, real.code, name);
    }
    assert.equal((await fake.exec(pod, { command: ['true'] })).stdout, 'ran');
  });

  test('concurrent execs each get their own output and exit code', async () => {
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        exec.exec(pod, { command: ['sh', '-c', `for j in 1 2 3; do echo ${i}-$j; done; exit ${i % 5}`] }),
      ),
    );
    results.forEach((r, i) => {
      assert.equal(r.stdout, `${i}-1\n${i}-2\n${i}-3\n`);
      assert.equal(r.exitCode, i % 5);
    });
  });

  test('a pod on a kwok node: NodeUnreachableError with the API server message', async () => {
    await assert.rejects(
      exec.exec({ namespace: NS, name: 'simulated' }, { command: ['true'] }),
      (e: unknown) => {
        assert.ok(e instanceof NodeUnreachableError, String(e));
        assert.match(e.message, /10250.*connection refused/);
        return true;
      },
    );
  });

  test('without pods/exec RBAC: ForbiddenError naming the verbs; granting them makes it work (token, impersonation, exec plugin)', async () => {
    await client.create(ServiceAccounts, { metadata: { namespace: NS, name: 'ops' } });
    // A ServiceAccount token (TokenRequest), used as a bearer token.
    const request = await client.transport.request<{ status: { token: string } }>({
      method: 'POST',
      path: `/api/v1/namespaces/${NS}/serviceaccounts/ops/token`,
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 3600 },
      },
    });
    const admin = parse(readFileSync(cp.kubeconfigPath, 'utf8'));
    const withToken = structuredClone(admin);
    withToken.users[0].user = { token: request.status.token };
    writeFileSync(join(dir, 'token'), stringify(withToken));
    // The admin impersonating the ServiceAccount (kubeconfig `as`: the Impersonate-User header).
    const impersonating = structuredClone(admin);
    impersonating.users[0].user.as = `system:serviceaccount:${NS}:ops`;
    writeFileSync(join(dir, 'impersonating'), stringify(impersonating));
    // The same token from an exec credential plugin (applied through client-node).
    const plugin = join(dir, 'credential-plugin.sh');
    const credential = {
      apiVersion: 'client.authentication.k8s.io/v1',
      kind: 'ExecCredential',
      status: { token: request.status.token },
    };
    writeFileSync(plugin, `#!/bin/sh\necho '${JSON.stringify(credential)}'\n`, { mode: 0o755 });
    const withPlugin = structuredClone(admin);
    withPlugin.users[0].user = {
      exec: { apiVersion: 'client.authentication.k8s.io/v1', command: plugin, interactiveMode: 'Never' },
    };
    writeFileSync(join(dir, 'plugin'), stringify(withPlugin));
    const files = ['token', 'impersonating', 'plugin'];

    for (const file of files) {
      const asOps = newPodExecutor(loadConfig({ kubeconfig: join(dir, file) }));
      await assert.rejects(asOps.exec(pod, { command: ['true'] }), (e: unknown) => {
        assert.ok(e instanceof ForbiddenError, `${file}: ${String(e)}`);
        assert.match(e.message, /User "system:serviceaccount:exec:ops" cannot get resource "pods\/exec"/);
        assert.match(e.message, /verbs "get" and "create" on resource "pods\/exec" in namespace "exec"/);
        return true;
      });
    }

    await client.create(Roles, {
      metadata: { namespace: NS, name: 'exec' },
      rules: [{ apiGroups: [''], resources: ['pods/exec'], verbs: ['get', 'create'] }],
    });
    await client.create(RoleBindings, {
      metadata: { namespace: NS, name: 'ops-exec' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'exec' },
      subjects: [{ kind: 'ServiceAccount', name: 'ops', namespace: NS }],
    });
    for (const file of files) {
      const asOps = newPodExecutor(loadConfig({ kubeconfig: join(dir, file) }));
      // RBAC changes reach the authorizer's cache within moments.
      const result = await eventually(`${file}: exec once granted`, () =>
        asOps.exec(pod, { command: ['echo', 'ok'] }),
      );
      assert.equal(result.stdout, 'ok\n');
    }
  });

  test('abort via signal and timeout: a long command is left promptly', async () => {
    const controller = new AbortController();
    const reason = new Error('failover cancelled');
    setTimeout(() => controller.abort(reason), 500);
    const started = performance.now();
    await assert.rejects(
      exec.exec(pod, { command: ['sleep', '30'], signal: controller.signal }),
      (e) => e === reason,
    );
    // A generous safety bound, not a performance claim: without the abort this takes 30 s.
    assert.ok(performance.now() - started < 15_000);

    const timedOut = await exec
      .exec(pod, { command: ['sh', '-c', 'echo started; sleep 30'], timeoutMs: 2000 })
      .catch((e: unknown) => e);
    assert.ok(timedOut instanceof ExecTimeoutError, String(timedOut));
    assert.equal(timedOut.stdout, 'started\n');
    // The executor still works afterwards, and (as docs/runtime.md warns) Kubernetes left the timed-out
    // command running in the container: closing the connection does not kill it.
    const processes = await exec.exec(pod, {
      command: ['sh', '-c', 'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline; echo; done'],
    });
    assert.match(processes.stdout, /^sleep 30 $/m);
  });
});
