/** opkit's own builder, the pure parts: the Dockerfiles it follows, the config merge, the rollout judgement. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { mergeImageConfig } from '@opkit/controlplane';
import type { Deployment, Pod } from '@opkit/runtime';
import { localBaseFor, npmCommands, parseDockerfile } from '../../src/build/dockerfile.ts';
import { judgeRollout } from '../../src/kube/rollout.ts';
import { dockerfile } from '../../src/templates/project.ts';
import { REPO_ROOT } from '../helpers.ts';

describe('parseDockerfile', () => {
  test("reads the scaffolded project's Dockerfile: two stages, the npm RUN, the runtime config", () => {
    const stages = parseDockerfile(dockerfile({ projectName: 'x', domain: 'example.com' } as never));
    assert.deepEqual(
      stages.map((s) => [s.base, s.name]),
      [
        ['node:24-slim', 'deps'],
        ['node:24-slim', undefined],
      ],
    );
    assert.deepEqual(stages[0]!.steps, [
      { op: 'WORKDIR', path: '/app' },
      { op: 'COPY', sources: ['package.json'], dest: './' },
      { op: 'COPY', sources: ['vendor/'], dest: './vendor/' },
      { op: 'RUN', command: 'npm install --omit=dev --no-audit --no-fund --ignore-scripts' },
    ]);
    const last = stages[1]!.steps;
    assert.deepEqual(
      last.find((s) => s.op === 'COPY' && s.from === 'deps'),
      {
        op: 'COPY',
        from: 'deps',
        sources: ['/app/node_modules'],
        dest: './node_modules',
      },
    );
    assert.deepEqual(
      last.find((s) => s.op === 'USER'),
      { op: 'USER', user: '65532:65532' },
    );
    assert.deepEqual(
      last.find((s) => s.op === 'RUN'),
      {
        op: 'RUN',
        command: 'npm exec -- opkit-warm-compile-cache --uid 65532 -- --max-semi-space-size=4 src/main.ts',
      },
    );
    assert.deepEqual(
      last.find((s) => s.op === 'ENTRYPOINT'),
      {
        op: 'ENTRYPOINT',
        argv: ['node', '--max-semi-space-size=4', 'src/main.ts'],
      },
    );
  });

  test("reads the Database operator's Dockerfile (continued RUN lines, --chown, CMD, EXPOSE)", () => {
    const stages = parseDockerfile(readFileSync(join(REPO_ROOT, 'operators/database/Dockerfile'), 'utf8'));
    assert.deepEqual(
      stages.map((s) => [s.name, s.base]),
      [
        ['manifests', 'node:24-bookworm-slim'],
        ['bundle', 'manifests'],
        ['build', 'manifests'],
        [undefined, 'node:24-bookworm-slim'],
      ],
    );
    const runs = (i: number) =>
      stages[i]!.steps.flatMap((s) => (s.op === 'RUN' ? [npmCommands(s.command)] : []));
    // The bundle stage installs the workspace's dev dependencies too (esbuild, from the lockfile), then bundles.
    assert.deepEqual(runs(1), [
      [
        [
          'ci',
          '--workspace',
          'operators/database',
          '--include-workspace-root=false',
          '--no-audit',
          '--no-fund',
          '--ignore-scripts',
        ],
      ],
      [['run', 'bundle', '--workspace', 'operators/database']],
    ]);
    assert.deepEqual(
      runs(2).map((cmds) => cmds?.map((a) => a.slice(0, 2))),
      [
        [
          ['ci', '--omit=dev'],
          ['cache', 'clean'],
        ],
      ],
    );
    assert.deepEqual(
      stages[2]!.steps.find((s) => s.op === 'COPY' && s.from !== undefined),
      {
        op: 'COPY',
        from: 'bundle',
        sources: ['/app/operators/database/dist'],
        dest: 'operators/database/dist',
      },
    );
    // The last stage warms Node's compile cache with an npm command (opkit's builder follows it), with the
    // ENTRYPOINT's Node flags and script, for the USER.
    const entrypoint = stages[3]!.steps.find((s) => s.op === 'ENTRYPOINT')!;
    assert.deepEqual(runs(3), [
      [
        [
          'exec',
          '--',
          'opkit-warm-compile-cache',
          '--uid',
          '65532',
          '--cache-dir',
          '../../.node-compile-cache',
          '--',
          ...(entrypoint.op === 'ENTRYPOINT' ? entrypoint.argv.slice(1) : []),
        ],
      ],
    ]);
    assert.deepEqual(
      stages[3]!.steps.find((s) => s.op === 'USER'),
      { op: 'USER', user: '65532:65532' },
    );
    assert.deepEqual(
      stages[3]!.steps.find((s) => s.op === 'EXPOSE'),
      { op: 'EXPOSE', ports: ['8080/tcp', '8081/tcp'] },
    );
    assert.deepEqual(
      stages[3]!.steps.find((s) => s.op === 'COPY'),
      {
        op: 'COPY',
        from: 'build',
        sources: ['/app'],
        dest: '/app',
      },
    );
  });

  test('refuses what it cannot follow, naming the line and the way out', () => {
    assert.throws(
      () => parseDockerfile('FROM node:24-slim\nHEALTHCHECK CMD true\n'),
      (err: Error & { next?: string }) =>
        /line 2: HEALTHCHECK is not supported/.test(err.message) && /--engine/.test(err.next ?? ''),
    );
    assert.equal(npmCommands('apt-get install -y curl'), undefined);
    assert.equal(npmCommands('npm ci && rm -rf /tmp/x'), undefined);
  });

  test('node:24 bases map to opkit.local/node:24; nothing else does', () => {
    for (const b of ['node:24', 'node:24-slim', 'node:24-bookworm-slim', 'docker.io/library/node:24.9.0'])
      assert.equal(localBaseFor(b, 'opkit.local/node:24'), 'opkit.local/node:24', b);
    for (const b of ['node:22-slim', 'node:latest', 'debian:bookworm', 'evil.example/node:24'])
      assert.equal(localBaseFor(b, 'opkit.local/node:24'), undefined, b);
  });
});

test('mergeImageConfig: ENV by name, ENTRYPOINT without CMD drops the base CMD', () => {
  const merged = mergeImageConfig(
    { env: ['PATH=/usr/bin', 'LANG=C.UTF-8'], cmd: ['node'] },
    { env: ['NODE_ENV=production', 'LANG=C'], entrypoint: ['node', 'src/main.ts'], user: '65532:65532' },
  );
  assert.deepEqual(merged, {
    env: ['PATH=/usr/bin', 'LANG=C', 'NODE_ENV=production'],
    entrypoint: ['node', 'src/main.ts'],
    user: '65532:65532',
  });
});

describe('judgeRollout', () => {
  const deployment = (ready: number): Deployment =>
    ({
      metadata: { name: 'm', generation: 1 },
      spec: { replicas: 1 },
      status: { observedGeneration: 1, readyReplicas: ready, updatedReplicas: 1 },
    }) as Deployment;
  const pod = (waiting?: string, image = 'img:1'): Pod =>
    ({
      metadata: { name: 'm-1' },
      spec: { containers: [{ name: 'manager', image }] },
      status: {
        phase: 'Pending',
        containerStatuses: [
          { name: 'manager', state: waiting ? { waiting: { reason: waiting, message: 'm' } } : {} },
        ],
      },
    }) as Pod;

  test("an earlier rollout's pod failing to pull does not fail the new image's rollout", () => {
    assert.equal(
      judgeRollout(deployment(0), [pod('ImagePullBackOff', 'img:old')], 'img:1').state,
      'progressing',
    );
  });

  test('ready when the observed generation has its replicas ready', () => {
    assert.equal(judgeRollout(deployment(1), [pod()]).state, 'ready');
    assert.equal(judgeRollout(deployment(0), [pod('ContainerCreating')]).state, 'progressing');
    assert.equal(judgeRollout(undefined, []).state, 'progressing');
  });

  test('fails at once on an image that cannot be pulled or a crash loop', () => {
    for (const reason of ['ErrImageNeverPull', 'ImagePullBackOff', 'CrashLoopBackOff']) {
      const r = judgeRollout(deployment(0), [pod(reason)], 'img:1');
      assert.equal(r.state, 'failed');
      assert.ok(r.state === 'failed' && r.reason === reason && r.pod === 'm-1' && r.container === 'manager');
    }
  });
});
