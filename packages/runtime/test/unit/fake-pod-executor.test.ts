/** FakePodExecutor: handlers by pod, container and command; recorded calls; the API server's refusals. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type Pod, Pods } from '../../src/api/builtin.ts';
import { BadRequestError, NotFoundError } from '../../src/client/errors.ts';
import { ContainerNotFoundError, ContainerNotRunningError, ExecTimeoutError } from '../../src/exec/index.ts';
import { FakeClient, FakePodExecutor } from '../../src/testing/index.ts';

const pod = (
  name: string,
  over: { containers?: string[]; phase?: string; nodeName?: string | null } = {},
): Pod => ({
  metadata: { namespace: 'db', name },
  spec: {
    ...(over.nodeName === null ? {} : { nodeName: over.nodeName ?? 'node-1' }),
    containers: (over.containers ?? ['postgres']).map((c) => ({ name: c, image: 'opkit.local/postgres:15' })),
  },
  status: { phase: over.phase ?? 'Running' },
});

describe('FakePodExecutor', () => {
  test('answers by pod, container and command; a later handler wins; records every call', async () => {
    const exec = new FakePodExecutor()
      .on({ command: ['pg_ctl', 'promote'] }, { stdout: 'server promoting\n' })
      .on({ pod: 'pg-1', command: /^pg_ctl promote/ }, { stderr: 'not in recovery', exitCode: 1 })
      .on({ container: 'sidecar' }, (call) => ({ stdout: `stdin was ${call.stdin}` }));

    assert.deepEqual(await exec.exec({ namespace: 'db', name: 'pg-0' }, { command: ['pg_ctl', 'promote'] }), {
      stdout: 'server promoting\n',
      stderr: '',
      exitCode: 0,
    });
    assert.deepEqual(await exec.exec({ namespace: 'db', name: 'pg-1' }, { command: ['pg_ctl', 'promote'] }), {
      stdout: '',
      stderr: 'not in recovery',
      exitCode: 1,
    });
    const piped = await exec.exec({ name: 'x' }, { container: 'sidecar', command: ['cat'], stdin: 'abc' });
    assert.equal(piped.stdout, 'stdin was abc');
    assert.deepEqual(exec.calls, [
      { namespace: 'db', name: 'pg-0', command: ['pg_ctl', 'promote'] },
      { namespace: 'db', name: 'pg-1', command: ['pg_ctl', 'promote'] },
      { namespace: 'default', name: 'x', container: 'sidecar', command: ['cat'], stdin: 'abc' },
    ]);
    await assert.rejects(
      exec.exec({ name: 'x' }, { command: ['ls'] }),
      /no handler for \["ls"\].*register one with on\(\)/,
    );
  });

  test('with a client it refuses what the API server refuses, with the same typed errors', async () => {
    const client = new FakeClient({
      objects: [
        pod('running'),
        pod('two', { containers: ['postgres', 'exporter'] }),
        pod('pending', { phase: 'Pending' }),
        pod('unscheduled', { phase: 'Pending', nodeName: null }),
      ].map((object) => ({ resource: Pods, object })),
    });
    const exec = new FakePodExecutor({ client }).on({}, { stdout: 'ok' });
    const key = (name: string) => ({ namespace: 'db', name });

    assert.equal((await exec.exec(key('running'), { command: ['true'] })).stdout, 'ok');
    // The API server picks the only container.
    assert.equal(exec.calls.at(-1)?.container, 'postgres');
    await assert.rejects(exec.exec(key('missing'), { command: ['true'] }), NotFoundError);
    await assert.rejects(
      exec.exec(key('running'), { container: 'nope', command: ['true'] }),
      (e: unknown) =>
        e instanceof ContainerNotFoundError && e.message === 'container nope is not valid for pod running',
    );
    await assert.rejects(
      exec.exec(key('two'), { command: ['true'] }),
      (e: unknown) =>
        e instanceof BadRequestError && /must be specified.*\[postgres exporter\]/.test(e.message),
    );
    assert.equal((await exec.exec(key('two'), { container: 'exporter', command: ['true'] })).stdout, 'ok');
    await assert.rejects(exec.exec(key('pending'), { command: ['true'] }), ContainerNotRunningError);
    await assert.rejects(
      exec.exec(key('unscheduled'), { command: ['true'] }),
      (e: unknown) =>
        e instanceof ContainerNotRunningError && /does not have a host assigned/.test(e.message),
    );

    // A container that stopped in a Running pod.
    const stopped = pod('restarting');
    stopped.status = {
      phase: 'Running',
      containerStatuses: [
        {
          name: 'postgres',
          image: 'opkit.local/postgres:15',
          imageID: '',
          ready: false,
          restartCount: 2,
          state: { waiting: { reason: 'CrashLoopBackOff' } },
        },
      ],
    };
    await client.create(Pods, stopped);
    await client.updateStatus(Pods, {
      ...(await client.get(Pods, key('restarting'))),
      status: stopped.status,
    });
    await assert.rejects(exec.exec(key('restarting'), { command: ['true'] }), ContainerNotRunningError);
  });

  test('handlers are bounded by the signal and the timeout, as the real executor is', async () => {
    const exec = new FakePodExecutor().on(
      {},
      (_call, signal) =>
        new Promise((resolve) => {
          const t = setTimeout(() => resolve({ stdout: 'late' }), 10_000);
          signal.addEventListener('abort', () => clearTimeout(t));
        }),
    );
    await assert.rejects(exec.exec({ name: 'p' }, { command: ['sleep'], timeoutMs: 50 }), ExecTimeoutError);
    const controller = new AbortController();
    const reason = new Error('stop');
    setTimeout(() => controller.abort(reason), 20);
    await assert.rejects(
      exec.exec({ name: 'p' }, { command: ['sleep'], signal: controller.signal }),
      (e) => e === reason,
    );
    await assert.rejects(
      exec.exec({ name: 'p' }, { command: [] }),
      /opts\.command must be a non-empty array/,
    );
  });
});
