/**
 * A small run of the benchmark harness (N = 3): the floor writer and opkit's operator on a real API
 * server, convergence detected, requests counted from the API server's metrics, the operator's children
 * identical to the floor's (which are opkit's builders' output). Under a minute.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { compareSnapshots } from '../../harness/equivalence.ts';
import { runOnce } from '../../harness/scenarios.ts';

const work = mkdtempSync(join(tmpdir(), 'opkit-bench-smoke-'));
after(() => rmSync(work, { recursive: true, force: true }));

const common = {
  n: 3,
  phases: ['convergence' as const],
  writerConcurrency: 8,
  steadySeconds: 0,
  latencyChanges: 0,
  convergeTimeoutMs: 60_000,
  snapshot: true,
  log: () => {},
};

test('the harness converges the floor and opkit at N=3 with identical children', {
  timeout: 120_000,
}, async () => {
  const floor = await runOnce({ ...common, impl: 'floor', workDir: join(work, 'floor') });
  const opkit = await runOnce({ ...common, impl: 'opkit', workDir: join(work, 'opkit') });
  for (const r of [floor, opkit]) {
    assert.ok(r.convergence, `${r.impl} converged`);
    assert.ok(r.convergence.seconds > 0 && r.convergence.seconds < 60);
  }
  // The floor writes exactly: 3 Databases, their children and 3 status patches.
  const fw = floor.convergence!.requests;
  assert.equal(fw.byVerb.PATCH, 3);
  assert.ok(fw.byVerb.POST !== undefined && fw.byVerb.POST > 3 * 4);
  // The operator wrote at least the same children and the status, and its memory was measured.
  assert.ok(opkit.convergence!.requests.writes >= fw.writes - 3, 'operator writes counted');
  assert.ok((opkit.convergence!.peakRssMiB ?? 0) > 10);
  const eq = compareSnapshots('floor', floor.snapshot ?? {}, 'opkit', opkit.snapshot ?? {});
  assert.deepEqual(eq.childDiffs, []);
  // The postgres Database's TLS Secrets are among them, their certificates compared by meaning.
  const server = opkit.snapshot?.['Secret/db-00001-server'] as { data: Record<string, string> };
  assert.match(server.data['tls.crt'] ?? '', /issued by the CA of Secret db-00001-ca/);
  assert.ok(opkit.snapshot?.['Secret/db-00001-app'] && floor.snapshot?.['Secret/db-00001-app']);
});
