import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { test } from 'node:test';
import { scramVerifier } from '../../../operators/database/src/controllers/database/engines/postgres/scram.ts';
import { compareSnapshots, KNOWN_DIFFERENCES, normalize, secretContext } from '../../harness/equivalence.ts';
import {
  deployedEnv,
  deployedNodeFlags,
  deployedRunEnv,
  opkitMain,
  opkitRunEnv,
  REPO_ROOT,
  warmCompileCache,
} from '../../harness/impls.ts';
import { addCount, classify, type KubeObject, type RequestCounts } from '../../harness/kube.ts';
import { diffCounts, summarize } from '../../harness/metrics.ts';
import { readProc, readRssByMapping, readThreadCpu } from '../../harness/proc.ts';
import { markdownTable, median, svgPlot } from '../../harness/report.ts';

test('requests are classified by the verb and resource apiserver_request_total uses', () => {
  assert.deepEqual(classify('GET', '/api/v1/namespaces/default/secrets/x'), {
    verb: 'GET',
    resource: 'secrets',
  });
  assert.deepEqual(classify('GET', '/api/v1/namespaces/default/secrets?limit=500'), {
    verb: 'LIST',
    resource: 'secrets',
  });
  assert.deepEqual(classify('GET', '/apis/apps/v1/statefulsets?watch=true'), {
    verb: 'WATCH',
    resource: 'statefulsets',
  });
  assert.deepEqual(classify('PATCH', '/apis/myapp.example.com/v1/namespaces/d/databases/a/status'), {
    verb: 'PATCH',
    resource: 'databases/status',
  });
  assert.equal(classify('GET', '/metrics'), undefined);
});

test('operator requests = after - before - the harness own, writes and reads summed', () => {
  const before: RequestCounts = new Map();
  const after: RequestCounts = new Map();
  const harness: RequestCounts = new Map();
  addCount(before, 'POST', 'secrets', 5);
  addCount(after, 'POST', 'secrets', 25);
  addCount(after, 'GET', 'secrets', 3);
  addCount(after, 'PUT', 'leases', 7); // the API server's own: ignored
  addCount(harness, 'POST', 'secrets', 10);
  const s = summarize(diffCounts(after, before, harness));
  assert.deepEqual(s.byVerb, { POST: 10, GET: 3 });
  assert.equal(s.writes, 10);
  assert.equal(s.reads, 3);
});

test('normalization drops server-set and random fields, keeps the rest', () => {
  const secret = (pw: string, uid: string) =>
    normalize('Secret', {
      metadata: {
        name: 's',
        uid,
        resourceVersion: '1',
        ownerReferences: [{ apiVersion: 'v1', kind: 'D', name: 'd', uid }],
      },
      data: {
        password: Buffer.from(pw).toString('base64'),
        uri: Buffer.from(`mysql://app:${pw}@h`).toString('base64'),
        host: Buffer.from('db-1.default.svc.cluster.local').toString('base64'),
      },
    });
  const a = secret('A'.repeat(16) + 'b1'.repeat(8), 'u1');
  const b = secret('Z'.repeat(16) + 'q9'.repeat(8), 'u2');
  assert.deepEqual(a, b);
  const r = compareSnapshots('x', { 'Secret/s': a }, 'y', { 'Secret/s': secret('short', 'u3') });
  assert.ok(r.childDiffs.length > 0);
});

test('SCRAM verifiers (random salt) compare by mechanism and iterations only', () => {
  const secret = (verifier: string) =>
    normalize('Secret', {
      metadata: { name: 's' },
      data: { scram: Buffer.from(verifier).toString('base64') },
    });
  const a = secret(
    'SCRAM-SHA-256$4096:JpmspmTeMDWZJINjK620hw==$BrxsyuMZPb6l/vAi+bGN=:ijrI9X9lPH9F/vAikbGNjk=',
  );
  const b = secret(
    'SCRAM-SHA-256$4096:1VrXfNZi415uZRmqfHOO9g==$8Ep2lRDxS0dwT0jKO+8P=:/AGJ/l37OjtwenSkEpg5A=',
  );
  assert.deepEqual(a, b);
  assert.notDeepEqual(a, secret('SCRAM-SHA-256$1000:1VrXfNZi415uZRmqfHOO9g==$8Ep2lRDxS0dw=:/AGJ/l37Ojtwen='));
  assert.notDeepEqual(a, secret('md5c4ca4238a0b923820dcc509a6f75849b'));
});

test('a SCRAM verifier must verify the password of its Secret: one of another password differs', () => {
  const pw = 'Abc123xyzAbc123xyzAbc123xyzAbc12';
  const other = 'Zyx321cbaZyx321cbaZyx321cbaZyx32';
  const secret = (verifier: string) =>
    normalize('Secret', {
      metadata: { name: 's' },
      data: {
        'app-password': Buffer.from(pw).toString('base64'),
        'app-password-scram': Buffer.from(verifier).toString('base64'),
      },
    });
  const right = secret(scramVerifier(pw, Buffer.from('0123456789abcdef')));
  assert.deepEqual(right, secret(scramVerifier(pw, Buffer.from('fedcba9876543210'))));
  assert.notDeepEqual(right, secret(scramVerifier(other, Buffer.from('0123456789abcdef'))));
});

test('the report has ratios and a plot', () => {
  assert.equal(median([3, 1, 2]), 2);
  const metrics = [
    {
      scenario: 'convergence',
      n: 100,
      metric: 'convergence time',
      unit: 's',
      values: { opkit: [2, 3, 4], 'controller-runtime': [2] },
    },
    { scenario: 'convergence', n: 100, metric: 'peak RSS', unit: 'MiB', values: { opkit: [100], floor: [] } },
  ];
  const md = markdownTable(metrics);
  assert.match(md, /\| 3\.00 \(2\.00-4\.00\) \| 2\.00 \|/);
  assert.match(md, /\| 1\.50 \|/);
  assert.match(svgPlot(metrics), /^<svg/);
});

test("opkit runs with the Node flags of its image's ENTRYPOINT", () => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-dockerfile-'));
  try {
    const file = join(dir, 'Dockerfile');
    writeFileSync(
      file,
      'FROM node:24\nENTRYPOINT ["node", "--max-semi-space-size=4", "--trace-gc", "src/main.ts"]\nCMD ["--leader-elect"]\n',
    );
    assert.deepEqual(deployedNodeFlags(file), ['--max-semi-space-size=4', '--trace-gc']);
    writeFileSync(file, 'FROM node:24\nENTRYPOINT ["node", "src/main.ts"]\n');
    assert.deepEqual(deployedNodeFlags(file), []);
    writeFileSync(file, 'FROM node:24\nENTRYPOINT ["/bin/sh", "-c", "run"]\n');
    assert.throws(() => deployedNodeFlags(file), /unexpected ENTRYPOINT/);
    // The real one parses, and its flags are what the operator's npm start uses too, with the image's
    // malloc settings.
    const start = JSON.parse(readFileSync(join(REPO_ROOT, 'operators/database/package.json'), 'utf8')).scripts
      .start;
    const malloc = Object.entries(deployedRunEnv())
      .filter(([key]) => key.startsWith('MALLOC_'))
      .map(([key, value]) => `${key}=${value}`);
    assert.deepEqual(malloc, ['MALLOC_ARENA_MAX=1']);
    assert.equal(start, [...malloc, 'node', ...deployedNodeFlags(), 'src/main.ts'].join(' '));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("opkit runs with its image's environment: the compile cache warmed before timing", () => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-dockerfile-'));
  try {
    const file = join(dir, 'Dockerfile');
    writeFileSync(
      file,
      'FROM node:24\nENV NODE_ENV=production\nENV NODE_COMPILE_CACHE=/app/.cc\nENV NODE_COMPILE_CACHE_PORTABLE=1\nENTRYPOINT ["node", "a.ts"]\n',
    );
    assert.deepEqual(deployedEnv(file), {
      NODE_ENV: 'production',
      NODE_COMPILE_CACHE: '/app/.cc',
      NODE_COMPILE_CACHE_PORTABLE: '1',
    });
    // What opkit runs with: the image's settings but the compile cache's (the benchmark warms its own).
    assert.deepEqual(deployedRunEnv(file), { NODE_ENV: 'production' });
    // Under the environment opkit is started with, which wins (--opkit-env MALLOC_ARENA_MAX=0: glibc's default).
    assert.equal(opkitRunEnv({ PATH: '/bin' }, file).NODE_ENV, 'production');
    assert.equal(opkitRunEnv({ NODE_ENV: 'test' }, file).NODE_ENV, 'test');
    assert.equal(opkitRunEnv({}).MALLOC_ARENA_MAX, '1');
    assert.equal(opkitRunEnv({ MALLOC_ARENA_MAX: '0' }).MALLOC_ARENA_MAX, '0');
    writeFileSync(file, 'FROM node:24\nENTRYPOINT ["node", "a.ts"]\n');
    assert.equal(warmCompileCache(join(dir, 'none'), [], file), undefined);
    // The real image warms one, and so does the benchmark: the cache directory has entries afterwards.
    assert.ok(deployedEnv().NODE_COMPILE_CACHE);
    const cache = join(dir, 'cache');
    const env = warmCompileCache(cache, deployedNodeFlags());
    assert.equal(env?.NODE_COMPILE_CACHE, cache);
    assert.equal(env?.NODE_COMPILE_CACHE_PORTABLE, '1', "the image's setting");
    assert.ok(readdirSync(cache, { recursive: true }).length > 1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the bundle the image runs is ASCII: V8 holds its source one byte per character', () => {
  // A bundle over 1 MB with one non-ASCII character is held as a UTF-16 string outside the heap: 2.2 MiB
  // for the whole life of the process instead of 1.1 (heaptrack, 2026-12-07). esbuild escapes
  // non-ASCII characters in strings, not in regular expressions.
  const bytes = readFileSync(opkitMain());
  const at = bytes.findIndex((b) => b > 0x7f);
  assert.equal(
    at,
    -1,
    `non-ASCII at byte ${at}: ${bytes.subarray(Math.max(0, at - 60), at + 10).toString()}`,
  );
});

/** The TLS Secrets of one postgres Database as opkit makes them (new keys each call), normalized together. */
async function tlsSnapshot(uid: string, swapServerFrom?: KubeObject[]) {
  const { desiredChildren, desiredTlsSecrets, inputs } = await import('../../harness/desired.ts');
  const db = { ...inputs(2, 'default')[1]!, metadata: { ...inputs(2, 'default')[1]!.metadata, uid } };
  const credentials = desiredChildren(db).find((c) => c.kind === 'Secret')!;
  const tls = await desiredTlsSecrets(db, credentials);
  const secrets = [credentials, ...tls].map((s) => {
    if (!swapServerFrom || !s.metadata.name.endsWith('-server')) return s;
    return { ...s, data: swapServerFrom.find((o) => o.metadata.name.endsWith('-server'))!.data };
  });
  const ctx = secretContext(secrets);
  return {
    secrets,
    snap: Object.fromEntries(secrets.map((s) => [`Secret/${s.metadata.name}`, normalize('Secret', s, ctx)])),
  };
}

test('TLS Secrets compare by meaning: other keys and serials are equal, a foreign CA is not', async () => {
  const a = await tlsSnapshot('u1');
  const b = await tlsSnapshot('u2');
  assert.notDeepEqual(a.secrets[1]!.data, b.secrets[1]!.data, 'new keys each time');
  assert.deepEqual(compareSnapshots('a', a.snap, 'b', b.snap).childDiffs, []);
  const server = a.snap['Secret/db-00001-server'] as { data: Record<string, string> };
  assert.match(server.data['tls.crt']!, /issued by the CA of Secret db-00001-ca/);
  assert.match(server.data['tls.crt']!, /DNS:db-00001-0\.db-00001-headless\.default\.svc\.cluster\.local/);
  assert.match(server.data['tls.key']!, /private key of tls\.crt/);
  assert.equal(server.data['ca.crt'], '<certificate of the CA of Secret db-00001-ca>');
  const ca = a.snap['Secret/db-00001-ca'] as { data: Record<string, string> };
  assert.match(ca.data['ca.crt']!, /^<CA certificate; .*self-signed/);
  const app = a.snap['Secret/db-00001-app'] as { data: Record<string, string> };
  assert.equal(app.data.password, '<Secret db-00001-credentials app-password>');
  assert.match(app.data.uri!, /:<Secret db-00001-credentials app-password>@/);
  // A server certificate (and its ca.crt) from another Database's CA: named as a difference.
  const c = await tlsSnapshot('u3', b.secrets);
  const diffs = compareSnapshots('a', a.snap, 'c', c.snap).childDiffs;
  assert.ok(
    diffs.some((l) => l.includes('.data.tls.crt') && l.includes('issued by ca.crt of this Secret')),
    diffs.join('\n'),
  );
  assert.ok(diffs.some((l) => l.includes('.data.ca.crt')));
});

test('what a peer does not do yet is a named known difference, not a child difference', () => {
  const ref = { 'Secret/db-00001-ca': { x: 1 }, 'Secret/db-00001-credentials': { x: 1 } };
  const other = { 'Secret/db-00001-credentials': { x: 1 } };
  const tls = {
    id: 'tls',
    name: 'no TLS Secrets yet',
    impls: ['client-node'],
    keys: /^Secret\/.+-(ca|server|app)$/,
  };
  const r = compareSnapshots('opkit', ref, 'client-node', other, [tls]);
  assert.deepEqual(r.childDiffs, []);
  assert.equal(Object.values(r.knownDiffs).flat().length, 1);
  assert.match(Object.keys(r.knownDiffs)[0]!, /no TLS Secrets yet/);
  // For an implementation that makes them, the same gap is a child difference.
  assert.equal(compareSnapshots('opkit', ref, 'floor', other, [tls]).childDiffs.length, 1);
  // Now every implementation makes them and the primary's PDB: no known difference left.
  assert.deepEqual(
    KNOWN_DIFFERENCES.map((d) => d.id),
    [],
  );
  assert.equal(compareSnapshots('opkit', ref, 'client-node', other).childDiffs.length, 1);
});

test("a process's CPU by thread: the main thread apart, the threads' sum within its whole CPU", () => {
  // Burn some CPU on this (the main) thread first.
  const until = performance.now() + 200;
  while (performance.now() < until) Math.sqrt(Math.random());
  const threads = readThreadCpu(process.pid);
  const main = threads.get('main') ?? 0;
  assert.ok(main >= 0.1, `main thread CPU ${main}`);
  const sum = [...threads.values()].reduce((a, b) => a + b, 0);
  const whole = readProc(process.pid)?.cpuSeconds ?? 0;
  // Threads that already ended count in the process's CPU, not in its task list.
  assert.ok(main <= sum && sum <= whole + 0.05, `main ${main} s, threads ${sum} s, process ${whole} s`);
  assert.deepEqual([...readThreadCpu(2 ** 22 + 7)], []);
});

test('readRssByMapping: this process resident by mapping, adding up to its RSS, nothing for a gone process', () => {
  const byMapping = readRssByMapping(process.pid);
  const total = byMapping.reduce((sum, [, bytes]) => sum + bytes, 0);
  const rss = readProc(process.pid)!.rssBytes;
  assert.ok(Math.abs(total - rss) < rss * 0.1, `${total} against VmRSS ${rss}`);
  assert.ok(byMapping.some(([name]) => name === '[anon]'));
  const binary = basename(process.execPath);
  assert.ok(
    byMapping.some(([name]) => name === binary),
    `the ${binary} binary is mapped`,
  );
  for (let i = 1; i < byMapping.length; i++) assert.ok(byMapping[i - 1]![1] >= byMapping[i]![1]);
  assert.deepEqual(readRssByMapping(2 ** 22 + 7), []);
});
